"""semble 0.7.0 through its Python API: `SembleIndex.from_path(dir, model_path=DIR)`, then `.search(query, top_k)`.

Runs in its own virtual environment (pip `semble==0.7.0`), offline: HF_HUB_OFFLINE=1, XDG_CACHE_HOME pointed at a
scratch folder (emptied first, so the index is built, not loaded from semble's cache), and a local Model2Vec model
folder (`--model`). `--alpha 0` is semble's BM25-plus-ranking mode (dense arm weighted zero); `--alpha auto` lets
semble pick its blend from the query (its hybrid default). All content types are indexed (code, docs, config: the
CLI's `--content all`). semble reads no `.txt` file, so the corpus is handed to it as a mirror of hard links in
which `x.txt` is named `x.txt.md` (Markdown); paths are mapped back in the run file.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from common import Recorder, parser, read_queries


def mirror(corpus: Path, dest: Path) -> int:
    """Hard-link (or copy) the corpus into dest, `.txt` files renamed `.txt.md`; returns how many were renamed."""
    if dest.exists():
        shutil.rmtree(dest)
    renamed = 0
    for src in sorted(corpus.rglob("*")):
        if not src.is_file():
            continue
        rel = src.relative_to(corpus).as_posix()
        if rel.endswith(".txt"):
            rel, renamed = rel + ".md", renamed + 1
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, target)
        except OSError:
            shutil.copyfile(src, target)
    return renamed


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a local Model2Vec model folder")
    p.add_argument("--alpha", default="0", help="semantic weight 0..1, or 'auto'")
    p.add_argument("--scratch", required=True, type=Path, help="mirror + XDG cache live here")
    args = p.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["XDG_CACHE_HOME"] = str(args.scratch / "xdg-cache")
    shutil.rmtree(args.scratch / "xdg-cache", ignore_errors=True)
    import semble  # after the environment is set
    from semble import SembleIndex
    from semble.types import ContentType

    root = args.scratch / "corpus"
    renamed = mirror(args.corpus, root)
    alpha = None if args.alpha == "auto" else float(args.alpha)
    rec = Recorder(args)
    rec.start()
    index = SembleIndex.from_path(
        root, model_path=args.model, content=(ContentType.CODE, ContentType.DOCS, ContentType.CONFIG)
    )
    rec.indexed()
    rec.files = index.stats.indexed_files
    rec.units = index.stats.total_chunks
    for qid, text in read_queries(args.queries):
        t = time.perf_counter()
        results = index.search(text, top_k=args.depth, alpha=alpha)
        ranked = []
        for r in results:
            path = r.chunk.file_path
            if renamed and path.endswith(".txt.md"):
                path = path.removesuffix(".md")
            ranked.append(f"corpus/{path}:{r.chunk.start_line}-{r.chunk.end_line}")  # pooled by the scorer
        rec.add(qid, ranked, t)
    rec.write(
        peer="semble", version=getattr(semble, "__version__", "?"), alpha=args.alpha, renamed_txt=renamed
    )


if __name__ == "__main__":
    main()
