"""Progress display for long runs: a rich progress bar on a terminal, plain phase lines otherwise (stderr only)."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO


class LineProgress:
    """Phase start/end lines, for logs and pipes where a redrawn bar would be noise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._phase = ""
        self._total = 0
        self._done = 0
        self._t = 0.0

    def start(self, phase: str, total: int) -> None:
        self._phase, self._total, self._done, self._t = phase, total, 0, time.perf_counter()
        unit = "files" if phase == "lexical" else "passages"
        self._stream.write(f"kenning: {phase} pass over {total} {unit}\n")

    def advance(self, n: int = 1) -> None:
        self._done += n

    def finish(self) -> None:
        self._stream.write(f"kenning: {self._phase} pass done in {time.perf_counter() - self._t:.1f}s\n")

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class RichProgress:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task: Any = None

    def start(self, phase: str, total: int) -> None:
        label = "words   " if phase == "lexical" else "meaning "
        self._task = self._progress.add_task(label, total=total)

    def advance(self, n: int = 1) -> None:
        if self._task is not None:
            self._progress.advance(self._task, n)

    def finish(self) -> None:
        self._task = None

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._progress.__exit__(t, e, tb)


def make_progress(stream: TextIO | None = None) -> LineProgress | RichProgress:
    """A bar on a terminal, phase lines elsewhere (a pipe, a log, or a daemon relaying to its client)."""
    stream = stream or sys.stderr
    return RichProgress() if stream is sys.stderr and stream.isatty() else LineProgress(stream)
