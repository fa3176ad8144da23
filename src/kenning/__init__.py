"""kenning: local hybrid search (BM25 + embeddings) over a workspace of code and documents.

    from kenning import Engine
    with Engine("~/src/project") as engine:
        engine.index()
        for hit in engine.search("where do we retry failed uploads")[0].hits:
            print(f"{hit.path}:{hit.start_line}-{hit.end_line}", round(hit.score, 4), hit.matched_by)

Pipeline stages, each importable alone: walk -> chunk -> embed -> store -> search -> render.
"""

from kenning.engine import Engine, Status, find_index_root
from kenning.errors import KenningError
from kenning.index import IndexReport
from kenning.search import Filters
from kenning.types import Hit, Passage, SearchResult, Selection

__all__ = [
    "Engine",
    "Filters",
    "Hit",
    "IndexReport",
    "KenningError",
    "Passage",
    "SearchResult",
    "Selection",
    "Status",
    "find_index_root",
]
