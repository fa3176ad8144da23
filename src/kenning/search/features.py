"""The features a learned ranker scores a query's candidate passages by: computed here, in one place, for the
search and for the trainer (`bench/ranker/`) alike, so what a model learned from is what it is given.

`features(c)` turns `Candidates` (one query's leading candidates after the arms' first fusion, their rows and
what each arm said of them) into a float32 matrix, one row a candidate and one column each name in `FEATURES`.
The columns describe:

- the query's shape (how many words, a bare identifier, about tests, usage or changes, a "where is" question);
- each arm's verdict: BM25's score raw, relative to its best and min-max scaled, the semantic arm's cosine and its
  gap to the best, reciprocal ranks, the definition route's rank, the first fusion's score and rank;
- the passage: its length, lines and position, the file kind, the symbol it is or defines, how much of it is an
  import list or comments, how many of the query's words it and its heading hold, how many candidates share its
  exact text;
- its file, among the candidates: how many of them it holds and this one's rank there, their other scores, its
  size, how many of the query's words its path and name hold (weighed by how few candidate files hold each),
  whether it is a test, release notes, docs, example, benchmark, vendored, generated or legacy copy, a barrel or
  re-export module, and how many other candidate files share its name (parallel copies of one API).

A value a candidate does not have is NaN where absence means "unknown" (no semantic arm ran); an arm that ran and
did not return a candidate gives it that arm's floor, with the `_in` column 0. Nothing here reads the disk: what
a row does not carry, the features do without.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from kenning import walk
from kenning.store import PassageRow
from kenning.store.terms import informative_terms, is_identifier_query, query_terms
from kenning.store.tokens import stem

#: Bumped whenever a column changes meaning: a model file names the version it was trained on.
FEATURES_VERSION = 1

FEATURES: tuple[str, ...] = (
    # the query
    "q_words",
    "q_ident",
    "q_code",
    "q_tests",
    "q_usage",
    "q_changes",
    "q_where",
    "q_chars",
    # the arms
    "lex_in",
    "lex_raw",
    "lex_rel",
    "lex_norm",
    "lex_rrank",
    "sem_in",
    "sem_cos",
    "sem_gap",
    "sem_norm",
    "sem_rrank",
    "sym_rrank",
    "first",
    "first_rrank",
    # the passage
    "p_chars",
    "p_lines",
    "p_start",
    "p_top",
    "p_code",
    "p_doc",
    "p_text",
    "p_config",
    "p_in_symbol",
    "p_callable",
    "p_type",
    "p_defines",
    "p_has_doc",
    "p_imports",
    "p_comments",
    "p_cov",
    "p_cov_head",
    "p_dup",
    # its file among the candidates
    "f_n",
    "f_rank",
    "f_other",
    "f_best",
    "f_size",
    "f_path_cov",
    "f_name_cov",
    "f_test",
    "f_notes",
    "f_docs_dir",
    "f_example",
    "f_bench",
    "f_vendor",
    "f_generated",
    "f_legacy",
    "f_depth",
    "f_barrel",
    "f_readme",
    "f_siblings",
    "f_sib_rank",
)
INDEX = {name: i for i, name in enumerate(FEATURES)}


@dataclass
class ArmList:
    """What one arm returned for a query: each candidate's (1-based rank, raw score), best first."""

    found: dict[int, tuple[int, float]] = field(default_factory=dict)
    best: float = 0.0
    floor: float = 0.0  # the score at the normalisation depth, or the last returned

    @classmethod
    def of(cls, lists: Sequence[Sequence[tuple[int, float]]], depth: int) -> ArmList | None:
        """One arm's routes (a fused group has one a query) merged: a candidate keeps its best rank and score.
        None when the arm did not run."""
        if not lists:
            return None
        arm = cls()
        bests, floors = [], []
        for items in lists:
            if not items:
                continue
            scores = [s for _, s in items]
            bests.append(max(scores))
            floors.append(sorted(scores, reverse=True)[min(len(scores), depth) - 1])
            for rank, (pid, score) in enumerate(items, 1):
                old = arm.found.get(pid)
                if old is None or score > old[1]:
                    arm.found[pid] = (min(rank, old[0]) if old else rank, score)
        arm.best = max(bests, default=0.0)
        arm.floor = min(floors, default=0.0)
        return arm


@dataclass
class Candidates:
    """One query's leading candidates, in the first fusion's order, and what is known of each."""

    query: str
    ids: list[int]
    first: Mapping[int, float]  # the first fusion's score
    rows: Mapping[int, PassageRow]
    lexical: ArmList | None = None
    semantic: ArmList | None = None
    named: Mapping[int, int] = field(default_factory=dict)  # definitions the query names: pid -> rank


# -- the query -----------------------------------------------------------------------------------------------
_CODE_TOKEN = re.compile(r"[a-z0-9][A-Z]|[A-Za-z0-9]_[A-Za-z0-9]|\w\.\w|\w\(|::|->|=>")
_ABOUT_TESTS = re.compile(
    r"(?i:(?:\b|_)(?:test|specs?\b|fixture|mock|e2e\b)|conftest|pytest|unittest|doctest|jest|rspec)|Test|Mock"
)
_ABOUT_USAGE = re.compile(
    r"(?i)\b(?:how (?:do|can|should|would) (?:i|you|we)|(?:can|should|do) (?:i|you|we)\b|how to\b|is it possible|"
    r"what is the best way|install)"
)
_ABOUT_CHANGES = re.compile(
    r"(?i)\b(?:chang|upgrad|migrat|release|version|deprecat|histor|breaking|new in|removed|renamed|since)"
)
_WHERE = re.compile(
    r"(?i)\b(?:where|which (?:file|module|class|function|package)|defined|declared|implemented|exposed|"
    r"exported|registered|entry ?point|located)\b"
)


def query_shape(query: str) -> list[float]:
    words = informative_terms(query)
    return [
        float(len(words)),
        float(is_identifier_query(query)),
        float(_CODE_TOKEN.search(query) is not None),
        float(_ABOUT_TESTS.search(query) is not None),
        float(_ABOUT_USAGE.search(query) is not None),
        float(_ABOUT_CHANGES.search(query) is not None),
        float(_WHERE.search(query) is not None),
        math.log1p(len(query)),
    ]


def query_stems(query: str) -> list[str]:
    """The query's informative words as the lexical index stems them, each once (short ones left out: `l`, `p`,
    `up` are in every path and text)."""
    return list(dict.fromkeys(stem(t) for t in informative_terms(query) if len(t) >= 3))


# -- the passage ---------------------------------------------------------------------------------------------
_CONFIG_LANGS = frozenset({"yaml", "toml", "json", "ini", "xml", "hcl", "properties"})
# a line that only brings names in or passes them on (import lists, re-exports, module declarations)
_IMPORT_LINE = re.compile(
    r"^\s*(?:import\b|from\s+\S+\s+import\b|use\s|pub(?:\([^)]*\))?\s+(?:use|mod)\s|mod\s+\w+\s*;|extern\s+crate\b|"
    r"#\s*include\b|package\s|using\s|require(?:_relative)?\b|(?:const|let|var)\s+[\w{},\s]+=\s*require\(|"
    r"export\s+(?:\*|\{[^}]*\}|type\s+\{[^}]*\})\s+from\b|export\s+\*|export\s+\{|@import\b|library\s|part\s)"
)
_COMMENT_LINE = re.compile(r"^\s*(?:#(?![!\[])|//|/\*|\*|--|;;|<!--|\"\"\"|''')")


@lru_cache(maxsize=16384)
def _text_traits(text: str) -> tuple[float, float, int]:
    """(share of non-blank lines that import or re-export, share that are comments, non-blank lines)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return 0.0, 0.0, 0
    imports = sum(1 for line in lines if _IMPORT_LINE.match(line))
    comments = sum(1 for line in lines if _COMMENT_LINE.match(line))
    return imports / len(lines), comments / len(lines), len(lines)


# -- the file ------------------------------------------------------------------------------------------------
_DOCS_DIRS = frozenset(
    {"doc", "docs", "documentation", "guide", "guides", "manual", "site", "website", "wiki"}
)
_EXAMPLE_DIRS = frozenset(
    {
        "example",
        "examples",
        "sample",
        "samples",
        "demo",
        "demos",
        "tutorial",
        "tutorials",
        "playground",
        "cookbook",
    }
)
_BENCH_DIRS = frozenset({"bench", "benches", "benchmark", "benchmarks", "perf"})
_VENDOR_DIRS = frozenset(
    {"vendor", "vendored", "third_party", "thirdparty", "external", "extern", "node_modules"}
)
_LEGACY = re.compile(
    r"^(?:legacy|compat|compatibility|deprecated|old|classic|v\d+|\d+\.x|backport\w*)$", re.I
)
_GENERATED = re.compile(
    r"(?i)(?:^|[/_.-])(?:generated|gen|autogen)(?:[/_.-]|$)|_pb2\.py$|\.pb\.go$|\.min\.\w+$"
)
_BARREL = frozenset(
    {"index", "mod", "lib", "__init__", "main", "exports", "public_api", "api", "prelude", "all"}
)
_NOTES_NAME = re.compile(
    r"(?i)^(?:change[-_ ]?log|changes|history|news|release[-_ ]?notes|releases|whats[-_]?new|upgrading)"
)


@lru_cache(maxsize=16384)
def path_traits(path: str) -> tuple[float, ...]:
    """The query-free columns of a file, from its path alone (f_test .. f_readme, in FEATURES' order)."""
    *dirs, name = path.split("/")
    low = [d.lower() for d in dirs]
    base = name.rsplit(".", 1)[0] if "." in name[1:] else name
    kind = walk.kind_of(path)
    is_code = kind is not None and kind[0] == "code"
    return (
        float(walk.is_test_path(path)),
        float(not is_code and _NOTES_NAME.match(name) is not None),
        float(any(d in _DOCS_DIRS for d in low)),
        float(any(d in _EXAMPLE_DIRS for d in low)),
        float(any(d in _BENCH_DIRS for d in low)),
        float(any(d in _VENDOR_DIRS for d in low)),
        float(_GENERATED.search(path) is not None),
        float(any(_LEGACY.match(d) for d in low)),
        float(len(dirs)),
        float(base.lower() in _BARREL),
        float(base.lower().startswith("readme")),
    )


@lru_cache(maxsize=16384)
def path_words(path: str) -> frozenset[str]:
    """The stemmed words of a file's name and its folder's (`unicode_tables/property_names.rs`: unicod, tabl,
    properti, name), identifiers split as the lexical index splits them."""
    *dirs, name = path.split("/")
    base = name.rsplit(".", 1)[0] if "." in name[1:] else name
    text = " ".join([*dirs[-1:], base]).replace("-", " ")
    return frozenset(stem(t) for t in query_terms(text) if not t.isdigit())


@lru_cache(maxsize=16384)
def name_words(path: str) -> frozenset[str]:
    """The stemmed words of a file's own name."""
    name = path.rsplit("/", 1)[-1]
    base = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return frozenset(stem(t) for t in query_terms(base.replace("-", " ")) if not t.isdigit())


@lru_cache(maxsize=16384)
def file_kind(path: str) -> tuple[float, float, float, float]:
    """(code, documentation, text, configuration) of a path, one-hot but for configuration, a code language."""
    kind = walk.kind_of(path)
    if kind is None:
        return 0.0, 0.0, 1.0, 0.0
    k, lang = kind
    return (
        float(k == "code"),
        float(k in ("markdown", "rst")),
        float(k == "text"),
        float(k == "code" and lang in _CONFIG_LANGS),
    )


# -- the matrix ----------------------------------------------------------------------------------------------
def _arm_columns(arm: ArmList | None, pid: int, unknown: float) -> tuple[float, float, float, float, float]:
    """(in, raw, relative to best, min-max scaled, reciprocal rank) of one candidate in one arm."""
    if arm is None:
        return unknown, unknown, unknown, unknown, unknown
    got = arm.found.get(pid)
    rank, score = got if got is not None else (0, arm.floor)
    span = arm.best - arm.floor
    norm = max(score - arm.floor, 0.0) / span if span > 0 else float(got is not None)
    rel = score / arm.best if arm.best > 0 else 0.0
    return float(got is not None), score, rel, norm, (1.0 / rank if rank else 0.0)


def features(c: Candidates) -> np.ndarray:
    """The candidates' feature matrix, float32 (len(c.ids), len(FEATURES)), rows in `c.ids`' order."""
    n = len(c.ids)
    out = np.full((n, len(FEATURES)), np.nan, dtype=np.float32)
    if not n:
        return out
    nan = math.nan
    shape = query_shape(c.query)
    stems = query_stems(c.query)
    n_stems = max(len(stems), 1)
    top = max((c.first.get(pid, 0.0) for pid in c.ids), default=0.0) or 1.0

    paths = [c.rows[pid].path if pid in c.rows else "" for pid in c.ids]
    # the candidates' files: members in first-fusion order, the idf of each query word among their paths
    members: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        members.setdefault(path, []).append(i)
    files = len(members)
    held = {path: path_words(path) & set(stems) for path in members}
    seen = Counter(w for words in held.values() for w in words)
    idf = {w: (math.log(files / k) / math.log(files) if files > 1 else 1.0) for w, k in seen.items()}
    by_name: dict[str, list[str]] = {}
    for path in members:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    texts = Counter(c.rows[pid].text for pid in c.ids if pid in c.rows)

    for i, pid in enumerate(c.ids):
        row = c.rows.get(pid)
        path = paths[i]
        first = c.first.get(pid, 0.0)
        lex = _arm_columns(c.lexical, pid, nan)
        sem = _arm_columns(c.semantic, pid, nan)
        sym = c.named.get(pid)
        group = members[path]
        rank_in_file = group.index(i)
        other = sum(c.first.get(c.ids[j], 0.0) for j in group if j != i)
        siblings = by_name[path.rsplit("/", 1)[-1]]
        sib_rank = sorted(siblings, key=lambda p: members[p][0]).index(path)
        if row is not None:
            text = row.text
            low = text.lower()
            imports, comments, _ = _text_traits(text)
            head = " ".join(
                filter(
                    None, (row.heading, row.symbol.name if row.symbol else "", *(d.name for d in row.defines))
                )
            ).lower()
            symbol = row.symbol
            kinds = {d.kind for d in row.defines} | ({symbol.kind} if symbol else set())
            passage = [
                math.log1p(len(text.strip())),
                math.log1p(row.end_line - row.start_line + 1),
                math.log1p(row.start_line),
                float(row.start_line == 1),
                *file_kind(path),
                float(symbol is not None),
                float("function" in kinds),
                float(bool(kinds & {"class", "interface"})),
                float(len(row.defines)),
                float(bool(symbol and symbol.doc)),
                imports,
                comments,
                sum(1 for s in stems if s in low) / n_stems,
                sum(1 for s in stems if s in head) / n_stems,
                math.log(texts[text]),
            ]
            size = math.log1p(row.size)
        else:
            passage = [nan] * 18
            size = nan
        out[i] = (
            *shape,
            *lex,
            sem[0],
            sem[1],
            (c.semantic.best - sem[1]) if c.semantic is not None else nan,
            sem[3],
            sem[4],
            1.0 / sym if sym else 0.0,
            first / top,
            1.0 / (i + 1),
            *passage,
            math.log(len(group)),
            float(rank_in_file),
            other / top,
            c.first.get(c.ids[group[0]], 0.0) / top,
            size,
            sum(idf[w] for w in held[path]) / n_stems,
            float(len(name_words(path) & set(stems))),
            *path_traits(path),
            float(len(siblings) - 1),
            float(sib_rank),
        )
    return out
