"""What a fused ranking learns from the files its passages belong to (issue 18): which files are tests or release
notes, which code passages are too small to stand alone, which code file holds many matching passages, which code
file is named for the question, and how many passages of one code file lead the list.

`kenning.search.rank` fuses the arms' scores per passage and then calls these, in this order, on every candidate:
path demotions, the tiny-passage demotion, the file evidence, the path evidence, and the per-file decay. Each only
scales or adds to the fused scores; the caller sorts again. Last, the files the path evidence names by their own name
are seated among the files (`seat_named`), which moves passages in the sorted order. Documentation and prose are left
to passage-level ranking (except for release notes): a section of a guide or an FAQ answers on its own, where a code
file's passages build one thing.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path

from kenning import walk
from kenning.search.paths import name_words, path_words
from kenning.store import PassageRow
from kenning.store.tokens import stem

# A changelog's or release notes' fused score is multiplied by this unless the query asks about changes: they name
# every identifier and feature of a project, once per release, and so matched code questions well without
# answering any (on the code set, CHANGELOG.rst and upgrading.rst took top-10 places of code questions). 0.5 as for
# tests; measured with the rest of this module (bench/history/2026-12-03-ranking.md).
NOTES_WEIGHT = 0.5

# A code passage shorter than this (its text stripped) is multiplied by TINY_WEIGHT: a lone `end`, `protected`,
# `class Thor`, `return decorator` or a `##### Helpers #####` divider matches many questions a little (short texts
# embed generically, and BM25 favours them) and answers none. A definition the query names keeps its score, and so
# does a whole small one (a passage of two lines or more that defines a symbol).
TINY_CHARS = 60
TINY_WEIGHT = 0.5

# File evidence: the best passage of a code file gains FILE_EVIDENCE x (the best fused score) x the file's share of
# the largest support, where a file's support is the sum of its other candidates' scores divided by the square root
# of its size in EVIDENCE_UNIT bytes. The central file of a feature holds many passages that each match a little,
# which passage-level ranking alone does not see; the size keeps a 3,000-line module, which matches every question a
# little, from winning all of them, and leaving out the best passage gives a file with one match nothing. Not for a
# question on how to use the project ("how do I ...", "can I ..."): the guide answers those, and code that holds
# the words many times pushed it down.
FILE_EVIDENCE = 0.2
EVIDENCE_UNIT = 2000.0
# The evidence weighs this many leading candidates of the fused order (0: every one that scores). Each one past the
# rows a search fetches anyway costs a lookup of its file, and the deep ones, scaled near 0 in their arms, add
# next to nothing to a file's support: every one (about 185 at --limit 10) made a hybrid query 1.25x the cost it
# had before this module; 80 scored as well on the code set (60 lost a Rust repository;
# bench/history/2026-12-03-ranking-targets.md).
EVIDENCE_DEPTH = 80

# Each passage of a code file after its first in the ranking is multiplied by FILE_DECAY once more than the one
# before it: a question about a part of the system gets its few central files before five windows of one. 0.5
# (semble's) cost a tenth of the span score; 0.8 keeps it and still nearly doubles the distinct files in a top 10.
FILE_DECAY = 0.8

# Path evidence: for a question in words, the best candidate passage of a code file whose name and folder hold at
# least PATH_WORDS of the query's words (stemmed as the lexical index stems them, identifiers split) gains
# PATH_EVIDENCE x (the best fused score) x the words' share of the query's, each word weighed by how few of the
# candidates' files hold it in their path (the project's own name, `thor` of every lib/thor/ file, weighs 0). A file
# is often named for what it implements while its passages never say so: a generated table
# (`unicode_tables/property_names.rs`, its only words for "Unicode property names" in its name and a header comment
# of its own), a module of small functions. It weighs every candidate that scores, not only the first
# EVIDENCE_DEPTH: such a file's best passage is often deep in both arms (property_values.rs past the first 80). One
# matching word is not enough: `setext_headings.go` then came before the parser a heading question asks about (one
# word of a question is in many files' names). 0.75 and 1 scored alike on the code set's dev split, 0.75 better on
# rich (bench/history/2026-12-04-rust-path-evidence.md).
PATH_EVIDENCE = 0.75
PATH_WORDS = 2

# Path seat: a code file whose own name (not only its folder's) holds one of the path evidence's words is ranked
# among the files by its score, not among the passages: its best passage comes right after the best passage of the
# file ranked above it, ahead of the later windows of code files ranked higher. The path evidence is evidence about
# a file, and the lift it gives a passage stopped short of the first hits when the files above held two or three
# windows each: regex-syntax's property tables were the 7th and 8th files for "how are Unicode property names ...
# looked up" but the 21st and 24th passages, behind second and third windows of six files. The files' order is
# unchanged, so a judge that reads files in the first ten hits only gains; what moves down is later windows. A
# folder names all of its files (`unicode_tables/` 15 of regex-syntax's), so a folder's words alone do not seat a
# file (bench/history/2026-12-04-rust-first-10-hits.md).
PATH_SEAT = True
_PATH_TERM_MIN = 3  # a query word shorter than this (`l`, `p`, `up`) is not compared with file names

_NOTES_NAME = re.compile(
    r"(?i)^(?:change[-_ ]?log|changes|history|news|release[-_ ]?notes|releases|whats[-_]?new|upgrading)"
)
_NOTES_DIR = re.compile(r"(?i)^(?:history|changelogs?|changes|releases|release[-_]notes|whatsnew)$")
_ABOUT_CHANGES = re.compile(
    r"(?i)\b(?:chang|upgrad|migrat|release|version|deprecat|histor|breaking|new in|removed|renamed|since)"
)
_ABOUT_USAGE = re.compile(
    r"(?i)\b(?:how (?:do|can|should|would) (?:i|you|we)|(?:can|should|do) (?:i|you|we)\b|how to\b|is it possible|"
    r"what is the best way|install)"
)


@lru_cache(maxsize=8192)
def is_notes_path(path: str) -> bool:
    """A changelog or release notes (`CHANGELOG.md`, `docs/history/changelog-4.1.rst`, `UPGRADING.md`); never a
    code file (`walk/changes.py`, `history/store.py`)."""
    *dirs, name = path.split("/")
    if is_code_path(path):
        return False
    return _NOTES_NAME.match(name) is not None or any(_NOTES_DIR.match(d) for d in dirs)


def factor_for_notes(query: str) -> float:
    """What release notes' fused score is multiplied by for this query: 1 when it asks about changes."""
    return 1.0 if _ABOUT_CHANGES.search(query) else NOTES_WEIGHT


def is_about_usage(query: str) -> bool:
    """A question on how to use the project, which its guide answers ("how do I nest schemas")."""
    return _ABOUT_USAGE.search(query) is not None


@lru_cache(maxsize=8192)
def is_code_path(path: str) -> bool:
    kind = walk.kind_of(path)
    return kind is not None and kind[0] == "code"


@lru_cache(maxsize=8192)
def _is_test(path: str) -> bool:
    return walk.is_test_path(path)


def demote_by_path(
    fused: dict[int, float], paths: dict[int, str], exempt: set[int], tests: float, notes: float
) -> dict[int, float]:
    """Tests' scores times `tests`, release notes' times `notes`, in place; the factor of each passage demoted.
    Passages in `exempt` (definitions the query names) keep their score."""
    demoted: dict[int, float] = {}
    if tests == 1.0 and notes == 1.0:
        return demoted
    for pid, path in paths.items():
        if pid in exempt or pid not in fused:
            continue
        factor = (tests if _is_test(path) else 1.0) * (notes if is_notes_path(path) else 1.0)
        if factor != 1.0:
            fused[pid] *= factor
            demoted[pid] = factor
    return demoted


def demote_tiny(fused: dict[int, float], rows: dict[int, PassageRow], exempt: set[int]) -> None:
    """Code passages shorter than TINY_CHARS times TINY_WEIGHT, in place, but those in `exempt`."""
    for pid, row in rows.items():
        if (
            pid in exempt
            or pid not in fused
            or len(row.text.strip()) >= TINY_CHARS
            or not is_code_path(row.path)
        ):
            continue
        if row.defines and row.end_line > row.start_line:
            continue  # a whole small definition (`def f(x):` and its one line), not a piece of one
        fused[pid] *= TINY_WEIGHT


def add_file_evidence(fused: dict[int, float], paths: dict[int, str], root: Path | str) -> None:
    """The file evidence (see FILE_EVIDENCE) added to each code file's best passage, in place."""
    top = max(fused.values(), default=0.0)
    if top <= 0.0 or not FILE_EVIDENCE:
        return
    by_file: dict[str, list[int]] = {}
    for pid, path in paths.items():
        if pid in fused and is_code_path(path):
            by_file.setdefault(path, []).append(pid)
    support: dict[str, float] = {}
    for path, pids in by_file.items():
        if len(pids) < 2:
            continue
        pids.sort(key=lambda p: -fused[p])
        try:
            # the file as it is now (a stale hit is flagged later); a stat costs less than reading the row
            size = os.stat(os.path.join(root, path)).st_size
        except OSError:
            continue
        support[path] = sum(fused[p] for p in pids[1:]) / max(1.0, size / EVIDENCE_UNIT) ** 0.5
    most = max(support.values(), default=0.0)
    if most <= 0.0:
        return
    for path, value in support.items():
        fused[by_file[path][0]] += FILE_EVIDENCE * top * value / most


def saturate(fused: dict[int, float], order: list[int], paths: dict[int, str]) -> None:
    """Each passage of a code file after its first in `order` (best first) times FILE_DECAY once more, in place."""
    seen: dict[str, int] = {}
    for pid in order:
        path = paths.get(pid)
        if path is None or not is_code_path(path):
            continue
        n = seen.get(path, 0)
        if n:
            fused[pid] *= FILE_DECAY**n
        seen[path] = n + 1


def add_path_evidence(fused: dict[int, float], paths: dict[int, str], terms: list[str]) -> set[int]:
    """The path evidence (see PATH_EVIDENCE) added to the best passage of each code file among `paths` (the
    scoring candidates) whose path holds PATH_WORDS of the query's `terms`, in place; the passages lifted whose
    file's own name holds one of those words (see PATH_SEAT)."""
    top = max(fused.values(), default=0.0)
    wanted = {stem(t) for t in terms if len(t) >= _PATH_TERM_MIN}
    if not PATH_EVIDENCE or top <= 0.0 or len(wanted) < PATH_WORDS:
        return set()
    held = {path: path_words(path) & wanted for path in set(paths.values())}
    files = len(held)
    seen: Counter[str] = Counter(word for words in held.values() for word in words)
    # idf over the candidates' files, scaled to 1 for a word of one file and 0 for a word of all
    weight = {w: math.log(files / n) / math.log(files) if files > 1 else 1.0 for w, n in seen.items()}
    # a word every candidate file holds (it weighs 0) is not one of the two; judged once a file, not a passage
    named = {
        path
        for path, words in held.items()
        if len(words) >= PATH_WORDS
        and sum(weight[w] > 0.0 for w in words) >= PATH_WORDS
        and is_code_path(path)
    }
    best: dict[str, int] = {}
    for pid, path in paths.items():
        if path not in named or pid not in fused:
            continue
        if path not in best or fused[pid] > fused[best[path]]:
            best[path] = pid
    by_name = set()
    for path, pid in best.items():
        fused[pid] += PATH_EVIDENCE * top * sum(weight[w] for w in held[path]) / len(wanted)
        if any(weight[w] > 0.0 for w in held[path] & name_words(path)):
            by_name.add(pid)
    return by_name


def seat_named(fused: dict[int, float], order: list[int], paths: dict[int, str], named: set[int]) -> None:
    """Each passage of `named` that is its file's first in `order` (best first) moved up to just after the last
    file's first passage ahead of it, past the later windows of code files ranked above, in place (see
    PATH_SEAT). It takes the score of the passage it now precedes, so scores still fall along `order`. A passage
    of documentation stands alone here, as in `saturate`: it is never passed."""
    left = len(named)
    if not left:
        return
    out: list[int] = []
    seen: set[str] = set()
    after = 0  # where in `out` the passages that stand for a file end
    for i, pid in enumerate(order):
        path = paths.get(pid)
        if path is None:  # not scoring: past every candidate that does
            out.append(pid)
            continue
        first = path not in seen
        seen.add(path)
        if first and pid in named:
            out.insert(after, pid)
            if after + 1 < len(out):
                fused[pid] = max(fused[pid], fused[out[after + 1]])
            after += 1
            left -= 1
            if not left:
                out += order[i + 1 :]
                break
            continue
        out.append(pid)
        if first or not is_code_path(path):
            after = len(out)
    order[:] = out
