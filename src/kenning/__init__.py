"""kenning: local hybrid search (BM25 + embeddings) over a workspace of code and documents.

    from kenning import Engine
    with Engine("~/src/project") as engine:
        engine.index()
        for hit in engine.search("where do we retry failed uploads")[0].hits:
            print(f"{hit.path}:{hit.start_line}-{hit.end_line}", round(hit.score, 4), hit.matched_by)

Pipeline stages, each importable alone: walk -> chunk -> embed -> store -> search -> render.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kenning._lazy import exports

if TYPE_CHECKING:
    from kenning.engine import Engine, Status, find_index_root
    from kenning.engine.index import IndexReport
    from kenning.errors import KenningError
    from kenning.search import Filters, SearchRequest
    from kenning.types import Hit, Passage, SearchResult, Selection

_WHERE = {
    "Engine": "kenning.engine",
    "Filters": "kenning.search.request",
    "Hit": "kenning.types",
    "IndexReport": "kenning.engine.index",
    "KenningError": "kenning.errors",
    "Passage": "kenning.types",
    "SearchRequest": "kenning.search.request",
    "SearchResult": "kenning.types",
    "Selection": "kenning.types",
    "Status": "kenning.engine",
    "find_index_root": "kenning.engine",
}

__all__ = [
    "Engine",
    "Filters",
    "Hit",
    "IndexReport",
    "KenningError",
    "Passage",
    "SearchRequest",
    "SearchResult",
    "Selection",
    "Status",
    "find_index_root",
]


__getattr__ = exports(__name__, _WHERE)
