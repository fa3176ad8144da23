"""Search: what a search asks for, running it over an index, and the searches that need no index.

    request.py   SearchRequest (one search, checked once), Filters, the Plan it runs as, parse_time
    hybrid.py    running a plan: the lexical and semantic routes over a store, restricted before ranking
    rank.py      fusion of the arms, test-file demotion, the order and the hits
    literal.py   exhaustive literal search for a question where there is no index
    outline.py   a file's symbol outline (`kenning symbols`, grep's annotations, MCP)
    grep/        `kenning grep`: exhaustive, index-free regex search

The names below are loaded from their module on first use, so that `kenning grep` or `kenning symbols`, which
import a submodule, do not pay for numpy and the hybrid search they never run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kenning._lazy import exports

if TYPE_CHECKING:
    from kenning.search.hybrid import allowed_passages, execute, judge, load_beside
    from kenning.search.rank import (
        NORM_DEPTH,
        TEST_FILE_WEIGHT,
        demote_tests,
        factor_for_tests,
        fuse_scores,
        fusion_weights,
    )
    from kenning.search.request import (
        MIN_DEPTH,
        SYMBOL_FIRST,
        Filters,
        Group,
        Plan,
        Route,
        SearchRequest,
        as_request,
        check_symbol_types,
        parse_time,
        plan_search,
    )

_WHERE = {
    "MIN_DEPTH": "kenning.search.request",
    "SYMBOL_FIRST": "kenning.search.request",
    "Filters": "kenning.search.request",
    "Group": "kenning.search.request",
    "Plan": "kenning.search.request",
    "Route": "kenning.search.request",
    "SearchRequest": "kenning.search.request",
    "as_request": "kenning.search.request",
    "check_symbol_types": "kenning.search.request",
    "parse_time": "kenning.search.request",
    "plan_search": "kenning.search.request",
    "NORM_DEPTH": "kenning.search.rank",
    "TEST_FILE_WEIGHT": "kenning.search.rank",
    "demote_tests": "kenning.search.rank",
    "factor_for_tests": "kenning.search.rank",
    "fuse_scores": "kenning.search.rank",
    "fusion_weights": "kenning.search.rank",
    "allowed_passages": "kenning.search.hybrid",
    "execute": "kenning.search.hybrid",
    "judge": "kenning.search.hybrid",
    "load_beside": "kenning.search.hybrid",
}

__all__ = [
    "MIN_DEPTH",
    "NORM_DEPTH",
    "SYMBOL_FIRST",
    "TEST_FILE_WEIGHT",
    "Filters",
    "Group",
    "Plan",
    "Route",
    "SearchRequest",
    "allowed_passages",
    "as_request",
    "check_symbol_types",
    "demote_tests",
    "execute",
    "factor_for_tests",
    "fuse_scores",
    "fusion_weights",
    "judge",
    "load_beside",
    "parse_time",
    "plan_search",
]
__getattr__ = exports(__name__, _WHERE)
