"""`kenning related PATH:LINE [ROOT]`: the passages most related to a place (its tests, other implementations, the
docs that name it), with search's filters, previews, budget and JSON.

The place is read as `--path` is: relative to where the user stands when it exists there, else to the root. The
index is the nearest one holding the root (built first when there is none, as `kenning search` does); the search
itself is `Engine.search` with the request's `related` set (see `kenning.engine.related`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kenning.commands import err, make_engine
from kenning.commands.options import context_lines
from kenning.commands.search import _request, index_config, min_score, search_filters, show_hits


def cmd_related(args: argparse.Namespace) -> int:
    from kenning.render import Provenance
    from kenning.search import check_symbol_types
    from kenning.search.request import parse_place
    from kenning.walk import check_root

    started = time.perf_counter()
    place = parse_place(args.place)
    start = check_root(args.root)
    flags = {"preview": args.preview, "limit": args.limit}
    found, config = index_config(start, flags)
    check_symbol_types(args.symbol_type or ())
    selected = search_filters(args)
    engine = make_engine(found or start, config, args.model)
    place = replace(place, path=engine.relative(place.path))
    here = [engine.relative(p) for p in (args.path or [])]
    # what search's request reads that a place does not have: one group, no fusion, no name preference
    plain = argparse.Namespace(**vars(args), fuse=False, prefer_symbol=False)
    request = _request(
        plain,
        [],
        replace(selected, paths=tuple(here)),
        config,
        min_score(args.min_score),
        context_lines(args),
        found is None,
        related=place,
    )
    if found is None:
        err(f"no index for {start} yet: building one first")
        from kenning.commands.index import INTERRUPTED, RESUME, build
        from kenning.errors import Interrupted

        if build(engine).interrupted:
            raise Interrupted(INTERRUPTED, hint=RESUME)
    results = engine.search(request)
    source = Provenance(str(engine.root), engine.model_name, started)
    return show_hits(results, request.preview, request.budget, args, source)


def add_arguments(
    command: Callable[[str, str], Any], flag: Callable[..., None], budget_and_filters: Callable[..., None]
) -> None:
    """`kenning related`'s parser (built here, beside the command, as snapshot's is): the place, the root, and
    search's filters, preview, budget and output. `command`, `flag` and `budget_and_filters` are the CLI's
    helpers."""
    p = command(
        "related", "The passages most related to PATH:LINE or PATH:START-END: tests, implementations, docs."
    )
    p.add_argument("place", metavar="PATH:LINE")
    p.add_argument("root", nargs="?", default=".", metavar="ROOT")
    arm = p.add_mutually_exclusive_group()
    flag(arm, "--lexical", "by its names only")
    flag(arm, "--semantic", "by its meaning only")
    p.add_argument("-k", "--limit", type=int, help="hits (default 10; 50 ranked with --budget)")
    budget_and_filters(p)
    p.add_argument("--symbol-type", action="append", metavar="KIND", help="only code passages of this kind")
    p.add_argument("--preview", choices=("none", "short", "full"), help="passage text shown")
    flag(p, "--trace", "show each hit's rank and score in each arm")
    p.add_argument("-A", "--after-context", type=int, default=0, metavar="N")
    p.add_argument("-B", "--before-context", type=int, default=0, metavar="N")
    p.add_argument("-C", "--context", type=int, metavar="N")
    flag(p, "--json", "JSON Lines, as kenning search writes them")
    p.add_argument("--min-score", metavar="LEVEL", help="as kenning search's")
    p.add_argument("--model", help="search the index of this embedder")
    p.add_argument("--refresh", choices=("wait", "background", "off"), default="wait")
