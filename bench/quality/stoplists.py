"""Stop lists the quality experiments compare with kenning's own (`kenning.store.terms.STOPWORDS`). Stdlib only:
the peers' environments import it too."""

# Lucene's English stop set, which bm25s drops; kenning's own list also drops question words and modals
LUCENE_STOP = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
])  # fmt: skip
