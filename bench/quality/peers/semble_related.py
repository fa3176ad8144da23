"""semble 0.7.0's `find-related` through its Python API: `SembleIndex.from_path(dir, model_path=DIR)`, then for each
place `resolve_chunk(index.chunks, path, line)` (the chunk its CLI and MCP tool resolve) and
`index.find_related(chunk, top_k)`.

Runs in semble's own virtual environment, offline, as semble_peer.py does (HF_HUB_OFFLINE=1, a scratch
XDG_CACHE_HOME emptied first, a local Model2Vec folder, every content type indexed, `.txt` files mirrored as
`.txt.md`). Each query's text is the place, `path:line` relative to the corpus. A place semble holds no chunk for is
written with an empty ranking.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from common import Recorder, parser, read_queries
from semble_peer import mirror


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a local Model2Vec model folder")
    p.add_argument("--scratch", required=True, type=Path, help="mirror + XDG cache live here")
    args = p.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["XDG_CACHE_HOME"] = str(args.scratch / "xdg-cache")
    shutil.rmtree(args.scratch / "xdg-cache", ignore_errors=True)
    import semble  # after the environment is set
    from semble import SembleIndex
    from semble.types import ContentType
    from semble.utils import resolve_chunk

    root = args.scratch / "corpus"
    renamed = mirror(args.corpus, root)
    rec = Recorder(args)
    rec.start()
    index = SembleIndex.from_path(
        root, model_path=args.model, content=(ContentType.CODE, ContentType.DOCS, ContentType.CONFIG)
    )
    rec.indexed()
    rec.files = index.stats.indexed_files
    rec.units = index.stats.total_chunks
    missing = 0
    for qid, text in read_queries(args.queries):
        path, _, line = text.rpartition(":")
        t = time.perf_counter()
        chunk = resolve_chunk(index.chunks, path, int(line))
        results = [] if chunk is None else index.find_related(chunk, top_k=args.depth)
        missing += chunk is None
        ranked = []
        for r in results:
            found = r.chunk.file_path
            if renamed and found.endswith(".txt.md"):
                found = found.removesuffix(".md")
            ranked.append(f"corpus/{found}:{r.chunk.start_line}-{r.chunk.end_line}")
        rec.add(qid, ranked, t)
    rec.write(peer="semble find-related", version=getattr(semble, "__version__", "?"), unresolved=missing)


if __name__ == "__main__":
    main()
