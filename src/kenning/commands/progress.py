"""Progress display for long runs: a rich progress bar on a terminal, plain lines otherwise (stderr only).

Both show the time left from the rate of the last ``WINDOW`` seconds, counted in the run's own measure of work
when it gives one (characters, for the semantic pass): its passages are embedded shortest first, so a rate in
passages falls all through the pass, and a time left from it (or from the average since the start) was too
short from start to end (``512/2798 0:00:37`` with 130 s to go, rising).
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

#: Seconds of recent work the rate is measured over: long enough to smooth batches, short enough to follow.
WINDOW = 20.0
#: Seconds between two progress lines without a terminal (CI, an agent's shell, a log).
LINE_INTERVAL = 5.0


class RateMeter:
    """Time left to do ``total`` units of work, from the rate over the last ``window`` seconds."""

    def __init__(
        self, total: float, window: float = WINDOW, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.window, self._clock = total, window, clock
        self.done = 0.0
        self._samples: deque[tuple[float, float]] = deque([(clock(), 0.0)])

    def add(self, work: float) -> None:
        self.done += work
        now = self._clock()
        self._samples.append((now, self.done))
        # keep one sample at or before the window's start, so the window is always full once it can be
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window:
            self._samples.popleft()

    def rate(self) -> float | None:
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 and d1 > d0 else None

    def left(self) -> float | None:
        """Seconds to go, or None before any work was measured."""
        rate = self.rate()
        return max(0.0, self.total - self.done) / rate if rate else None


def clock_text(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class LineProgress:
    """A line when a phase starts, one every ``interval`` seconds while it runs (done/total, rate, time left),
    and one when it ends: a log or a pipe gets news of a long pass without a redrawn bar's noise."""

    def __init__(self, stream: TextIO | None = None, interval: float | None = None) -> None:
        self._stream = stream or sys.stderr
        if interval is None:
            interval = float(os.environ.get("KENNING_PROGRESS_INTERVAL") or LINE_INTERVAL)
        self._interval = interval
        self._phase = ""
        self._total = 0
        self._done = 0
        self._t = 0.0
        self._last = 0.0
        self._meter = RateMeter(0)
        self._weighted = False

    def start(self, phase: str, total: int, work: float | None = None) -> None:
        self._phase, self._total, self._done = phase, total, 0
        self._t = self._last = time.monotonic()
        self._weighted = work is not None
        self._meter = RateMeter(work if work is not None else total)
        self._stream.write(f"kenning: {phase} pass over {total} {self._unit}\n")
        self._stream.flush()

    @property
    def _unit(self) -> str:
        return "files" if self._phase == "lexical" else "passages"

    def advance(self, n: int = 1, work: float | None = None) -> None:
        self._done += n
        self._meter.add(work if self._weighted and work is not None else n)
        now = time.monotonic()
        if now - self._last >= self._interval and self._done < self._total:
            self._last = now
            rate = self._done / (now - self._t) if now > self._t else 0.0
            self._stream.write(
                f"kenning: {self._phase} {self._done}/{self._total} {self._unit} "
                f"({self._done / self._total:.0%}), {rate:.0f}/s, {clock_text(self._meter.left())} left\n"
            )
            self._stream.flush()

    def finish(self) -> None:
        self._stream.write(f"kenning: {self._phase} pass done in {time.monotonic() - self._t:.1f}s\n")
        self._stream.flush()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            # rich's own estimate counts tasks, not their work: ours is in the pass's measure of work
            TextColumn("{task.fields[left]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task: Any = None
        self._meter = RateMeter(0)
        self._weighted = False

    def start(self, phase: str, total: int, work: float | None = None) -> None:
        label = "words   " if phase == "lexical" else "meaning "
        self._weighted = work is not None
        self._meter = RateMeter(work if work is not None else total)
        self._task = self._progress.add_task(label, total=total, left=clock_text(None))

    def advance(self, n: int = 1, work: float | None = None) -> None:
        if self._task is not None:
            self._meter.add(work if self._weighted and work is not None else n)
            self._progress.update(self._task, advance=n, left=clock_text(self._meter.left()))

    def finish(self) -> None:
        if self._task is not None:
            self._progress.update(self._task, left=clock_text(0))
        self._task = None

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(t, e, tb)


def make_progress(stream: TextIO | None = None) -> LineProgress | RichProgress:
    """A bar on a terminal, lines elsewhere (a pipe, a log, or a daemon relaying to its client)."""
    stream = stream or sys.stderr
    return RichProgress() if stream is sys.stderr and stream.isatty() else LineProgress(stream)
