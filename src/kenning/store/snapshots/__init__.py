"""The snapshot files beside a store: derived, disposable copies of what the store holds, laid out for reading
fast. The lexical snapshot (`lexicon`: FTS5's postings as memory-mapped segments, and `bm25`: FTS5's scores
from them) and the vector snapshot (`vectors`: the passages' vectors as segment files or a turbovec base, and
`nearest`: the scan over rows in memory). The store holds the truth; a search that cannot use a snapshot asks
the store instead."""
