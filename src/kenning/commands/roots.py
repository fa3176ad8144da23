"""`kenning search QUERY ROOT1 ROOT2 ...`: one search over several roots, each with its own index (a folder's, or a
PostgreSQL store's), merged into one ranking on one scale (`kenning.engine.roots`).

Each hit names its root: its path is the root as given joined with the path inside it. Filters apply in each root
(a `--path` in each root that has it); a root without an index is named in one note, never skipped in silence,
and none is built here (`kenning index ROOT` builds one). The output is search's, text or JSON Lines.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from kenning.commands import make_engine
from kenning.commands.options import context_lines
from kenning.commands.search import (
    _request,
    index_config,
    min_score,
    search_filters,
    search_inputs,
    search_roots,
    show_hits,
)
from kenning.commands.search import cmd_search as search_one
from kenning.errors import UsageError

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from kenning.engine import Engine
    from kenning.types import SearchResult


def cmd_search(args: argparse.Namespace) -> int:
    """`kenning search`: over several roots here, over one by `kenning.commands.search`."""
    roots = search_roots(args)
    if len(roots) > 1:
        return cmd_search_roots(args, search_inputs(args)[0], roots)
    return search_one(args)


def cmd_search_roots(args: argparse.Namespace, queries: list[str], roots: list[str]) -> int:
    from kenning.engine.roots import merged_hits, search_roots
    from kenning.render import Provenance
    from kenning.search import check_symbol_types
    from kenning.walk import check_root

    started = time.perf_counter()
    if getattr(args, "files", False):
        raise UsageError("--files searches one root", hint="search each root on its own, or drop --files")
    if args.no_index:
        raise UsageError(
            "--no-index searches one root", hint="search each root on its own, or drop --no-index"
        )
    check_symbol_types(args.symbol_type or ())
    flags = {"preview": args.preview, "limit": args.limit, "store": args.store, "store_name": args.store_name}
    selected = search_filters(args)
    engines: list[Engine] = []
    shown: dict[Path, str] = {}
    for given in roots:
        start = check_root(given)
        found, config = index_config(start, flags)
        engine = make_engine(found or start, config, args.model)
        if engine.root not in {e.root for e in engines}:
            engines.append(engine)
            shown[engine.root] = given if found in (None, start) else str(engine.root)
    config = engines[0].config
    here = tuple(args.path or ())
    if here and not any(os.path.lexists(e.root / p) for e in engines for p in here):
        raise UsageError(
            f"no root holds {here[0]!r}", hint="a --path with several roots is relative to each root"
        )
    request = _request(args, queries, selected, config, min_score(args.min_score), context_lines(args), False)
    merged = search_roots([e for e in engines], request, paths=here)
    limit = request.limit or 10
    results: list[SearchResult] = []
    for g, first in enumerate(merged.per_root[0][1] if merged.per_root else []):
        hits = [
            replace(h, path=os.path.join(shown[e.root], h.path))
            for e, h in merged_hits(merged.per_root, g, limit)
        ]
        notes = [n for e, rs in merged.per_root for n in rs[g].notes]
        judged = [c for _, rs in merged.per_root if (c := rs[g].confidence) is not None]
        results.append(
            replace(
                first,
                hits=hits,
                notes=[*merged.notes, *dict.fromkeys(notes)],
                searched=sum(rs[g].searched for _, rs in merged.per_root),
                confidence=next((c for c in judged if c.good), judged[0] if judged else None),
            )
        )
    if not results:
        raise UsageError(merged.notes[0] if merged.notes else "no root to search", hint="index a root first")
    source = Provenance(os.pathsep.join(str(e.root) for e in engines), engines[0].model_name, started)
    return show_hits(results, request.preview, request.budget, args, source)
