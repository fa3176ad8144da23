"""Lexical terms for BM25: the same tokenisation for passages and queries, tuned for code as well as prose.

An identifier is kept whole and also split on snake_case, camelCase and letter/digit boundaries, so
`retryCount` matches the queries `retryCount`, `retry count` and `retry_count`. SQLite's FTS5 then lower-cases
and stems each term (porter over unicode61).
"""

from __future__ import annotations

import functools
import re

TERMS_VERSION = 1
_TOKEN = re.compile(r"\w+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_a-zA-Z]+")

# Common English function words dropped from queries only (documents keep them: BM25's IDF handles them, and a
# query made of them alone still needs something to match).
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "do",
        "does",
        "did",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "those",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "can",
        "you",
        "we",
        "our",
        "my",
        "me",
        "your",
        "should",
        "would",
        "could",
    ]
)


def _split(token: str) -> list[str]:
    parts = [p for chunk in token.split("_") for p in _PART.findall(chunk)]
    return parts if len(parts) > 1 else []


# A camelCase or snake_case boundary. Searching for the boundary, then widening to its word, is several times
# faster than a word-level regex: prose has few compounds, and Python's regex engine is slow per character. The
# two kinds are searched apart: a pattern that starts with one character class lets the engine skip ahead in C,
# while an alternation tries each branch at every position (2x slower on prose), and most passages have no
# underscore at all, which `in` tells at memchr speed.
_CAMEL_AT = re.compile(r"[a-z0-9][A-Z]")
_SNAKE_AT = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]")
_WORD_AT = re.compile(r"\w+")


def identifier_parts(text: str) -> str:
    """The split parts of the compound identifiers in a passage (FTS5 indexes the raw text itself).

    FTS5's tokenizer keeps `retry_count` and `retryCount` whole (underscore is a token character), so only
    the parts need adding.
    """
    starts = [m.start() for m in _CAMEL_AT.finditer(text)]
    if "_" in text:
        starts.extend(m.start() for m in _SNAKE_AT.finditer(text))
        starts.sort()
    out: list[str] = []
    end = -1
    for start in starts:
        if start < end:
            continue  # another boundary inside a word already split
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        word = _WORD_AT.match(text, start)
        if word is None:
            continue
        end = word.end()
        out.extend(_split(word.group()))
    return " ".join(out)


def query_terms(text: str, *, stopwords: frozenset[str] = STOPWORDS, repeat: bool = False) -> list[str]:
    """Lower-cased terms of a query, identifiers split, stopwords dropped unless nothing else is left.

    Each term once, unless `repeat` keeps a word as often as the query says it (query term frequency: BM25 then
    counts it that many times). The keywords exist for bench/fusion.py's measurements of both.
    """
    return list(_query_terms(text, stopwords, repeat))


@functools.lru_cache(maxsize=256)
def _query_terms(text: str, stopwords: frozenset[str], repeat: bool) -> tuple[str, ...]:
    # a search asks for one query's terms several times (each arm, the ranking, the confidence): a pasted bug
    # report of 4,000 characters took milliseconds each time
    terms = split_terms(text)
    kept = [t for t in terms if t not in stopwords] or terms
    return tuple(kept if repeat else dict.fromkeys(kept))


def split_terms(text: str) -> list[str]:
    """Every term of a text lower-cased, in order, repeats and stopwords kept: each word, then its parts if it is a
    compound identifier (what `query_terms` keeps some of)."""
    terms: list[str] = []
    for token in _TOKEN.findall(text):
        terms.append(token.lower())
        terms.extend(part.lower() for part in _split(token))
    return terms


def informative_terms(text: str) -> list[str]:
    """The query's terms that are not stop words: what a passage must hold to match it lexically (a query of
    stop words alone has none, though the lexical arm still searches them)."""
    return [t for t in query_terms(text) if t not in STOPWORDS]


def fts_query(terms: list[str]) -> str:
    """An FTS5 MATCH expression: any of the terms (each quoted, so no term is read as syntax). It is also the
    query language of `Store.lexical`, which a backend other than FTS5 reads with `any_of_terms`."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')


def any_of_terms(query: str) -> list[str]:
    """The terms of a query `fts_query` wrote, in order: what a lexical backend without FTS5 searches for."""
    return [m.group(1).replace('""', '"') for m in _QUOTED.finditer(query)]


_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|::|->|#)[A-Za-z_$][\w$]*)*")
_CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")


def query_identifiers(query: str, *, loose: bool = False) -> list[str]:
    """Names in a query that may be a symbol's: `retry_upload`, `RateLimiter.acquire` -> `acquire`, `parseURL`.

    A word counts when it looks like code (an underscore, a camelCase hump, a dotted or `::` path, a call's
    parentheses) or when it is the whole query. `loose` (--prefer-symbol) takes every word that is not a
    stopword, since the user said names matter.
    """
    return list(_query_identifiers(query.strip(), loose))


@functools.lru_cache(maxsize=256)
def _query_identifiers(text: str, loose: bool) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for m in _IDENT.finditer(text):
        token = m.group(0)
        last = _SEPARATOR.split(token)[-1]
        called = text[m.end() : m.end() + 1] == "("
        codey = "_" in token or bool(_CAMEL.search(token)) or last != token or called or token == text
        if codey or (loose and len(last) > 2 and last.lower() not in STOPWORDS):
            found.setdefault(last)
    return tuple(found)


_SEPARATOR = re.compile(r"\.|::|->|#")


def query_qualified(query: str) -> dict[str, str]:
    """Qualified names in a query, by their last part: `Text.from_ansi` -> {"from_ansi": "Text.from_ansi"}.

    Separators (`.`, `::`, `->`, `#`) become dots, the way a symbol's scope is stored.
    """
    found: dict[str, str] = {}
    for m in _IDENT.finditer(query):
        parts = _SEPARATOR.split(m.group(0))
        if len(parts) > 1:
            found.setdefault(parts[-1], ".".join(parts))
    return found


def is_identifier_query(query: str) -> bool:
    """The whole query is one name (`parse_config`, `Text.from_ansi`, `retry()`): a request for its definition."""
    text = query.strip().removesuffix("()")
    m = _IDENT.fullmatch(text)
    return m is not None and bool(query_identifiers(text))
