"""What a query is searched by: its lexical terms, all of them, or the rarest of a long one.

A question is a few words and is searched by all of them. A bug report pasted whole, a stack trace or a code block
is hundreds: BM25 over an any-of query reads every word's postings, and the common words of a long text, which BM25
weighs at next to nothing, cost the most to read. Such a query is searched by the words the fewest passages hold
(the store counts them: `Store.document_frequencies`), and the ranking's features look for those same words.
"""

from __future__ import annotations

from kenning.store import Store
from kenning.store.terms import STOPWORDS, query_terms
from kenning.store.tokens import query_tokens

#: A query of more informative words than this is searched by its rarest ones: searched whole, a 4,000-character
#: query took 60x the CPU of a short one, 8x searched by its 32 rarest words.
LONG_QUERY_TERMS = 32


def searched_terms(db: Store, query: str) -> list[str]:
    """The lexical terms a query is searched by: all of them, or for a long query the LONG_QUERY_TERMS held by the
    fewest passages (a term no passage holds is dropped: it matches nothing), in the query's order."""
    terms = query_terms(query)
    informative = [t for t in terms if t not in STOPWORDS]
    if len(informative) <= LONG_QUERY_TERMS:
        return terms
    tokens = {t: query_tokens(t) for t in informative}
    df = db.document_frequencies([tok for toks in tokens.values() for tok in toks])
    if not df:  # the store cannot say: the first ones, as the query gives them
        return informative[:LONG_QUERY_TERMS]

    def rarity(term: str) -> int:
        counts = [df.get(tok, 0) for tok in tokens[term]]
        return min(counts) if counts and min(counts) > 0 else -1

    held = {t: rarity(t) for t in informative}
    kept = set(sorted((t for t in informative if held[t] >= 0), key=lambda t: held[t])[:LONG_QUERY_TERMS])
    return [t for t in informative if t in kept]
