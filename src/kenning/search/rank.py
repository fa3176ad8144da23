"""Ranking a query group's candidates: fusing the arms' ranked lists into one score per passage, demoting test
files for a question that is not about tests, and turning the order into hits.

Routes are fused by a weighted sum of their min-max normalised scores (a convex combination, which keeps how far
apart an arm's candidates are, where reciprocal rank keeps only their order); definitions of names the query
spells add a bonus by rank. Overlapping passages of one file are collapsed to the best; hits whose file changed
since it was indexed are flagged stale, and those whose file is gone are left out.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from kenning import walk
from kenning.search import shape
from kenning.search.features import INDEX, ArmList, Candidates, features
from kenning.search.model import Model
from kenning.search.query import searched_terms
from kenning.search.request import MIN_DEPTH, SYMBOL_FIRST, Plan
from kenning.store import PassageRow, Store
from kenning.store.terms import informative_terms, is_identifier_query
from kenning.types import ArmTrace, Hit, MatchedBy, Trace
from kenning.walk.changes import sha256_file

# Each arm's scores are min-max normalised between its best and its score at this rank (see fuse_scores), so
# the depth a search fetches, which grows with --limit, never reorders its first results. At 500 (fetching
# 500 an arm) five of the seven development sets scored up to 0.007 higher, and warm hybrid searches took 1.2x.
NORM_DEPTH = MIN_DEPTH


# A test file's fused score is multiplied by this, unless the query asks about tests: a question about what the
# code does is answered by the code and its docs, while tests repeat the same names and words many times over
# (on celery-faq, a third of the passages are tests, and they crowd its top tens). At 0.5 a test outranks code
# only at twice its score. celery-faq is the only development set with tests: 0.6 and 0.5 score the same
# there (0.8 gains half as much), and none of the other six sets moves.
TEST_FILE_WEIGHT = 0.5


# "test", "tests", "testing", "TestCase", "test_parse", "parse_test", "specs", "fixture", "mocking", "pytest", "jest"
_ABOUT_TESTS = re.compile(
    r"(?i:(?:\b|_)(?:test|specs?\b|fixture|mock|e2e\b)|conftest|pytest|unittest|doctest|jest|rspec)|Test|Mock"
)


def fusion_weights(plan: Plan, query: str) -> dict[str, float]:
    """The plan's weights for one query group: a query that is only a name asks for its definition first."""
    weights = dict(plan.weights)
    if is_identifier_query(query):
        weights["symbol"] = max(weights.get("symbol", 0.0), SYMBOL_FIRST)
    return weights


def factor_for_tests(query: str) -> float:
    """What a test file's fused score is multiplied by for this query: 1 when the query is about tests."""
    return 1.0 if _ABOUT_TESTS.search(query) else TEST_FILE_WEIGHT


def demote_tests(fused: dict[int, float], paths: dict[int, str], factor: float) -> set[int]:
    """Multiply the scores of passages in test files by ``factor``, in place; the passages demoted."""
    verdict: dict[str, bool] = {}
    demoted = set()
    for pid, path in paths.items():
        is_test = verdict.get(path)
        if is_test is None:
            is_test = verdict[path] = walk.is_test_path(path)
        if is_test and pid in fused:
            fused[pid] *= factor
            demoted.add(pid)
    return demoted


def fuse_scores(ranked: dict[str, list[tuple[int, float]]], weights: dict[str, float]) -> dict[int, float]:
    """One score per passage: each arm's scores min-max normalised, weighted, summed.

    An arm's scale runs from its best score (1) to its score at rank `NORM_DEPTH` (0), or its last when it has
    fewer; deeper candidates count 0 from it. Normalising over whatever depth was fetched would make the
    first ten of `--limit 100` differ from those of `--limit 10`.

    Keys are `arm#n`: the routes of one arm (one per query of a fused group) share its weight. An arm's weight
    is taken relative to the arms that found anything, so a one-arm search, or a hybrid one whose semantic arm
    is empty (an index not embedded yet), ranks by its arm alone and on the same scale; the scores therefore sum
    to at most 1, and a definition found by the symbol route adds `weights["symbol"] / rank` on top.
    """
    routes = Counter(key.partition("#")[0] for key, items in ranked.items() if items)
    routes.pop("symbol", None)
    total = sum(weights.get(arm, 1.0) for arm in routes) or 1.0
    fused: dict[int, float] = {}
    for key, items in ranked.items():
        arm = key.partition("#")[0]
        if arm == "symbol":
            bonus = weights.get("symbol", 0.0)
            for rank, (pid, _) in enumerate(items, 1):
                fused[pid] = fused.get(pid, 0.0) + bonus / rank
            continue
        if not items:
            continue
        weight = weights.get(arm, 1.0) / total / routes[arm]
        scores = sorted((score for _, score in items), reverse=True)
        high, low = scores[0], scores[min(len(scores), NORM_DEPTH) - 1]
        span = high - low
        for pid, score in items:
            # a list of one, or of equal scores, has nothing to tell apart: each counts fully
            fused[pid] = fused.get(pid, 0.0) + weight * (max(score - low, 0.0) / span if span > 0 else 1.0)
    return fused


# The learned ranker re-orders this many leading candidates of the first fusion; the rest follow in its order.
RERANK_DEPTH = 100

#: Called with each query's candidates and their feature matrix when set: how the trainer (bench/ranker/) sees
#: exactly what the ranking computes.
CAPTURE: Callable[[Candidates, np.ndarray], None] | None = None


def candidates(
    ranked: dict[str, list[tuple[int, float]]],
    query: str,
    head: list[int],
    fused: dict[int, float],
    rows: dict[int, PassageRow],
    terms: list[str] | None = None,
) -> Candidates:
    """The leading candidates of the first fusion and what each arm said of them."""
    by_arm: dict[str, list[list[tuple[int, float]]]] = {}
    for key, items in ranked.items():
        by_arm.setdefault(key.partition("#")[0], []).append(items[:NORM_DEPTH])
    named = {pid: rank for rank, (pid, _) in enumerate(ranked.get("symbol#d", ()), 1)}
    return Candidates(
        query,
        head,
        fused,
        rows,
        ArmList.of(by_arm.get("lexical", []), NORM_DEPTH),
        ArmList.of(by_arm.get("semantic", []), NORM_DEPTH),
        named,
        terms,
    )


@dataclass
class _Order:
    fused: dict[int, float]
    arm_rank: dict[int, dict[str, tuple[int, float]]]  # pid -> arm -> its best (rank, score) there
    order: list[int]  # best first
    rows: dict[int, PassageRow]  # of the leading candidates
    demoted: dict[int, float]  # pid -> the factor its file's kind scaled it by (tests, release notes)


def _order(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    limit: int,
    weights: dict[str, float],
    factor: float,
    query: str = "",
    root: Path | str = "",
    model: Model | None = None,
) -> _Order:
    fused = fuse_scores(ranked, weights)
    arm_rank: dict[int, dict[str, tuple[int, float]]] = {}
    for key, items in ranked.items():
        arm = key.partition("#")[0]
        for rank, (pid, score) in enumerate(items, 1):
            best = arm_rank.setdefault(pid, {})
            if arm not in best or best[arm][0] > rank:
                best[arm] = (rank, score)

    # on a tie, a passage that defines a name the query spells wins (a definition and a call site that tops
    # both other arms score alike), then the lower id: the candidates are put in that order once, and each sort
    # after is by score alone, which a stable sort leaves ties in (a key in C, not a tuple built per candidate
    # per sort: the ranking sorts four times)
    named_any = {pid for key, items in ranked.items() if key.startswith("symbol#") for pid, _ in items}
    order = sorted(fused, key=lambda pid: (pid not in named_any, pid))
    rank_key = fused.__getitem__
    order.sort(key=rank_key, reverse=True)
    want = max(limit * 4, 40)
    demoted: dict[int, float] = {}
    rows: dict[int, PassageRow] = {}
    if model is not None or CAPTURE is not None:
        if order:
            lead = weights.get("symbol", 0.0) >= SYMBOL_FIRST
            return _learned(
                ranked, db, limit, query, model, fused, arm_rank, order, named_any, lead, factor < 1.0
            )
        return _Order(fused, arm_rank, order, {}, {})
    if order:
        rows = db.passages_by_id(order[:want])
        # the file evidence weighs the leading candidates that score at all (a zero, past NORM_DEPTH in every
        # arm, stays zero and last), as many whatever the limit, so a bigger --limit never reorders the first
        # hits; their files are looked up with the rows or, past them, by path alone
        pool = [pid for pid in order[: shape.EVIDENCE_DEPTH or len(order)] if fused[pid] > 0.0]
        terms = informative_terms(query) if shape.PATH_EVIDENCE and not is_identifier_query(query) else []
        # the path evidence below weighs every scoring candidate: their paths are read with the pool's, in one
        # query (a scale factor keeps a score above zero, so these are the ones still scoring there)
        wanted = [pid for pid in order if fused[pid] > 0.0] if len(terms) >= shape.PATH_WORDS else pool
        paths = {pid: row.path for pid, row in rows.items()}
        rest = [pid for pid in wanted if pid not in paths]
        if rest:
            paths.update(db.paths_by_id(rest))
        # a definition the query names stays where the symbol route put it, in a test file too (`make_tree`)
        named = {pid for pid, _ in ranked.get("symbol#d", ())}
        demoted = shape.demote_by_path(fused, paths, named, factor, shape.factor_for_notes(query))
        # from here a tie is broken by where the passage is, not by its id: ids follow the order files were
        # indexed in, so two indexes of the same files (one built whole, one from a snapshot and an overlay)
        # would otherwise order equal scores differently. Each sort after is by score alone, and stable
        order.sort(
            key=lambda pid: (
                pid not in named_any,
                pid not in paths,
                paths.get(pid, ""),
                _line(rows, pid),
                pid,
            )
        )
        order.sort(key=rank_key, reverse=True)
        _fetch_leading(db, order, want, rows)
        shape.demote_tiny(fused, rows, named)
        if not shape.is_about_usage(query):
            shape.add_file_evidence(fused, {pid: paths[pid] for pid in pool if pid in paths}, root)
        by_name: set[int] = set()
        if len(terms) >= shape.PATH_WORDS:
            # over every scoring candidate: a file named for the question may hold only deep ones
            scoring = [pid for pid in order if fused[pid] > 0.0]
            unknown = [pid for pid in scoring if pid not in paths]
            if unknown:
                paths.update(db.paths_by_id(unknown))
            by_name = shape.add_path_evidence(
                fused, {pid: paths[pid] for pid in scoring if pid in paths}, terms
            )
        order.sort(key=rank_key, reverse=True)
        shape.saturate(fused, order, paths)
        order.sort(key=rank_key, reverse=True)
        if shape.PATH_SEAT:
            # a file named for the question takes its place among the files; it moves passages in the order and
            # keeps the scores falling along it, so nothing sorts after it
            shape.seat_named(fused, order, paths, by_name)
        _fetch_leading(db, order, want, rows)
    return _Order(fused, arm_rank, order, rows, demoted)


def _learned(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    limit: int,
    query: str,
    model: Model | None,
    first: dict[int, float],
    arm_rank: dict[int, dict[str, tuple[int, float]]],
    order: list[int],
    named_any: set[int],
    definitions_lead: bool = False,
    demote_tests: bool = False,
) -> _Order:
    """The first fusion's leading candidates re-ordered by the model: each one's score, less the model's
    `diversity` for every passage of its file scored above it (the judge of a code question reads files, and five
    windows of one file tell it less than the next files do). The rest follow in the first fusion's order."""
    # only candidates some route ranked within NORM_DEPTH, each route's list cut there too (`candidates`): a
    # bigger --limit fetches deeper, and what a deeper fetch adds (scores of zero, arms that now "found" a
    # candidate) must not change a leader's features, or the first hits would move with the limit
    within = {pid for items in ranked.values() for pid, _ in items[:NORM_DEPTH]}
    deep = [pid for pid in order if pid not in within]
    if deep:
        past = set(deep)
        order = [pid for pid in order if pid not in past]
    # the head is the leaders and every candidate tied with the last of them, ordered by score then by where
    # each passage is (a name the query defines first): ids follow the order files were indexed in, so two
    # indexes of the same files (one built whole, one from a snapshot and an overlay) must not tell ties apart by
    # them, neither at the head's edge nor in the features that read the order
    cut = min(RERANK_DEPTH, len(order))
    while cut < len(order) and first[order[cut]] == first[order[cut - 1]]:
        cut += 1
    rows = db.passages_by_id(order[:cut])
    tied = sorted(
        order[:cut],
        key=lambda pid: (
            -first[pid],
            pid not in named_any,
            rows[pid].path if pid in rows else "",
            _line(rows, pid),
            pid,
        ),
    )
    head = tied[:RERANK_DEPTH]
    found = candidates(ranked, query, head, first, rows, searched_terms(db, query))
    # to five decimals: the same passages scored through another store (an overlay on a shared index reads
    # vectors and sums in another order) differ in the last float bits, and a tree's threshold must not tell
    # them apart
    x = np.round(features(found), 5)
    if CAPTURE is not None:
        CAPTURE(found, x)
    # without a model (the trainer capturing), the first fusion's order
    scores = np.array([first[pid] for pid in head], np.float32) if model is None else model.score(x)
    demoted: dict[int, float] = {}
    named = {pid for pid, _ in ranked.get("symbol#d", ())}
    if model is not None and demote_tests:
        scores, demoted = _behind_the_code(head, scores, x, named)
    paths = [rows[pid].path if pid in rows else "" for pid in head]
    scores = in_file_order(scores, x[:, INDEX["first"]], paths, in_file_weight(model))
    ranked_head, shown = diversify(
        head, scores, paths, float(model.meta.get("diversity", 0.0)) if model else 0.0
    )
    if model is not None and definitions_lead:
        ranked_head = definitions_first(ranked_head, named)
    fused = dict(first)
    for pid, value in zip(ranked_head, shown, strict=True):
        fused[pid] = value
    rest = tied[RERANK_DEPTH:] + order[cut:] + deep
    if rest:
        # the tail keeps its order below the least of the head
        floor = min(shown) if len(shown) else 1.0
        scale = floor / (first[rest[0]] or 1.0)
        for pid in rest:
            fused[pid] = min(first[pid] * scale, floor)
    new_order = ranked_head + rest
    _fetch_leading(db, new_order, max(limit * 4, 40), rows)
    return _Order(fused, arm_rank, new_order, rows, demoted)


# A test file's passage, for a query not about tests, is scored this much lower by the learned ranker: it needs a
# model score one unit higher (its shown score e times higher) to rank above code. The learned counterpart of
# the hand-set halving (TEST_FILE_WEIGHT): mined commits change code and tests together and judge both
# relevant, so the model alone ranks a test as high as the code it tests. Measured on the development sets, one
# unit moved the per-file questions +0.0015 and the mined sets -0.0008 (the code sets not at all): the sets
# neither ask for nor punish it; users reading for the code do.
TESTS_MARGIN = 1.0


def _behind_the_code(
    head: list[int], scores: np.ndarray, x: np.ndarray, named: set[int]
) -> tuple[np.ndarray, dict[int, float]]:
    # a definition of a name the query spells is what it asks for, in a test file too (a test helper)
    test = (x[:, INDEX["f_test"]] > 0) & np.array([pid not in named for pid in head], dtype=bool)
    if not test.any():
        return scores, {}
    factor = round(math.exp(-TESTS_MARGIN), 4)
    return scores - TESTS_MARGIN * test, {
        pid: factor for pid, t in zip(head, test.tolist(), strict=True) if t
    }


def definitions_first(order: list[int], definitions: set[int]) -> list[int]:
    """A hard rule beside the model: a query that is one name (`make_widget`, `Config.load`) asks where that name
    is defined, as does `--prefer-symbol` for the names among a query's words, so the passages defining it lead,
    in the model's order among themselves, whatever else holds the name more often. The model learned from
    sentences (commit messages, questions, docstrings) and has seen too few bare names to learn this; a name's
    call sites, however many, never answer it before the definition does. The scores shown keep their places
    (the best still 1, each below the one above)."""
    lead = [pid for pid in order if pid in definitions]
    if not lead:
        return order
    return lead + [pid for pid in order if pid not in definitions]


#: The weight of the first fusion's score in the order of one file's own passages, when set (>= 0) in place of the
#: model's `in_file_first`: for measuring (bench/quality/rank_sweep.py's variants); -1 reads the model's.
IN_FILE_FIRST = -1.0


def in_file_weight(model: Model | None) -> float:
    """How much the first fusion's score weighs, beside the model's, in which passage of a file comes first."""
    if model is None:
        return 0.0
    return IN_FILE_FIRST if IN_FILE_FIRST >= 0.0 else float(model.meta.get("in_file_first", 0.0))


def in_file_order(
    scores: np.ndarray, first: np.ndarray, paths: Sequence[Hashable], weight: float
) -> np.ndarray:
    """Each file's scores handed back to its passages in the order of the score plus `weight` times the first
    fusion's (`first`, the feature column; unknown counts 0), best first: the model still decides which files lead
    and how they interleave (a file keeps its set of scores), the lean which of a file's passages shows first.
    The search and the trainer that chooses `weight` both order through here. The trees learned which passage
    of a file answers mostly from mined pairs whose query is cut from the very passage it is judged to find (a
    docstring, a heading and its first sentence); on questions asked in a user's words the first fusion's choice
    within a file is the better one more often, and the trainer weighs the two on such questions
    (bench/ranker/train.py; measured in bench/history/2026-12-07-passage-within-a-file.md)."""
    if weight <= 0.0:
        return scores
    ids: dict[Hashable, int] = {}
    file = np.fromiter((ids.setdefault(p, len(ids)) for p in paths), np.int64, len(paths))
    if len(ids) == len(paths):
        return scores
    key = scores + weight * np.nan_to_num(first)
    # both sorts group the passages by file in the same order of files, so the k-th place of a file in one is its
    # k-th place in the other: the passage `key` puts k-th takes the file's k-th best score (ties keep the
    # leaders' order: lexsort is stable)
    by_key = np.lexsort((-key, file))
    by_score = np.lexsort((-scores, file))
    out = np.empty_like(scores)
    out[by_key] = scores[by_score]
    return out


def diversify(
    ids: list[int], scores: np.ndarray, paths: list[str], diversity: float
) -> tuple[list[int], list[float]]:
    """`ids` by score less `diversity` times the passages of the same file that score above them, best first,
    and the score each shows: exp of the gap to the best, so the best is 1 and each scores in (0, 1]."""
    order = np.argsort(-scores, kind="stable")
    adjusted = scores[order].astype(np.float64)
    if diversity > 0.0 and len(ids) > 1:
        seen: dict[str, int] = {}
        for i, j in enumerate(order.tolist()):
            k = seen.get(paths[j], 0)
            adjusted[i] -= diversity * k
            seen[paths[j]] = k + 1
        again = np.argsort(-adjusted, kind="stable")
        order, adjusted = order[again], adjusted[again]
    shown = np.exp(adjusted - adjusted[0]) if len(adjusted) else adjusted
    return [ids[j] for j in order.tolist()], [round(float(v), 6) for v in shown]


def _line(rows: dict[int, PassageRow], pid: int) -> int:
    row = rows.get(pid)
    return row.start_line if row else 0


def _fetch_leading(db: Store, order: list[int], want: int, rows: dict[int, PassageRow]) -> None:
    missing = [pid for pid in order[:want] if pid not in rows]
    if missing:
        rows.update(db.passages_by_id(missing))


def best_passage(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    root: Path,
    weights: dict[str, float],
    factor: float,
    query: str = "",
    model: Model | None = None,
) -> int | None:
    """The passage a search of these lists alone would show first (one whose file is still there)."""
    ordered = _order(ranked, db, 1, weights, factor, query, root, model)
    for pid in ordered.order:
        row = ordered.rows.get(pid)
        if row is not None and os.path.lexists(os.path.join(root, row.path)):
            return pid
    return None


def fuse_hits(
    ranked: dict[str, list[tuple[int, float]]],
    db: Store,
    limit: int,
    trace: bool,
    root: Path,
    weights: dict[str, float],
    factor: float,
    *,
    first: Sequence[int] = (),
    flag_unembedded: bool = False,
    query: str = "",
    model: Model | None = None,
) -> tuple[list[Hit], int]:
    """The hits, and in how many files hits were left out because the file no longer exists (no one could
    open them). Passages in `first` come first, in their order of score, then the rest."""
    ordered = _order(ranked, db, limit, weights, factor, query, root, model)
    fused, arm_rank, order, rows, demoted = (
        ordered.fused,
        ordered.arm_rank,
        ordered.order,
        ordered.rows,
        ordered.demoted,
    )
    if first:
        lead = [pid for pid in order if pid in first]
        order = lead + [pid for pid in order if pid not in first]
        missing = [pid for pid in lead if pid not in rows]
        if missing:
            rows.update(db.passages_by_id(missing))
    hits: list[Hit] = []
    gone: set[str] = set()
    taken: dict[str, list[tuple[int, int]]] = {}
    one_line: dict[tuple[str, int], int] = {}  # (path, line) -> the hit that stands for that line
    stat_cache: dict[str, tuple[int, int] | None] = {}
    same: dict[str, bool] = {}

    def same_content(path: str) -> bool:
        # a file of the indexed size whose mtime differs: another checkout of it (a team's index searched on
        # another machine), or a file touched since; it is stale only if its bytes differ
        if path not in same:
            stored = db.file_digests([path]).get(path)
            try:
                same[path] = stored is not None and sha256_file(Path(root, path)) == stored
            except OSError:
                same[path] = False
        return same[path]

    for fused_rank, pid in enumerate(order, 1):
        row = rows.get(pid)
        if row is None:
            continue  # a vector whose passage was removed since the snapshot was written
        stale = _stale(root, row, stat_cache, same_content)
        if stale and stat_cache[row.path] is None and not os.path.lexists(os.path.join(root, row.path)):
            gone.add(row.path)
            continue
        spans = taken.setdefault(row.path, [])
        if any(row.start_line <= e and s <= row.end_line for s, e in spans):
            # overlapping passages of one location: the better-ranked one stands for both
            kept = one_line.get((row.path, row.start_line)) if row.start_line == row.end_line else None
            if kept is not None:
                hits[kept] = _with_piece(hits[kept], row, arm_rank[pid])
            continue
        spans.append((row.start_line, row.end_line))
        if row.start_line == row.end_line:
            one_line[(row.path, row.start_line)] = len(hits)
        arms = arm_rank[pid]
        # a definition found by name is a lexical find
        lexical = "lexical" in arms or "symbol" in arms
        matched: MatchedBy = (
            "both" if lexical and "semantic" in arms else ("lexical" if lexical else "semantic")
        )
        hit_trace = None
        if trace:
            lex, sem, sym = arms.get("lexical"), arms.get("semantic"), arms.get("symbol")
            hit_trace = Trace(
                ArmTrace(*(lex or (None, None))),
                ArmTrace(*(sem or (None, None))),
                fused_rank,
                ArmTrace(*sym) if sym else None,
                demoted.get(pid),
            )
        hits.append(
            Hit(
                row.path,
                row.start_line,
                row.end_line,
                round(fused[pid], 6),
                matched,
                row.text,
                row.heading,
                stale,
                hit_trace,
                row.symbol,
                row.defines,
                flag_unembedded and not row.embedded,
            )
        )
        if len(hits) >= limit:
            break
    return hits, len(gone)


def _with_piece(hit: Hit, row: PassageRow, arms: dict[str, tuple[int, float]]) -> Hit:
    """The hit for one line, told of another passage on that line: two passages with one one-line span are
    pieces of a line longer than max_chars. The line was found by both pieces' arms, and when only the other
    was a lexical find, its text shows the query's words (the better-ranked piece may hold none of them)."""
    if hit.end_line != hit.start_line or "lexical" not in arms or hit.matched_by != "semantic":
        return hit
    trace = hit.trace and replace(hit.trace, lexical=ArmTrace(*arms["lexical"]))
    return replace(hit, matched_by="both", text=row.text, trace=trace)


def _stale(
    root: Path,
    row: PassageRow,
    cache: dict[str, tuple[int, int] | None],
    same_content: Callable[[str], bool],
) -> bool:
    if row.path not in cache:
        try:
            # os.path.join, not Path's `/`: its parsing cost shows in a warm query
            st = os.stat(os.path.join(root, row.path))
            cache[row.path] = (st.st_size, st.st_mtime_ns)
        except OSError:
            cache[row.path] = None
    seen = cache[row.path]
    if seen == (row.size, row.mtime_ns):
        return False
    return seen is None or seen[0] != row.size or not same_content(row.path)
