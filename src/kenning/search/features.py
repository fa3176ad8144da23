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
from kenning.store.terms import STOPWORDS, informative_terms, is_identifier_query, query_terms
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
QUERY_COLUMNS = FEATURES[: FEATURES.index("lex_in")]
# a Rust impl was kind class until it had its own: it counts as one, so the learned rankers see what they were
# trained on
_TYPE_KINDS = frozenset({"class", "interface", "impl"})


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
            # equal scores share the rank of the first of them: an arm lists ties in id order, and ids follow the
            # order files were indexed in, which two indexes of the same files need not share
            rank, previous = 0, None
            for i, (pid, score) in enumerate(items, 1):
                if score != previous:
                    rank, previous = i, score
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
    terms: Sequence[str] | None = None  # the words the lexical arm searched (None: all of the query's)


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


def query_stems(query: str, terms: Sequence[str] | None = None) -> list[str]:
    """The query's informative words (or of `terms`, those searched) as the lexical index stems them, each once
    (short ones left out: `l`, `p`, `up` are in every path and text)."""
    words = informative_terms(query) if terms is None else [t for t in terms if t not in STOPWORDS]
    return list(dict.fromkeys(stem(t) for t in words if len(t) >= 3))


def probe(stemmed: str) -> str:
    """What a text is searched for to tell whether it holds a stemmed word: the stem less its last letter past
    four (porter's `retri`, `delai`, `configur` are not in `retry`, `delay`, `configure`; `retr`, `dela`,
    `configu` are), a substring test costing nothing like a tokenisation of the text."""
    return stemmed if len(stemmed) <= 4 else stemmed[:-1]


# -- the passage ---------------------------------------------------------------------------------------------
_CONFIG_LANGS = frozenset({"yaml", "toml", "json", "ini", "xml", "hcl", "properties"})
# a line that only brings names in or passes them on (import lists, re-exports, module declarations)
_IMPORT_LINE = re.compile(
    r"^\s*(?:import\b|from\s+\S+\s+import\b|use\s|pub(?:\([^)]*\))?\s+(?:use|mod)\s|mod\s+\w+\s*;|extern\s+crate\b|"
    r"#\s*include\b|package\s|using\s|require(?:_relative)?\b|(?:const|let|var)\s+[\w{},\s]+=\s*require\(|"
    r"export\s+(?:\*|\{[^}]*\}|type\s+\{[^}]*\})\s+from\b|export\s+\*|export\s+\{|@import\b|library\s|part\s)"
)
_COMMENT_LINE = re.compile(r"^\s*(?:#(?![!\[])|//|/\*|\*|--|;;|<!--|\"\"\"|''')")


_IMPORTS = re.compile(_IMPORT_LINE.pattern.replace("^", "^", 1), re.M)
_COMMENTS = re.compile(_COMMENT_LINE.pattern, re.M)
_FILLED = re.compile(r"^[ \t]*\S", re.M)


@lru_cache(maxsize=16384)
def _text_traits(text: str) -> tuple[float, float]:
    """(share of non-blank lines that import or re-export, share that are comments): three scans in C."""
    lines = len(_FILLED.findall(text))
    if not lines:
        return 0.0, 0.0
    return len(_IMPORTS.findall(text)) / lines, len(_COMMENTS.findall(text)) / lines


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
def _arm(out: np.ndarray, first_col: int, arm: ArmList | None, ids: Sequence[int]) -> None:
    """The five columns of one arm (in, raw, relative to its best, min-max scaled, reciprocal rank); a candidate
    the arm did not return gets its floor. Left NaN when the arm did not run."""
    if arm is None:
        return
    got = [arm.found.get(pid) for pid in ids]
    inside = np.array([g is not None for g in got], np.float32)
    score = np.array([g[1] if g is not None else arm.floor for g in got], np.float32)
    rank = np.array([g[0] if g is not None else 0 for g in got], np.float32)
    span = arm.best - arm.floor
    out[:, first_col] = inside
    out[:, first_col + 1] = score
    out[:, first_col + 2] = score / arm.best if arm.best > 0 else 0.0
    out[:, first_col + 3] = np.clip(score - arm.floor, 0.0, None) / span if span > 0 else inside
    out[:, first_col + 4] = np.divide(1.0, rank, out=np.zeros_like(rank), where=rank > 0)


def features(c: Candidates) -> np.ndarray:
    """The candidates' feature matrix, float32 (len(c.ids), len(FEATURES)), rows in `c.ids`' order."""
    ids = c.ids
    n = len(ids)
    out = np.full((n, len(FEATURES)), np.nan, dtype=np.float32)
    if not n:
        return out
    col = INDEX
    out[:, : len(QUERY_COLUMNS)] = query_shape(c.query)
    stems = query_stems(c.query, c.terms)
    probes = [probe(s) for s in stems]
    wanted = set(stems)
    n_stems = float(max(len(stems), 1))

    _arm(out, col["lex_in"], c.lexical, ids)
    _arm(out, col["sem_in"], c.semantic, ids)
    if c.semantic is not None:  # the gap to the best replaces the raw relative score of the lexical layout
        out[:, col["sem_gap"]] = c.semantic.best - out[:, col["sem_cos"]]
    firsts = [c.first.get(pid, 0.0) for pid in ids]
    first = np.array(firsts, np.float32)
    top = max(firsts) or 1.0
    out[:, col["sym_rrank"]] = [1.0 / c.named[pid] if pid in c.named else 0.0 for pid in ids]
    out[:, col["first"]] = first / top
    out[:, col["first_rrank"]] = 1.0 / np.arange(1, n + 1, dtype=np.float32)

    rows = [c.rows.get(pid) for pid in ids]
    paths = [r.path if r is not None else "" for r in rows]
    present = np.array([r is not None for r in rows])
    if present.any():
        texts = [r.text if r is not None else "" for r in rows]
        lows = [t.lower() for t in texts]
        heads = [
            " ".join(
                filter(None, (r.heading, r.symbol.name if r.symbol else "", *(d.name for d in r.defines)))
            ).lower()
            if r is not None
            else ""
            for r in rows
        ]
        traits = np.array([_text_traits(t) for t in texts], np.float32).reshape(n, 2)
        dup = Counter(texts)
        kinds = [
            ({d.kind for d in r.defines} | ({r.symbol.kind} if r.symbol else set())) if r else set()
            for r in rows
        ]
        block = np.array(
            [
                [
                    len(t.strip()),
                    (r.end_line - r.start_line + 1) if r else 0,
                    r.start_line if r else 0,
                    *file_kind(p),
                    float(r is not None and r.symbol is not None),
                    float("function" in k),
                    float(bool(k & _TYPE_KINDS)),
                    float(len(r.defines)) if r else 0.0,
                    float(bool(r and r.symbol and r.symbol.doc)),
                    sum(s in low for s in probes) / n_stems,
                    sum(s in h for s in probes) / n_stems,
                    dup[t],
                    r.size if r else 0,
                ]
                for r, t, low, h, k, p in zip(rows, texts, lows, heads, kinds, paths, strict=True)
            ],
            np.float32,
        )
        out[:, col["p_chars"]] = np.log1p(block[:, 0])
        out[:, col["p_lines"]] = np.log1p(block[:, 1])
        out[:, col["p_start"]] = np.log1p(block[:, 2])
        out[:, col["p_top"]] = block[:, 2] == 1
        out[:, col["p_code"] : col["p_config"] + 1] = block[:, 3:7]
        out[:, col["p_in_symbol"] : col["p_has_doc"] + 1] = block[:, 7:12]
        out[:, col["p_imports"]] = traits[:, 0]
        out[:, col["p_comments"]] = traits[:, 1]
        out[:, col["p_cov"]] = block[:, 12]
        out[:, col["p_cov_head"]] = block[:, 13]
        out[:, col["p_dup"]] = np.log(block[:, 14])
        out[:, col["f_size"]] = np.log1p(block[:, 15])
        out[~present, col["p_chars"] : col["p_dup"] + 1] = np.nan
        out[~present, col["f_size"]] = np.nan

    # the candidates' files: members in first-fusion order, the idf of each query word among their paths
    members: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        members.setdefault(path, []).append(i)
    files = len(members)
    held = {path: path_words(path) & wanted for path in members}
    seen = Counter(w for words in held.values() for w in words)
    idf = {w: (math.log(files / k) / math.log(files) if files > 1 else 1.0) for w, k in seen.items()}
    by_name: dict[str, list[str]] = {}
    for path in members:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    per_file: dict[str, tuple[float, ...]] = {}
    for same in by_name.values():
        same.sort(key=lambda p: members[p][0])
        for sib_rank, path in enumerate(same):
            group = members[path]
            per_file[path] = (
                math.log(len(group)),
                sum(firsts[i] for i in group) / top,
                firsts[group[0]] / top,
                sum(idf[w] for w in held[path]) / n_stems,
                float(len(name_words(path) & wanted)),
                *path_traits(path),
                float(len(same) - 1),
                float(sib_rank),
            )
    rank_in_file = np.zeros(n, np.float32)
    for group in members.values():
        rank_in_file[group] = np.arange(len(group), dtype=np.float32)
    fcols = np.array([per_file[p] for p in paths], np.float32)
    out[:, col["f_n"]] = fcols[:, 0]
    out[:, col["f_rank"]] = rank_in_file
    out[:, col["f_other"]] = fcols[:, 1] - first / top
    out[:, col["f_best"]] = fcols[:, 2]
    out[:, col["f_path_cov"]] = fcols[:, 3]
    out[:, col["f_name_cov"]] = fcols[:, 4]
    out[:, col["f_test"] : col["f_sib_rank"] + 1] = fcols[:, 5:]
    return out
