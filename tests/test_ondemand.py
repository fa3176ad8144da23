"""Vectors on demand (`kenning.engine.ondemand`): a search over an index whose semantic pass has not run scores its
leading candidates with the transformer, stores their vectors once, and never waits for a writer. Real indexes,
the hash embedder counting what it embeds."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from conftest import make_tree
from kenning.config import Config
from kenning.embed.base import Vectors
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine
from kenning.store.layout import writer_lock


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the passage texts it embeds (queries are embedded one at a time apart)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

        self._query = False

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if not self._query:
            self.texts += len(texts)
        return super().embed_batch(texts)

    def embed_query(self, text: str) -> Vectors:
        self._query = True  # a query is not a passage (the search's own thread embeds it)
        try:
            return super().embed_query(text)
        finally:
            self._query = False


class StopAtSemantic:
    """Progress that cancels the run when its semantic pass starts: the index then has every passage's text and
    no vector, as a fresh root's first answer has it."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel

    def start(self, phase: str, total: int, work: float | None = None) -> None:
        if phase == "semantic":
            self.cancel.set()

    def advance(self, n: int = 1, work: float | None = None) -> None:
        pass

    def finish(self) -> None:
        pass


def _unembedded(tmp_path: Path) -> tuple[Path, Config]:
    files = {
        f"notes/n{i:02}.md": f"# Note {i}\n\nThe heron number {i} stands in the reeds.\n" for i in range(60)
    }
    files["src/flight.py"] = (
        "def take_off(heron):\n    '''The heron opens its wings and leaves the reeds.'''\n"
    )
    root = make_tree(tmp_path / "ws", files)
    config = Config(model="hash")
    cancel = threading.Event()
    with Engine(root, config=config, embedder=HashEmbedder()) as engine:
        report = engine.index(progress=StopAtSemantic(cancel), cancel=cancel)
        assert report.coverage == 0.0
    return root, config


def test_a_search_before_the_semantic_pass_scores_its_leaders_by_meaning_and_stores_them_once(
    tmp_path: Path,
) -> None:
    root, config = _unembedded(tmp_path)
    embedder = CountingEmbedder()
    with Engine(root, config=config, embedder=embedder) as engine:
        [result] = engine.search("heron reeds wings", limit=5, refresh="wait")
        first = embedder.texts
        assert 0 < first <= 40  # the first fusion's leaders, not the whole index
        assert any(h.matched_by == "both" for h in result.hits)  # found by words and now by meaning too
        counts = engine._open().counts()
        assert counts["embedded"] == first  # stored: the semantic pass will not embed them again
        # the same search again embeds nothing new: the stored vectors are read
        engine.search("heron reeds wings", limit=5, refresh="wait")
        assert embedder.texts == first


def test_a_search_keeps_its_vectors_in_memory_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    root, config = _unembedded(tmp_path)
    embedder = CountingEmbedder()
    with Engine(root, config=config, embedder=embedder) as engine:
        with writer_lock(engine.home, operation="index"):
            [result] = engine.search("heron reeds wings", limit=5, refresh="wait")
            assert result.hits and engine.on_demand  # answered, its vectors not stored
            made = embedder.texts
            engine.search("heron reeds wings", limit=5, refresh="wait")
            assert embedder.texts == made  # computed once, whatever the lock
        assert engine._open().counts()["embedded"] == 0
        engine.search("heron reeds", limit=5, refresh="wait")  # the lock is free: stored now
        assert not engine.on_demand and engine._open().counts()["embedded"] >= made


def test_no_time_left_in_the_refresh_bound_embeds_nothing_on_demand(tmp_path: Path) -> None:
    root, _ = _unembedded(tmp_path)
    embedder = CountingEmbedder()
    with Engine(root, config=Config(model="hash", refresh_timeout=0), embedder=embedder) as engine:
        [result] = engine.search("heron reeds wings", limit=5, refresh="wait")
        assert result.hits and embedder.texts == 0
