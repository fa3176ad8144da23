"""Bring cached indexes up to this source's revision by an index run over a copy, not a build from nothing.

    python bench/quality/reseed.py --from 0.1.0+9cd281f477 [--sets codeset,rich,celery-faq,cosqa]
                                   [--cache ~/.cache/kenning-bench] [--into DIR]

For a change to chunking (the chunker version changes): each set's index built by the revision `--from` (its
`kenning_revision()`) is copied to where this source's revision keys it (under `--into`, the cache by default), and
`kenning index` then runs over the copy as bench/quality/run.py would (`open_index`): every file is chunked again,
and only the passage texts the embedding cache has no vector for are embedded (on the code set, 6 to 231 passages a
set instead of all of them). The result holds the passages, terms and vectors a fresh build makes; passage ids
differ, which only ever breaks exact ties. A set with no index of that revision is left alone, saying so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from kenning_run import DEFAULT, index_home, kenning_revision, open_index  # noqa: E402

from codeset_multi import set_names  # noqa: E402
from sets import resolve  # noqa: E402

WORK = HERE.parent / ".work"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--from", dest="revision", required=True, help="the revision whose indexes to copy")
    parser.add_argument("--sets", default="codeset,rich,celery-faq,cosqa")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--into", help="the cache to write (default: --cache)")
    args = parser.parse_args(argv)
    cache = Path(args.cache).expanduser()
    into = Path(args.into).expanduser() if args.into else cache
    names: list[str] = []
    for spec in args.sets.split(","):
        names += set_names() if spec == "codeset" else [spec]
    print(f"this source: {kenning_revision()}", file=sys.stderr)
    for name in names:
        s = resolve(name, WORK)
        source, target = index_home(s, DEFAULT, cache, args.revision), index_home(s, DEFAULT, into)
        if not (target / "bench-build.json").is_file():
            if not (source / "bench-build.json").is_file():
                print(f"[{name}] no index of {args.revision} at {source}: left alone", file=sys.stderr)
                continue
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
        started = time.perf_counter()
        engine, _ = open_index(s, DEFAULT, into, fresh=False)
        engine.close()
        print(f"[{name}] {target.name}: up to date in {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
