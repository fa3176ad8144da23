"""Triage: what of a text is worth indexing, decided before any chunker sees it.

This module owns the junk filter. It answers two questions: is the whole text skipped (empty, not really
text, or nothing but machine output), and which lines are machine output to drop. It knows nothing of
file kinds: minified code, base64 payloads and generated blobs look the same in every format.

The rules and constants are ph-text-index's (``ph/indexable.py``):

* a text is *not text* when more than 1 % of its characters are U+FFFD (what a lossy decode leaves);
* a *machine line* is at least 200 characters long and either more than 20 % symbols (non-alphanumeric,
  non-space: minified code, data) or more than half one base64-alphabet run of 64+ characters;
* a *machine block* (a maximal run of non-blank lines) is all machine lines, or a *payload*: lines made
  only of ``[A-Za-z0-9+/=_-]`` hold at least 160 characters and more than 80 % of the block;
* if something was dropped and fewer than 200 characters survive, the text is skipped.

Refinements, where ph's block rule let junk through or took real text with it:

* a machine line of 1000+ characters is dropped on its own even inside a block with normal lines, so a
  minified bundle behind a one-line licence comment, or a base64 image inside a Markdown paragraph, goes;
  shorter machine lines are dropped only with their whole block, as in ph, so a long line of real code
  survives among its neighbours;
* a payload line must also be 32+ characters long and contain a digit, so a word list or a run of
  ``NAME=1`` constants is not taken for base64;
* in a payload block only the payload itself goes (lines of the alphabet alone, and machine lines):
  the ``return truetype(BytesIO(b64decode(`` line above an embedded font, or a certificate's
  ``-----BEGIN CERTIFICATE-----`` line, stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import compress, repeat
from operator import ge

from kenning.chunk.source import Source

EMPTY = "is empty"
NOT_TEXT = "is not text (more than 1% undecodable characters)"
NO_PROSE = "holds no prose to index (minified, encoded, or generated)"

REPLACEMENT_SHARE = 0.01
MACHINE_LINE_MIN = 200
SYMBOL_SHARE = 0.20
RUN_MIN = 64
RUN_SHARE = 0.5
PAYLOAD_MIN_CHARS = 160
PAYLOAD_SHARE = 0.8
PROSE_FLOOR = 200
LONE_MACHINE_LINE_MIN = 1000

PAYLOAD_LINE_MIN = 32

# Each pattern is a character class repeated, at most with one lookahead: no nested quantifiers, so no
# backtracking blow-up, and fullmatch on a line is linear in its length.
_SYMBOL = re.compile(r"[^\w\s]|_")  # \w counts "_" as a word character; ph counts it as a symbol
_B64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
# A payload line: one token of the base64/hex alphabet, 32+ characters, with a digit in it.
_ALPHABET_ONLY = re.compile(r"[A-Za-z0-9+/=_-]+")
_PAYLOAD_LINE = re.compile(r"[ \t]*(?=[^ \t]*[0-9])[A-Za-z0-9+/=_-]{32,}[ \t]*")
# The prefilter's view of a text: every payload-alphabet byte becomes "A", so a long run is a find().
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
_AS_RUNS = bytes.maketrans(_ALPHABET, b"A" * len(_ALPHABET))
_RUN = b"A" * PAYLOAD_LINE_MIN
# For ASCII lines, deleting letters, digits and whitespace in C leaves exactly the symbols.
_NOT_SYMBOL = bytes(c for c in range(128) if chr(c).isalnum() or chr(c).isspace())


@dataclass(frozen=True, slots=True)
class Verdict:
    """What triage decided: a skip reason, or the lines to keep (None means all of them)."""

    skip: str | None = None
    keep: list[bool] | None = None


def not_text_reason(text: str) -> str | None:
    """The skip reason for a text with nothing to chunk at all, before it is split into lines."""
    if not text or text.isspace():
        return EMPTY
    if text.count("\ufffd") > REPLACEMENT_SHARE * len(text):
        return NOT_TEXT
    return None


def _symbols(line: str) -> int:
    if line.isascii():
        return len(line.encode("ascii").translate(None, _NOT_SYMBOL))
    return len(_SYMBOL.findall(line))


def is_machine_line(line: str) -> bool:
    n = len(line)
    if n < MACHINE_LINE_MIN:
        return False
    if _symbols(line) > SYMBOL_SHARE * n:
        return True
    # A run longer than half the line must cover its middle character, so measure the run through the
    # middle only (in C, via strip) instead of scanning every run. Such a run is > 100 >= RUN_MIN long.
    mid = n // 2
    if line[mid] not in _B64_CHARS:
        return False
    run = (mid - len(line[:mid].rstrip(_B64_CHARS))) + (n - mid - len(line[mid:].lstrip(_B64_CHARS)))
    return run >= RUN_MIN and run > RUN_SHARE * n


def _may_hold_payload(text: str) -> bool:
    """Whether enough lines look like one long payload token for a payload block to be possible.

    A prefilter in C (encode, translate, find) so the exact per-line test is paid only by texts that
    have candidates; lines are taken at LF here, which only ever errs towards running the exact test.
    """
    data = text.encode("utf-8", "surrogatepass").translate(_AS_RUNS)
    found = 0
    at = data.find(_RUN)
    while at >= 0:
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = data[data.rfind(b"\n", 0, at) + 1 : end].strip()
        if not line.strip(b"A"):
            found += 1
            if found * PAYLOAD_LINE_MIN >= PAYLOAD_MIN_CHARS:
                return True
        at = data.find(_RUN, end)
    return False


def _machine_lines_of(lines: list[str], block: range, machine: set[int], payload: set[int]) -> list[int]:
    """The lines of one block to drop."""
    if machine and all(k in machine for k in block):
        return list(block)
    chars = sum(len(lines[k].strip()) for k in block if k in payload)
    if chars >= PAYLOAD_MIN_CHARS and chars > PAYLOAD_SHARE * sum(len(lines[k].strip()) for k in block):
        # A payload block: its short last line has no digit or is under 32 characters, so go by alphabet.
        alphabet_only = (k for k in block if _ALPHABET_ONLY.fullmatch(lines[k].strip()))
        return sorted({*machine.intersection(block), *payload.intersection(block), *alphabet_only})
    return [k for k in block if k in machine and len(lines[k]) >= LONE_MACHINE_LINE_MIN]


def triage(src: Source, text: str) -> Verdict:
    """Mark machine lines and blocks for dropping; skip the text if too little prose survives."""
    lines = src.lines
    n = len(lines)
    # This runs on every file, so the common case (nothing to drop) is settled by C-level scans.
    long_lines = compress(range(n), map(ge, src.lens, repeat(MACHINE_LINE_MIN)))
    machine = {i for i in long_lines if is_machine_line(lines[i])}
    payload: set[int] = set()
    if _may_hold_payload(text):
        payload = set(compress(range(n), map(_PAYLOAD_LINE.fullmatch, lines)))
    if not machine and len(payload) * PAYLOAD_LINE_MIN < PAYLOAD_MIN_CHARS:
        return Verdict()
    keep = [True] * n
    dropped = False
    for a, b in _blocks(src.blank):
        for k in _machine_lines_of(lines, range(a, b + 1), machine, payload):
            keep[k] = False
            dropped = True
    if not dropped:
        return Verdict()
    kept = sum(len(lines[k].strip()) for k in compress(range(n), keep))
    if kept < PROSE_FLOOR:
        return Verdict(skip=NO_PROSE)
    return Verdict(keep=keep)


def _blocks(blank: list[bool]) -> Iterator[tuple[int, int]]:
    """Maximal runs of non-blank lines, as (first, last)."""
    i, n = 0, len(blank)
    while i < n:
        if blank[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and not blank[j + 1]:
            j += 1
        yield i, j
        i = j + 1
