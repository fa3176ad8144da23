"""`kenning search`: the query groups and root from the command line, the search of the nearest index (built
first when there is none), and the literal exhaustive fallback of `--no-index` where no index exists.

The exit code says whether something was found: with `--min-score`, something that matches well.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from kenning.commands import err, make_engine, out, stdout
from kenning.commands.options import context_lines, globs_and_types
from kenning.errors import Interrupted, UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from pathlib import Path

    from kenning.config import Config
    from kenning.engine import Engine
    from kenning.render import Provenance
    from kenning.render.budget import Packed
    from kenning.search import Filters, SearchRequest
    from kenning.search.request import Place
    from kenning.types import Mode, Preview, SearchResult


def cmd_search(args: argparse.Namespace) -> int:
    from kenning.render import Provenance
    from kenning.search import check_symbol_types
    from kenning.walk import check_root

    started = time.perf_counter()
    queries, root_arg = search_inputs(args)
    start = check_root(root_arg)
    flags = {
        "preview": args.preview,
        "limit": args.limit,
        "store": getattr(args, "store", None),
        "store_name": getattr(args, "store_name", None),
    }
    found, config = index_config(start, flags)
    # the literal fallback applies no symbol kind, but an unknown one is refused there too
    check_symbol_types(args.symbol_type or ())
    level = min_score(args.min_score)
    before, after = context_lines(args)
    if found is None and args.no_index:
        return _literal(start, queries, config, args, started)
    selected = search_filters(args)
    engine = make_engine(found or start, config, args.model)
    # relative to where the user stands when it exists there (as every other tool reads a path), else to the root
    here = [engine.relative(p) for p in (args.path or [])]
    if not here and found is not None and start != found:
        here = [engine.relative(start)]  # searching from a subdirectory searches that subtree
    # every value is checked here, before any index is built: a typo must not cost a full indexing run
    request = _request(
        args, queries, replace(selected, paths=tuple(here)), config, level, (before, after), found is None
    )
    # a search by meaning alone has nothing to rank before the vectors exist: its first index embeds them all
    wait = bool(getattr(args, "wait", False)) or bool(getattr(args, "semantic", False))
    if found is None:
        first_index(engine, start, wait)
    results = engine.search(request)
    source = Provenance(str(engine.root), engine.model_name, started)
    if request.files:
        code = _show_files(results, request, args, source)
    else:
        code = show_hits(results, request.preview, request.budget, args, source)
    if not wait:
        stdout().flush()  # the answer is out before the background run is started
        engine.complete_in_background()  # after a file search too: it leaves the semantic pass no more pending
    return code


def index_config(start: Path, flags: dict[str, Any]) -> tuple[Path | None, Config]:
    """The root of the nearest index holding `start` (None: there is none yet) and the configuration to search
    it with: that root's (else `start`'s), with the command line's `flags` over it."""
    from kenning.config import load_config
    from kenning.engine import find_index_root

    config = load_config(start).with_overrides(**flags)
    found = find_index_root(start, config)
    if found is not None:
        config = load_config(found).with_overrides(**flags)
    return found, config


def search_filters(args: argparse.Namespace) -> Filters:
    """The files `-g`/`-t` keep, checked now: a bad glob or type is refused before an Engine is made (compiled
    once: cached)."""
    from kenning.search import Filters

    selected = Filters(**globs_and_types(args))
    selected.matcher()
    return selected


def show_hits(
    results: Sequence[SearchResult],
    preview: Preview,
    budget: int | None,
    args: argparse.Namespace,
    source: Provenance,
) -> int:
    """Print a passage search: JSON Lines with `--json`, else text, packed into `budget` tokens when given; the
    exit code."""
    from kenning.render import render_json, render_packed_text, render_text

    packed = _pack(results, budget, preview) if budget else None
    if args.json:
        out(render_json(results, preview, source, packed))
    elif packed is not None:
        out(render_packed_text(results, packed))
    else:
        out(render_text(results, preview))
    return found_code(results, args.min_score is not None)


def first_index(engine: Engine, start: Path, wait: bool) -> None:
    """A root's first index, before its first search: its words only, the semantic pass left pending (a
    background run does it after the answer), or everything with `--wait`. Interrupted when stopped."""
    from kenning.commands.index import INTERRUPTED, RESUME, build

    if wait:
        err(f"no index for {start} yet: building one first (use --no-index to skip)")
    else:
        err(
            f"no index for {start} yet: indexing its words first, then answering; the embeddings follow in the "
            "background (--wait: all before the answer; --no-index: none at all)"
        )
    if build(engine, semantic=True if wait else "later").interrupted:
        raise Interrupted(INTERRUPTED, hint=RESUME)


def _show_files(
    results: Sequence[SearchResult],
    request: SearchRequest,
    args: argparse.Namespace,
    source: Provenance,
) -> int:
    """Print a file search (`--files`), packed into its budget when it has one; the exit code."""
    from kenning.render.files import (
        pack_files,
        render_files_json,
        render_files_text,
        render_packed_files_text,
    )

    packed = None
    if request.budget:
        from kenning.render.budget import RESERVE
        from kenning.render.tokens import counter

        count = counter()
        notes = sum(count.count(n) for r in results for n in r.notes)
        packed = pack_files(results, request.budget, request.preview, count, RESERVE + notes)
    if args.json:
        out(render_files_json(results, request.preview, source, packed))
    elif packed is not None:
        out(render_packed_files_text(results, packed, request.preview))
    else:
        out(render_files_text(results, request.preview))
    return found_code(results, args.min_score is not None)


def _pack(results: Sequence[SearchResult], budget: int, preview: Preview) -> Packed:
    """The hits that fit the budget, counted as the text output shows them."""
    from kenning.render.budget import RESERVE, candidates, pack, text_cost
    from kenning.render.tokens import counter

    count = counter()
    notes = sum(count.count(n) for r in results for n in r.notes)
    found = candidates([(r.query, r.hits) for r in results])
    cost = text_cost(count, labels=len(results) > 1)
    return pack(found, budget, cost, count, preview=preview, reserve=RESERVE + notes)


def _request(
    args: argparse.Namespace,
    queries: list[str],
    selected: Filters,
    config: Config,
    level: float | None,
    context: tuple[int, int],
    built: bool,
    related: Place | None = None,
) -> SearchRequest:
    """The search the command line asks for, within the `selected` files; `built` when the index is about to
    be built from the files as they are, so there is nothing to refresh; `related` for `kenning related`."""
    from kenning.search import SearchRequest, parse_time

    mode: Mode = "lexical" if args.lexical else "semantic" if args.semantic else "hybrid"
    filters = replace(
        selected,
        modified_after=parse_time(args.modified_after) if args.modified_after else None,
        modified_before=parse_time(args.modified_before) if args.modified_before else None,
        symbol_types=tuple(args.symbol_type or ()),
    )
    return SearchRequest(
        tuple(queries),
        mode=mode,
        # with a budget, the budget decides how many hits are shown, out of BUDGET_POOL unless -k says
        limit=args.limit if args.budget and args.limit else None if args.budget else config.limit,
        filters=filters,
        fuse=args.fuse,
        trace=args.trace,
        prefer_symbol=args.prefer_symbol,
        refresh="off" if built else args.refresh,
        match_level=level,
        preview=cast("Preview", config.preview),
        before=context[0],
        after=context[1],
        budget=args.budget,
        related=related,
        files=bool(getattr(args, "files", False)),
    )


def search_inputs(args: argparse.Namespace) -> tuple[list[str], str]:
    """The query groups and the (first) root, from `search QUERY [ROOT...]` or `search -q A -q B [ROOT...]`."""
    queries = list(args.queries or [])
    roots = _given_roots(args)
    root_arg = roots[0] if roots else "."
    if args.query is not None:
        # `search -q A -q B ROOT` puts the root first; a positional that is no directory is a query
        if queries and (not roots or roots == ["."]) and os.path.isdir(os.path.expanduser(args.query)):
            root_arg = args.query
        elif queries and roots and os.path.isdir(os.path.expanduser(args.query)):
            root_arg = args.query  # `search -q A ROOT1 ROOT2`: the first root came as the query
        else:
            queries.insert(0, args.query)
    if not queries:
        raise UsageError("no query given", hint='kenning search "what you are looking for" [ROOT]')
    return queries, root_arg


def _given_roots(args: argparse.Namespace) -> list[str]:
    # a list from the command line (`search QUERY ROOT...`), a string from a daemon's routed request
    root = args.root
    return [root] if isinstance(root, str) else list(root or [])


def search_roots(args: argparse.Namespace) -> list[str]:
    """Every root `search` was given, in order (one: `.` by default)."""
    _, first = search_inputs(args)
    rest = _given_roots(args)
    return list(dict.fromkeys([first, *rest]))


def min_score(text: str | None) -> float | None:
    """--min-score's level: None for the model's own (`auto`, or no flag)."""
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        level = float(text)
    except ValueError:
        level = float("nan")
    if not -1.0 <= level <= 1.0:  # NaN fails too
        raise UsageError(
            f"--min-score {text!r} is not a cosine similarity",
            hint="give a number from -1 to 1, or `auto` for the model's calibrated level",
        )
    return level


def found_code(results: Sequence[Any], strict: bool) -> int:
    """The exit code: 0 when something was found (with --min-score, something that matches well), else 1."""
    from kenning.render import matches_well

    return 0 if any(r.hits and (not strict or matches_well(r)) for r in results) else 1


def _literal(start: Path, queries: list[str], config: Any, args: argparse.Namespace, started: float) -> int:
    from kenning.render import Provenance
    from kenning.search.literal import NOTE, literal_results
    from kenning.search.request import BUDGET_POOL
    from kenning.types import Selection

    source = Provenance(str(start), "none", started, literal=True)
    selection = Selection(**globs_and_types(args))
    unapplied = [
        flag
        for flag, given in (
            ("--symbol-type", args.symbol_type),
            ("--prefer-symbol", args.prefer_symbol),
            ("--modified-after", args.modified_after),
            ("--modified-before", args.modified_before),
        )
        if given
    ]
    paths = [start / p for p in args.path or ()]
    if args.budget is not None:
        from kenning.search import SearchRequest

        SearchRequest(
            tuple(queries), budget=args.budget
        )  # the budget is refused as an indexed search refuses it
    limit = args.limit or (BUDGET_POOL if args.budget else config.limit)
    if getattr(args, "files", False):
        from kenning.search import SearchRequest
        from kenning.search.files import FILE_POOL, rank_files

        request = SearchRequest(
            tuple(queries), budget=args.budget, files=True, limit=args.limit, preview=config.preview
        )
        results = literal_results(
            start, queries, limit=FILE_POOL, selection=selection, paths=paths, unapplied=unapplied
        )
        for result in results:
            result.files = rank_files(result.hits, request.plan(config.limit).files)
            result.hits = [h for f in result.files for h in f.passages]
        if not args.json:
            err(NOTE)
        return _show_files(results, request, args, source)
    results = literal_results(
        start, queries, limit=limit, selection=selection, paths=paths, unapplied=unapplied
    )
    if not args.json:
        err(NOTE)
    return show_hits(results, config.preview, args.budget, args, source)
