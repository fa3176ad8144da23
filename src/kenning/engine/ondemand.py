"""Vectors on demand: the transformer's vectors of the few passages a search needs, while the index's semantic pass
has not reached them (a fresh index answers at once and embeds the rest in the background, issue 31).

A search over an index whose semantic pass is not done hands `kenning.search.hybrid.execute` a `Rescore`: the
first fusion's leading candidates without a vector are embedded here, exactly as the index pass would embed
them (`engine.index.embed_batch`: prose whole, in windows; code by its first window), and scored against the
query. Each vector is computed once: it is kept on the Engine for the searches after, and stored in the index
when the writer lock is free at the end of the search (`keep`), so the semantic pass never embeds it again. A
search never waits for the lock: with a writer at work, the vectors stay in memory until a later search can
store them, or the writer embeds those texts itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from kenning import walk
from kenning.embed import Embedder
from kenning.engine.index import embed_batch
from kenning.engine.pool import ehash
from kenning.errors import IndexBusy, IndexError_
from kenning.search.hybrid import Rescore
from kenning.store import Store, WriterLock
from kenning.types import embed_text

# vectors kept in memory while the lock is busy: about 1.5 kB each, so at most a few megabytes
KEEP_LIMIT = 4096
# what one search may spend embedding its leading candidates, within what is left of the refresh's time bound
# (`refresh_timeout`: embedding the passages a search needs is bringing the index up to date too): the default
# model embeds about forty passages a second on two cores
RESCORE_SECONDS = 1.5
BATCH = 8


def rescore(embedder: Embedder, db: Store, made: dict[bytes, np.ndarray], deadline: float) -> Rescore:
    """The vectors of the passages a search asks for: the stored ones, else those an earlier search computed
    (`made`, by text), else embedded now and added to `made`, in the order asked, a batch at a time until
    `deadline` (time.monotonic()) or RESCORE_SECONDS from the first batch, whichever comes first."""
    dim = embedder.dim

    def vectors(ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        wanted = np.array(sorted(ids), dtype=np.int64)
        have_ids, have = db.vectors_of(wanted, dim)
        got = set(have_ids.tolist())
        rows = db.passages_by_id([pid for pid in ids if pid not in got])
        keys = {pid: ehash(embed_text(row.heading, row.text)) for pid, row in rows.items()}
        todo: dict[bytes, tuple[bytes, str, str, bool]] = {}
        for pid, key in keys.items():
            if key not in made and key not in todo:
                row = rows[pid]
                kind = walk.kind_of(row.path)
                todo[key] = (key, row.heading, row.text, kind is not None and kind[0] == "code")
        pending = list(todo.values())  # in the order asked: the first fusion's leaders first
        end = min(deadline, time.monotonic() + RESCORE_SECONDS)
        done = 0
        while done < len(pending) and time.monotonic() < end:
            batch = pending[done : done + BATCH]
            for (key, *_), vector in zip(batch, embed_batch(embedder, batch), strict=True):
                made[key] = np.atleast_2d(np.asarray(vector, np.float32))
            done += len(batch)
        out_ids = [have_ids]
        out = [have]
        for pid, key in keys.items():
            block = made.get(key)
            if block is None:
                continue  # past the time bound: it keeps its place from the words alone
            out_ids.append(np.full(len(block), pid, np.int64))
            out.append(block)
        return np.concatenate(out_ids), np.concatenate(out).reshape(-1, dim)

    return Rescore(vectors)


def keep(writer: WriterLock, connect: Callable[[], Store], made: dict[bytes, np.ndarray]) -> int:
    """Store the vectors searches computed (`made`, emptied), on a writer's connection (`connect`), when the
    writer lock is free now; how many texts were stored. The ones no passage has any more are dropped by the
    store's next prune, as any vector nobody uses. An index that cannot be written here keeps none."""
    if not made:
        return 0
    try:
        with writer.hold(wait=0.0, operation="search"):
            db = connect()
            try:
                db.begin()
                keys = list(made)
                db.add_embeddings(keys, [made[k] for k in keys])
                db.commit()
            finally:
                db.close()
    except (IndexBusy, PermissionError, IndexError_):
        # busy: a writer embeds them (or a later search stores them); unwritable: they stay in memory, bounded
        if len(made) > KEEP_LIMIT:
            made.clear()
        return 0
    made.clear()
    return len(keys)
