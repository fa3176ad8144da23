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
a row does not carry, the features do without. What depends on a passage alone is computed once and kept by its
id, for rows equal in every field it is read from (its text, lines, symbols, path and size); what depends on a
file, once a file (what its path says: `kenning.search.paths`, once a folder and once a file name).
"""

from __future__ import annotations

import contextlib
import math
import re
import struct
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from kenning import walk
from kenning.search.paths import path_columns
from kenning.store import PassageRow
from kenning.store.terms import STOPWORDS, informative_terms, is_identifier_query
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


# The three counts of `_text_traits` scan "\n" + text for a newline and what follows it, where `_IMPORT_LINE`,
# `_COMMENT_LINE` and a filled line's `^[ \t]*\S` find a line's start (re.M): the same matches a character
# earlier, and a scan that skips from newline to newline instead of trying every position (a third of the
# time). A match that ends on a line's `\s` would take the next line's newline with it (where `^` lets that
# line match on), so that `\s` is a lookahead here; no other alternative ends on a newline. The test suite
# checks the counts equal the anchored patterns' on texts made to catch each such edge.
_IMPORTS = re.compile(
    r"\n\s*(?:import\b|from\s+\S+\s+import\b|use(?=\s)|pub(?:\([^)]*\))?\s+(?:use|mod)(?=\s)|mod\s+\w+\s*;|"
    r"extern\s+crate\b|#\s*include\b|package(?=\s)|using(?=\s)|require(?:_relative)?\b|"
    r"(?:const|let|var)\s+[\w{},\s]+=\s*require\(|export\s+(?:\*|\{[^}]*\}|type\s+\{[^}]*\})\s+from\b|"
    r"export\s+\*|export\s+\{|@import\b|library(?=\s)|part(?=\s))"
)
_COMMENTS = re.compile("\n" + _COMMENT_LINE.pattern.removeprefix("^"))
_FILLED = re.compile(r"\n[ \t]*\S")


def _text_traits(text: str) -> tuple[float, float]:
    """(share of non-blank lines that import or re-export, share that are comments): three scans in C."""
    scanned = "\n" + text
    lines = len(_FILLED.findall(scanned))
    if not lines:
        return 0.0, 0.0
    return len(_IMPORTS.findall(scanned)) / lines, len(_COMMENTS.findall(scanned)) / lines


# -- the file ------------------------------------------------------------------------------------------------
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


@lru_cache(maxsize=16384)
def _file(path: str) -> tuple[str, frozenset[str], frozenset[str], bytes]:
    """A file's name, the stemmed words of its path and of its name, and its `path_traits` as float32 bytes:
    one lookup a file and search (its path a new string each time, hashed once)."""
    name, words, own, traits = path_columns(path)
    return name, words, own, _PACK_PATH(*traits)


_PACK_PATH = struct.Struct(f"={INDEX['f_siblings'] - INDEX['f_test']}f").pack


# -- the passage's own columns, once per passage ----------------------------------------------------------
_BLOCK = 16  # the passage block's columns (see `features`), then the two text traits
_COV, _COV_HEAD, _DUP = 12, 13, 14  # the block's columns that depend on the query or the other candidates


def _passage_columns(row: PassageRow | None) -> tuple[str, str, bytes]:
    """A row's text and heading lower-cased (what the query's words are looked for in) and its query-free
    columns, as the float32 bytes of one row of the passage block with the text traits after it (see
    `_passage`, which keeps them)."""
    if row is None:
        return "", "", _ABSENT
    text, symbol, defines = row.text, row.symbol, row.defines
    if symbol is None and not defines:
        # most passages: in no symbol, defining none
        head, named = row.heading or "", _NO_SYMBOL
    else:
        kinds = {d.kind for d in defines} | ({symbol.kind} if symbol else set())
        head = " ".join(
            filter(None, (row.heading, symbol.name if symbol else "", *(d.name for d in defines)))
        )
        named = (
            float(symbol is not None),
            float("function" in kinds),
            float(bool(kinds & _TYPE_KINDS)),
            float(len(defines)),
            float(bool(symbol and symbol.doc)),
        )
    # struct's float is a C cast of the double, the one rounding numpy's float32 conversion makes too
    block = _PACK(
        len(text.strip()),
        row.end_line - row.start_line + 1,
        row.start_line,
        *file_kind(row.path),
        *named,
        0.0,
        0.0,
        0.0,
        row.size,
        *_text_traits(text),
    )
    return text.lower(), head.lower(), block


# the symbol columns (p_in_symbol .. p_has_doc) of a passage in no symbol that defines none
_NO_SYMBOL = (0.0, 0.0, 0.0, 0.0, 0.0)


# what `_passage` keeps: passage id -> (the row its columns were computed from, the columns)
# (an OrderedDict: a dict's oldest entry is found past every entry taken out before it, 3.8 us a removal at this
# bound against 0.2, paid for each new passage once the bound is reached)
_PASSAGES: OrderedDict[int, tuple[PassageRow, tuple[str, str, bytes]]] = OrderedDict()
_PASSAGES_MAX = 16384


def _passage(row: PassageRow | None) -> tuple[str, str, bytes]:
    """`_passage_columns` of a row, kept by its passage id: the next query, page or search state sees many of the
    same passages. A kept value is used only for a row equal in every field the columns read (text, heading,
    lines, path, size, symbol, defines), so it cannot outlive what it was computed from. Looked up by id and
    compared, not hashed: a row read again from the store brings new strings, and hashing a whole row (its
    text, its symbol's signature and doc) for a cache keyed by the row itself took a fifth of the features'
    time (bench/history/2026-12-07-speed.md)."""
    if row is None:
        return "", "", _ABSENT
    kept = _PASSAGES.get(row.id)
    if kept is not None:
        old, value = kept
        if old is row or (
            old.text == row.text
            and old.start_line == row.start_line
            and old.end_line == row.end_line
            and old.heading == row.heading
            and old.path == row.path
            and old.size == row.size
            and old.symbol == row.symbol
            and old.defines == row.defines
        ):
            return value
    value = _passage_columns(row)
    if len(_PASSAGES) >= _PASSAGES_MAX:
        # the oldest entry; another thread may have taken it already
        with contextlib.suppress(KeyError):
            _PASSAGES.popitem(last=False)
    _PASSAGES[row.id] = (row, value)
    return value


_PACK = struct.Struct(f"={_BLOCK + 2}f").pack
# an absent row's block, as the passage of no text at no path
_ABSENT = _PACK(0, 0, 0, *file_kind(""), *[0.0] * 9, *_text_traits(""))


@lru_cache(maxsize=1024)
def _query(
    query: str, terms: tuple[str, ...] | None
) -> tuple[tuple[float, ...], tuple[str, ...], tuple[str, ...]]:
    """The query's columns, its stems and what a text is searched for to hold each."""
    stems = query_stems(query, terms)
    return tuple(query_shape(query)), tuple(stems), tuple(probe(s) for s in stems)


# -- the matrix ----------------------------------------------------------------------------------------------
def _arm(out: np.ndarray, first_col: int, arm: ArmList | None, ids: Sequence[int]) -> None:
    """The five columns of one arm (in, raw, relative to its best, min-max scaled, reciprocal rank); a candidate
    the arm did not return gets its floor. Left NaN when the arm did not run."""
    if arm is None:
        return
    got = list(map(arm.found.get, ids))
    inside = np.array([g is not None for g in got], np.float32)
    floor = arm.floor
    score = np.array([g[1] if g is not None else floor for g in got], np.float32)
    rank = np.array([g[0] if g is not None else 0 for g in got], np.float32)
    span = arm.best - floor
    out[:, first_col] = inside
    out[:, first_col + 1] = score
    out[:, first_col + 2] = score / arm.best if arm.best > 0 else 0.0
    out[:, first_col + 3] = np.clip(score - floor, 0.0, None) / span if span > 0 else inside
    out[:, first_col + 4] = np.divide(1.0, rank, out=np.zeros_like(rank), where=rank > 0)


_P_FIRST, _P_LAST, _F_SIZE = INDEX["p_chars"], INDEX["p_dup"], INDEX["f_size"]
_F_N, _F_TEST, _F_SIBLINGS, _F_END = (
    INDEX["f_n"],
    INDEX["f_test"],
    INDEX["f_siblings"],
    INDEX["f_sib_rank"] + 1,
)


def features(c: Candidates) -> np.ndarray:
    """The candidates' feature matrix, float32 (len(c.ids), len(FEATURES)), rows in `c.ids`' order."""
    ids = c.ids
    n = len(ids)
    out = np.full((n, len(FEATURES)), np.nan, dtype=np.float32)
    if not n:
        return out
    col = INDEX
    shape, stems, probes = _query(c.query, None if c.terms is None else tuple(c.terms))
    out[:, : len(QUERY_COLUMNS)] = shape
    wanted = set(stems)
    n_stems = float(max(len(stems), 1))

    _arm(out, col["lex_in"], c.lexical, ids)
    _arm(out, col["sem_in"], c.semantic, ids)
    if c.semantic is not None:  # the gap to the best replaces the raw relative score of the lexical layout
        out[:, col["sem_gap"]] = c.semantic.best - out[:, col["sem_cos"]]
    firsts = [c.first.get(pid, 0.0) for pid in ids]
    first = np.array(firsts, np.float32)
    top = max(firsts) or 1.0
    named = c.named
    out[:, col["sym_rrank"]] = [1.0 / named[pid] if pid in named else 0.0 for pid in ids]
    out[:, col["first"]] = first / top
    out[:, col["first_rrank"]] = 1.0 / np.arange(1, n + 1, dtype=np.float32)

    rows = list(map(c.rows.get, ids))
    paths = [r.path if r is not None else "" for r in rows]
    present = np.array([r is not None for r in rows])
    # the candidates' files: members in first-fusion order, the idf of each query word among their paths
    members: dict[str, list[int]] = {}
    where: dict[str, int] = {}  # a file's row among the files
    file_of: list[int] = []
    rank_in_file: list[int] = []
    for i, path in enumerate(paths):
        group = members.get(path)
        if group is None:
            where[path] = len(members)
            group = members[path] = []
        file_of.append(where[path])
        rank_in_file.append(len(group))
        group.append(i)
    files = len(members)
    file_info = [_file(path) for path in members]
    held = [words & wanted for _, words, _, _ in file_info]
    seen = Counter(w for words in held for w in words)
    idf = {w: (math.log(files / k) / math.log(files) if files > 1 else 1.0) for w, k in seen.items()}
    # files of one name in the order they first appear (members' order already)
    by_name: dict[str, list[int]] = {}
    for f, (name, _, _, _) in enumerate(file_info):
        by_name.setdefault(name, []).append(f)
    # one row a file, the columns f_n .. f_sib_rank but the path's traits (f_rank, f_size filled below, f_other
    # less each candidate's own); `sum` of a single float is 0.0 plus it, spelled so for the many files that hold
    # one candidate (the same value, without a generator)
    groups = list(members.values())
    per_file: list[tuple[float, ...]] = [()] * files
    for same in by_name.values():
        for sib_rank, f in enumerate(same):
            group, words = groups[f], held[f]
            per_file[f] = (
                math.log(len(group)),
                0.0,
                (sum(firsts[i] for i in group) if len(group) > 1 else 0.0 + firsts[group[0]]) / top,
                firsts[group[0]] / top,
                math.nan,
                (sum(idf[w] for w in words) if words else 0) / n_stems,
                float(len(file_info[f][2] & wanted)),
                float(len(same) - 1),
                float(sib_rank),
            )
    values = np.array(per_file, np.float32)
    by_file = np.empty((files, _F_END - _F_N), np.float32)
    by_file[:, : _F_TEST - _F_N] = values[:, : _F_TEST - _F_N]
    by_file[:, _F_TEST - _F_N : _F_SIBLINGS - _F_N] = np.frombuffer(
        b"".join([k[3] for k in file_info]), np.float32
    ).reshape(files, _F_SIBLINGS - _F_TEST)
    by_file[:, _F_SIBLINGS - _F_N :] = values[:, _F_TEST - _F_N :]
    fcols = by_file[file_of]
    fcols[:, 1] = rank_in_file
    fcols[:, 2] -= first / top
    out[:, _F_N:_F_END] = fcols

    if present.any():
        known = list(map(_passage, rows))
        # the passage block and its text traits, as rows of float32 bytes: one conversion for them all
        raw = np.frombuffer(b"".join([k[2] for k in known]), np.float32).reshape(n, _BLOCK + 2)
        block = raw[:, :_BLOCK].copy()
        if probes:
            lows = [k[0] for k in known]
            heads = [k[1] for k in known]
            block[:, _COV] = np.array([[p in low for low in lows] for p in probes]).sum(axis=0) / n_stems
            # most of the query's words are in no heading: one scan of them all tells so
            every = "\n".join(heads)
            block[:, _COV_HEAD] = (
                np.array([[p in h for h in heads] if p in every else [False] * n for p in probes]).sum(axis=0)
                / n_stems
            )
        texts = [r.text if r is not None else "" for r in rows]
        dup = Counter(texts)
        block[:, _DUP] = [dup[t] for t in texts]
        out[:, col["p_chars"]] = np.log1p(block[:, 0])
        out[:, col["p_lines"]] = np.log1p(block[:, 1])
        out[:, col["p_start"]] = np.log1p(block[:, 2])
        out[:, col["p_top"]] = block[:, 2] == 1
        out[:, col["p_code"] : col["p_config"] + 1] = block[:, 3:7]
        out[:, col["p_in_symbol"] : col["p_has_doc"] + 1] = block[:, 7:12]
        out[:, col["p_imports"] : col["p_comments"] + 1] = raw[:, _BLOCK:]
        out[:, col["p_cov"] : col["p_dup"]] = block[:, 12:14]
        out[:, col["p_dup"]] = np.log(block[:, 14])
        out[:, _F_SIZE] = np.log1p(block[:, 15])
        out[~present, _P_FIRST : _P_LAST + 1] = np.nan
        out[~present, _F_SIZE] = np.nan

    return out
