"""Progress for long runs: lines at a steady pace without a terminal, an honest time left, true pass times."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from conftest import make_tree
from kenning.commands.progress import LineProgress, RateMeter
from kenning.embed.base import Vectors
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_time_left_follows_the_work_when_items_grow_longer() -> None:
    # The semantic pass embeds shortest texts first, so items get slower as it goes. Simulated at 1,000
    # characters a second: the time left, measured in characters over a window, stays near the truth, where
    # the count of items would be wrong the whole way (the bug: 37 s shown with 130 s left, and rising).
    lengths = [100 + 4 * i for i in range(1000)]
    clock = FakeClock()
    meter = RateMeter(sum(lengths), window=20.0, clock=clock)
    by_count = RateMeter(len(lengths), window=20.0, clock=clock)  # the same run, counted in items
    remaining = float(sum(lengths))
    errors, count_errors = [], []
    for i, n in enumerate(lengths):
        clock.now += n / 1000.0
        remaining -= n
        meter.add(n)
        by_count.add(1)
        if i in (200, 500, 800):
            truth = remaining / 1000.0
            left, naive = meter.left(), by_count.left()
            assert left is not None and naive is not None
            errors.append(abs(left - truth) / truth)
            count_errors.append(abs(naive - truth) / truth)
    assert max(errors) < 0.1, errors
    assert min(count_errors) > max(errors)  # what counting items would have shown


def test_time_left_is_unknown_before_any_work() -> None:
    clock = FakeClock()
    meter = RateMeter(10, clock=clock)
    assert meter.left() is None
    clock.now += 1
    meter.add(5)
    assert meter.left() == 1.0


class SlowEmbedder(HashEmbedder):
    """The hash embedder, a millisecond per 50 characters: long enough for progress lines to be due."""

    def __init__(self, on_batch: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.on_batch = on_batch

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        time.sleep(sum(len(t) for t in texts) / 50_000)
        if self.on_batch is not None:
            self.on_batch()
        return super().embed_batch(texts)


def _tree(root: Path, n: int) -> Path:
    return make_tree(
        root,
        {
            f"docs/note{i}.md": f"# Note {i}\n\n" + f"word{i} and more text here. " * (5 + i % 40)
            for i in range(n)
        },
    )


def test_progress_without_a_terminal_prints_lines_while_the_semantic_pass_runs(tmp_path: Path) -> None:
    # Without a terminal `kenning index` said "semantic pass over 2212 passages", then nothing for 116 s.
    root = _tree(tmp_path / "ws", 300)
    out = io.StringIO()
    engine = Engine(root, embedder=SlowEmbedder())
    try:
        engine.index(progress=LineProgress(out, interval=0.0))
    finally:
        engine.close()
    lines = [line for line in out.getvalue().splitlines() if line.startswith("kenning: semantic ")]
    middle = [line for line in lines if " left" in line]
    total = int(lines[0].removeprefix("kenning: semantic pass over ").split()[0])
    assert total >= 300  # a passage or more a note
    assert middle, lines
    assert all(f"/{total} passages (" in line and "/s, " in line for line in middle)
    assert lines[-1].startswith("kenning: semantic pass done in ")


def test_regression_an_interrupted_index_reported_no_time_for_the_semantic_pass(tmp_path: Path) -> None:
    # Stopped during the semantic pass, the summary said "0.0s meaning" whatever time that pass had taken.
    root = _tree(tmp_path / "ws", 300)
    cancel = threading.Event()
    batches = []

    def after_a_batch() -> None:
        batches.append(1)
        time.sleep(0.05)
        if len(batches) == 2:
            cancel.set()

    engine = Engine(root, embedder=SlowEmbedder(after_a_batch))
    try:
        report = engine.index(cancel=cancel)
    finally:
        engine.close()
    assert report.interrupted
    assert 0 < report.embedded < 300
    assert report.semantic_seconds >= 0.1
    assert report.lexical_seconds > 0
