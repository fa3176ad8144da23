"""SQLite FTS5's `porter unicode61 remove_diacritics 2 tokenchars '_'` tokenizer, rewritten in Python, for every
reader of terms outside FTS5: the PostgreSQL store (so both backends index and query the same terms and BM25 ranks
alike), the lexical snapshot, a budgeted answer's choice of lines and the path evidence. It imports no backend.

unicode61 splits on every character that is not a letter, a number or `_`, lower-cases, and strips diacritics;
the porter step is the original Porter (1980) algorithm as FTS5 applies it: only to tokens of 3 to 64 bytes,
and on bytes (a non-ASCII byte is a consonant), which is why a non-ASCII token is stemmed in its UTF-8 form
here. `tests/test_postgres.py` checks the two against each other through FTS5's own vocabulary table.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable

__all__ = ["document_terms", "query_tokens", "stem", "tokens"]

# a letter, a number, `_`, or a combining mark (which unicode61 keeps in the token and then folds away)
_TOKEN = re.compile(r"[\w\u0300-\u036f]+")
_MAX_TOKEN = 64  # bytes: FTS5 passes longer tokens through unstemmed


@functools.lru_cache(maxsize=1 << 18)
def _fold(token: str) -> str:
    """Lower-case and strip diacritics, as unicode61 with remove_diacritics 2 does."""
    low = token.lower()
    if low.isascii():
        return low
    # a character's case fold where it is one character (µ to μ, as FTS5 folds it; not ß to ss)
    low = "".join(f if len(f := c.casefold()) == 1 else c for c in low)
    return "".join(c for c in unicodedata.normalize("NFD", low) if not unicodedata.combining(c))


@functools.lru_cache(maxsize=1 << 18)
def _term(raw: str) -> str:
    folded = _fold(raw)
    return stem(folded) if folded else ""


def tokens(text: str) -> list[str]:
    """The stemmed terms of `text`, in order, repeats kept."""
    out = list(map(_term, _TOKEN.findall(text)))
    return [t for t in out if t] if "" in out else out


def document_terms(*columns: str) -> tuple[Counter[str], int]:
    """The term frequencies of one passage over its columns, and its length in tokens (FTS5's document
    length: every column's tokens counted together)."""
    counts: Counter[str] = Counter()
    for column in columns:
        if column:
            counts.update(map(_term, _TOKEN.findall(column)))
    counts.pop("", None)
    return counts, sum(counts.values())


def query_tokens(term: str) -> list[str]:
    """The terms one query term is searched as: one, usually; none for punctuation alone. (FTS5 would read a
    term that splits into several as a phrase; the PostgreSQL store keeps no positions and ORs its parts.)"""
    return tokens(term)


# -- the Porter stemmer, as FTS5 applies it ------------------------------------------------------------------


def _vowel(c: str, y_is_vowel: bool) -> bool:
    return c in "aeiou" or (y_is_vowel and c == "y")


def _gobble_vc(s: str, prev_consonant: bool) -> int:
    """The index just past the first vowel-consonant sequence of `s`, 0 when there is none."""
    consonant = prev_consonant
    i = 0
    n = len(s)
    while i < n:
        consonant = not _vowel(s[i], consonant)
        if not consonant:
            break
        i += 1
    i += 1
    while i < n:
        consonant = not _vowel(s[i], consonant)
        if consonant:
            return i + 1
        i += 1
    return 0


def _m_gt0(s: str) -> bool:
    return _gobble_vc(s, False) > 0


def _m_gt1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return bool(n) and _gobble_vc(s[n:], True) > 0


def _m_eq1(s: str) -> bool:
    n = _gobble_vc(s, False)
    return bool(n) and _gobble_vc(s[n:], True) == 0


def _o_star(s: str) -> bool:
    if not s or s[-1] in "wxy":
        return False
    mask = 0
    consonant = False
    for c in s:
        consonant = not _vowel(c, consonant)
        mask = (mask << 1) + consonant
    return (mask & 7) == 5


def _has_vowel(s: str) -> bool:
    return any(_vowel(c, i > 0) for i, c in enumerate(s))


def _m_gt1_s_or_t(s: str) -> bool:
    return bool(s) and s[-1] in "st" and _m_gt1(s)


Rule = tuple[str, str, Callable[[str], bool] | None]
# each step's rules grouped by the suffix's second-last letter, tried in order: the first suffix that matches
# decides, whether or not its condition then holds (FTS5's generated switch statements)
_STEP2: dict[str, list[Rule]] = {
    "a": [("ational", "ate", _m_gt0), ("tional", "tion", _m_gt0)],
    "c": [("enci", "ence", _m_gt0), ("anci", "ance", _m_gt0)],
    "e": [("izer", "ize", _m_gt0)],
    "g": [("logi", "log", _m_gt0)],
    "l": [
        ("bli", "ble", _m_gt0),
        ("alli", "al", _m_gt0),
        ("entli", "ent", _m_gt0),
        ("eli", "e", _m_gt0),
        ("ousli", "ous", _m_gt0),
    ],
    "o": [("ization", "ize", _m_gt0), ("ation", "ate", _m_gt0), ("ator", "ate", _m_gt0)],
    "s": [
        ("alism", "al", _m_gt0),
        ("iveness", "ive", _m_gt0),
        ("fulness", "ful", _m_gt0),
        ("ousness", "ous", _m_gt0),
    ],
    "t": [("aliti", "al", _m_gt0), ("iviti", "ive", _m_gt0), ("biliti", "ble", _m_gt0)],
}
_STEP3: dict[str, list[Rule]] = {
    "a": [("ical", "ic", _m_gt0)],
    "s": [("ness", "", _m_gt0)],
    "t": [("icate", "ic", _m_gt0), ("iciti", "ic", _m_gt0)],
    "u": [("ful", "", _m_gt0)],
    "v": [("ative", "", _m_gt0)],
    "z": [("alize", "al", _m_gt0)],
}
_STEP4: dict[str, list[Rule]] = {
    "a": [("al", "", _m_gt1)],
    "c": [("ance", "", _m_gt1), ("ence", "", _m_gt1)],
    "e": [("er", "", _m_gt1)],
    "i": [("ic", "", _m_gt1)],
    "l": [("able", "", _m_gt1), ("ible", "", _m_gt1)],
    "n": [("ant", "", _m_gt1), ("ement", "", _m_gt1), ("ment", "", _m_gt1), ("ent", "", _m_gt1)],
    "o": [("ion", "", _m_gt1_s_or_t), ("ou", "", _m_gt1)],
    "s": [("ism", "", _m_gt1)],
    "t": [("ate", "", _m_gt1), ("iti", "", _m_gt1)],
    "u": [("ous", "", _m_gt1)],
    "v": [("ive", "", _m_gt1)],
    "z": [("ize", "", _m_gt1)],
}
_STEP1B: dict[str, list[Rule]] = {
    "e": [("eed", "ee", _m_gt0), ("ed", "", _has_vowel)],
    "n": [("ing", "", _has_vowel)],
}
_STEP1B2 = {"a": ("at", "ate"), "b": ("bl", "ble"), "i": ("iz", "ize")}


def _apply(word: str, rules: dict[str, list[Rule]]) -> tuple[str, bool]:
    """(the word after the step, whether a rule fired)."""
    if len(word) < 2:
        return word, False
    for suffix, replacement, condition in rules.get(word[-2], ()):
        if len(word) > len(suffix) and word.endswith(suffix):
            stem_ = word[: -len(suffix)]
            if condition is None or condition(stem_):
                return stem_ + replacement, True
            return word, False
    return word, False


def _porter(w: str) -> str:
    # step 1a
    if w.endswith("s"):
        if len(w) >= 2 and w[-2] == "e":
            if (len(w) > 4 and w[-4] == "s" and w[-3] == "s") or (len(w) > 3 and w[-3] == "i"):
                w = w[:-2]
            else:
                w = w[:-1]
        elif len(w) >= 2 and w[-2] != "s":
            w = w[:-1]
    # step 1b
    w, fired = _apply(w, _STEP1B)
    if fired and len(w) >= 2:
        rule = _STEP1B2.get(w[-2])
        if rule and len(w) > 2 and w.endswith(rule[0]):
            w = w[:-2] + rule[1]
        else:
            c = w[-1]
            if not _vowel(c, False) and c not in "lsz" and c == w[-2]:
                w = w[:-1]
            elif _m_eq1(w) and _o_star(w):
                w = w + "e"
    # step 1c
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _apply(w, _STEP2)[0]
    w = _apply(w, _STEP3)[0]
    w = _apply(w, _STEP4)[0]
    # step 5a
    if w.endswith("e") and (_m_gt1(w[:-1]) or (_m_eq1(w[:-1]) and not _o_star(w[:-1]))):
        w = w[:-1]
    # step 5b
    if len(w) > 1 and w.endswith("ll") and _m_gt1(w[:-1]):
        w = w[:-1]
    return w


@functools.lru_cache(maxsize=1 << 18)
def stem(token: str) -> str:
    """FTS5's porter stem of one folded token (cached: a corpus repeats a few thousand words)."""
    if token.isascii():
        if not 3 <= len(token) <= _MAX_TOKEN:
            return token
        return _porter(token)
    raw = token.encode("utf-8")
    if not 3 <= len(raw) <= _MAX_TOKEN:
        return token
    # on bytes, as FTS5 does: every suffix it removes is ASCII, so the cut never splits a character
    return _porter(raw.decode("latin-1")).encode("latin-1").decode("utf-8", "replace")
