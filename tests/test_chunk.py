"""Tests of kenning.chunk: exact spans per file kind, packing and overlap, triage, and the span invariant."""

from __future__ import annotations

import base64
import itertools
import random

import pytest

from kenning.chunk import _REGISTRY as REGISTRY
from kenning.chunk import CHUNKER_VERSION, Source, chunk_text, register_chunker
from kenning.chunk.triage import EMPTY, NO_PROSE, NOT_TEXT
from kenning.types import FileKind, Passage

KINDS: tuple[FileKind, ...] = ("text", "markdown", "rst", "code")


def spans(result: list[Passage] | str) -> list[tuple[int, int, str, str]]:
    assert not isinstance(result, str), result
    return [(p.start_line, p.end_line, p.text, p.heading) for p in result]


def passages(text: str, kind: FileKind, lang: str | None = None, **kw: int) -> list[Passage]:
    result = chunk_text(text, kind, lang, **kw)
    assert not isinstance(result, str), result
    return result


def source_lines(text: str) -> list[str]:
    """Lines as kenning numbers them: CRLF, CR and LF end a line, nothing else (like rg and grep.py)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def check_invariants(text: str, result: list[Passage], max_chars: int) -> None:
    """The span contract of kenning.chunk, for any document."""
    lines = source_lines(text)
    pieces: dict[int, list[str]] = {}
    for p in result:
        assert 1 <= p.start_line <= p.end_line <= len(lines)
        assert 0 < len(p.text) <= max_chars
        exact = "\n".join(lines[p.start_line - 1 : p.end_line])
        if p.text != exact:
            # The one exception: a piece of a single over-long line.
            assert p.start_line == p.end_line and len(lines[p.start_line - 1]) > max_chars
            assert p.text in exact
            pieces.setdefault(p.start_line, []).append(p.text)
        else:
            assert lines[p.start_line - 1].strip() and lines[p.end_line - 1].strip()  # spans are trimmed
    for line_no, cut in pieces.items():
        assert "".join(cut) == lines[line_no - 1]  # the pieces are the line, in order, once each
    starts = [p.start_line for p in result]
    assert starts == sorted(starts)


def covered(result: list[Passage]) -> set[int]:
    return {n for p in result for n in range(p.start_line, p.end_line + 1)}


# --- API ------------------------------------------------------------------------------------------


def test_version_and_registry() -> None:
    assert isinstance(CHUNKER_VERSION, int) and CHUNKER_VERSION >= 1
    assert {kind for kind, lang in REGISTRY if lang is None} == set(KINDS)


def test_register_chunker_per_language_leaves_others_alone() -> None:
    def symbols(src: Source, *, max_chars: int, overlap_chars: int) -> list[Passage]:
        return [Passage(1, len(src), "\n".join(src.lines), "sym")]

    register_chunker("code", symbols, lang="klingon")
    try:
        assert spans(chunk_text("a\n\nb", "code", "klingon")) == [(1, 3, "a\n\nb", "sym")]
        assert spans(chunk_text("a\n\nb", "code", "python")) == [(1, 3, "a\n\nb", "")]
    finally:
        del REGISTRY[("code", "klingon")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", " \t\r\n  \r\n"])
def test_empty(kind: FileKind, text: str) -> None:
    assert chunk_text(text, kind) == EMPTY


def test_bad_limits() -> None:
    with pytest.raises(ValueError):
        chunk_text("x", "text", max_chars=0)
    with pytest.raises(ValueError):
        chunk_text("x", "text", overlap_chars=-1)


# --- Prose ----------------------------------------------------------------------------------------


def test_prose_exact_spans() -> None:
    doc = "Alpha one.\nAlpha two.\n\nBeta para.\n\n\nGamma para here.\n"
    assert spans(chunk_text(doc, "text", max_chars=30, overlap_chars=12)) == [
        (1, 2, "Alpha one.\nAlpha two.", ""),
        # the blank lines between packed paragraphs are part of the text: it is the exact slice
        (4, 7, "Beta para.\n\n\nGamma para here.", ""),
    ]


def test_prose_one_passage_when_it_fits() -> None:
    doc = "\n\nFirst.\n\nSecond.\n\n"
    assert spans(chunk_text(doc, "text")) == [(3, 5, "First.\n\nSecond.", "")]


def test_overlap_is_whole_trailing_paragraphs() -> None:
    paras = [f"P{i} " + "x" * 20 for i in range(1, 7)]  # 23 characters each
    doc = "\n\n".join(paras)
    assert [(p.start_line, p.end_line) for p in passages(doc, "text", max_chars=80, overlap_chars=30)] == [
        (1, 5),  # P1 P2 P3 (73 characters); P4 does not fit
        (5, 9),  # P3 again (23 <= 30), never P2+P3 (48 > 30)
        (9, 11),
    ]


def test_overlap_never_repeats_the_first_paragraph_and_never_exceeds_max() -> None:
    rng = random.Random(7)
    words = ["lorem", "ipsum", "dolor", "sit"]
    paras = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 30))) for _ in range(60)]
    doc = "\n\n".join(paras)
    result = passages(doc, "text", max_chars=300, overlap_chars=150)
    check_invariants(doc, result, 300)
    for prev, cur in itertools.pairwise(result):
        assert cur.start_line > prev.start_line  # the first paragraph of a chunk is never carried over
        if cur.start_line <= prev.end_line:  # an overlap: whole paragraphs, within the budget
            assert source_lines(doc)[cur.start_line - 2] == ""  # starts at a paragraph boundary
            overlap = "\n".join(source_lines(doc)[cur.start_line - 1 : prev.end_line])
            assert len(overlap) <= 150
    assert covered(result) >= {i + 1 for i, line in enumerate(source_lines(doc)) if line}


def test_no_overlap_when_budget_is_zero() -> None:
    doc = "\n\n".join(f"para {i} " + "y" * 30 for i in range(10))
    result = passages(doc, "text", max_chars=100, overlap_chars=0)
    for prev, cur in itertools.pairwise(result):
        assert cur.start_line > prev.end_line


def test_full_chunk_ends_at_a_run_of_blank_lines() -> None:
    # A, B | C, D: two blank lines before C. A+B+C fit in 80 characters, D does not: the chunk ends at the
    # bigger break (after B) rather than after C, and no overlap is carried across it.
    a, b, c, d = (f"{n} " + "x" * 20 for n in "ABCD")  # 22 characters each
    doc = f"{a}\n\n{b}\n\n\n{c}\n\n{d}\n"
    assert [(p.start_line, p.end_line) for p in passages(doc, "text", max_chars=80, overlap_chars=30)] == [
        (1, 3),
        (6, 8),
    ]
    # one blank line everywhere: the greedy packer with its overlap, as before
    flat = f"{a}\n\n{b}\n\n{c}\n\n{d}\n"
    assert [(p.start_line, p.end_line) for p in passages(flat, "text", max_chars=80, overlap_chars=30)] == [
        (1, 5),
        (5, 7),
    ]


def test_run_of_blank_lines_does_not_leave_a_tiny_chunk() -> None:
    # the break after a 10-character first paragraph would leave the chunk under a quarter full: not taken
    doc = "tiny start\n\n\n" + "\n\n".join(f"{n} " + "y" * 30 for n in "BCD") + "\n"
    got = [(p.start_line, p.end_line) for p in passages(doc, "text", max_chars=100, overlap_chars=0)]
    assert got[0][0] == 1 and got[0][1] > 1


@pytest.mark.parametrize(("kind", "title"), [("markdown", "# Guide\n\n"), ("rst", "Guide\n=====\n\n")])
def test_markup_chunk_ends_at_a_run_of_blank_lines(kind: FileKind, title: str) -> None:
    a, b, c, d = (f"{n} " + "x" * 20 for n in "ABCD")
    doc = f"{title}{a}\n\n{b}\n\n\n{c}\n\n{d}\n"
    first = title.count("\n") + 1  # line of A
    got = passages(doc, kind, max_chars=100, overlap_chars=30)
    assert [(p.start_line, p.end_line) for p in got] == [(1, first + 2), (first + 5, first + 7)]
    assert {p.heading for p in got} == {"Guide"}


def test_long_paragraph_splits_at_line_boundaries() -> None:
    doc = "\n".join(f"line {i:02d} of a long paragraph" for i in range(10))  # 26 characters a line
    assert [(p.start_line, p.end_line) for p in passages(doc, "text", max_chars=60, overlap_chars=0)] == [
        (1, 2),
        (3, 4),
        (5, 6),
        (7, 8),
        (9, 10),
    ]


def test_long_line_cut_into_pieces_claiming_the_line() -> None:
    long = ("word " * 41 + "end")[:209]
    doc = "One two three\nfour five\nsix\n\n" + long + "\nseven\neight\nnine\n"
    result = spans(chunk_text(doc, "text", max_chars=200, overlap_chars=80))
    assert [(s, e) for s, e, _, _ in result] == [(1, 3), (5, 5), (5, 5), (6, 8)]
    first, second = result[1][2], result[2][2]
    assert first + second == long  # balanced pieces, cut after a space, that give the line back
    assert len(first) == 100 and first.endswith(" ")


def test_long_line_without_spaces_is_hard_cut() -> None:
    line = "".join(chr(ord("а") + i % 32) for i in range(2500))  # Cyrillic: no spaces, yet not base64
    result = passages(f"intro\n\n{line}\n\noutro", "text", max_chars=1000)
    assert [(p.start_line, p.end_line, len(p.text)) for p in result] == [
        (1, 1, 5),
        (3, 3, 834),
        (3, 3, 833),
        (3, 3, 833),
        (5, 5, 5),
    ]
    assert "".join(p.text for p in result[1:4]) == line


def test_crlf_gives_the_same_passages_as_lf() -> None:
    doc = "# Title\n\nSome text\nmore text\n\n## Sub\n\nBody.\n"
    for kind in KINDS:
        assert passages(doc.replace("\n", "\r\n"), kind) == passages(doc, kind)
    assert spans(chunk_text("a\r\nb\r\n\r\nc\r\n", "text")) == [(1, 4, "a\nb\n\nc", "")]


def test_only_crlf_cr_and_lf_end_lines() -> None:
    # a form feed or a Unicode line separator is text, as in editors and rg: line numbers stay theirs
    assert spans(chunk_text("a\x0cb\u2028c\rd\n\ne\x85f", "text")) == [
        (1, 4, "a\x0cb\u2028c\nd\n\ne\x85f", "")
    ]


def test_non_ascii_text_keeps_exact_spans() -> None:
    doc = "Ünïcödé façade — naïve café.\n\n日本語のテキストです。検索できる。\n\nЗдравствуй, мир! 🙂\n"
    assert spans(chunk_text(doc, "text", max_chars=50, overlap_chars=0)) == [
        (1, 3, "Ünïcödé façade — naïve café.\n\n日本語のテキストです。検索できる。", ""),
        (5, 5, "Здравствуй, мир! 🙂", ""),
    ]


# --- Markdown -------------------------------------------------------------------------------------

MARKDOWN = """---
title: Guide
---
Intro before any heading.

# Guide

Welcome text.

Install
=======

Run the installer.

```sh
# not a heading
pip install kenning
```

## Linux ##

Use apt.

Windows
-------

Use the msi.

### Notes

A note.
"""


def test_markdown_sections_and_breadcrumbs() -> None:
    assert spans(chunk_text(MARKDOWN, "markdown")) == [
        (1, 3, "---\ntitle: Guide\n---", ""),  # front matter: a passage of its own
        (4, 4, "Intro before any heading.", ""),
        (6, 8, "# Guide\n\nWelcome text.", "Guide"),
        # a setext h1 replaces the ATX h1; the "#" line in the fence is code, not a heading
        (
            10,
            18,
            "Install\n=======\n\nRun the installer.\n\n```sh\n# not a heading\npip install kenning\n```",
            "Install",
        ),
        (20, 22, "## Linux ##\n\nUse apt.", "Install > Linux"),  # closing #'s are dropped
        (24, 27, "Windows\n-------\n\nUse the msi.", "Install > Windows"),  # setext h2
        (29, 31, "### Notes\n\nA note.", "Install > Windows > Notes"),
    ]


def test_markdown_passage_never_spans_two_sections() -> None:
    doc = "# A\n\none\n\n# B\n\ntwo\n"
    assert spans(chunk_text(doc, "markdown", max_chars=1000)) == [
        (1, 3, "# A\n\none", "A"),
        (5, 7, "# B\n\ntwo", "B"),
    ]


def test_markdown_heading_line_starts_its_sections_first_passage() -> None:
    body = "\n\n".join(f"Paragraph {i} " + "z" * 40 for i in range(6))
    doc = f"# Top\n\n## Deep dive\n\n{body}\n"
    result = passages(doc, "markdown", max_chars=120, overlap_chars=0)
    assert (result[0].start_line, result[0].text, result[0].heading) == (1, "# Top", "Top")
    assert result[1].text.startswith("## Deep dive\n\nParagraph 0")
    assert {p.heading for p in result[1:]} == {"Top > Deep dive"}


def test_markdown_rules_lists_and_hashtags_are_not_headings() -> None:
    doc = "Para one.\n\n---\n\n- item\n---\n\n#hashtag and #!shebang\n\n    # indented code\n"
    assert {p.heading for p in passages(doc, "markdown")} == {""}


def test_markdown_fence_kept_whole_while_it_fits_then_split_like_code() -> None:
    fence = "```python\n" + "\n".join(f"def f{i}():\n    return {i}\n" for i in range(4)) + "```"
    doc = f"# Code\n\nIntro.\n\n{fence}\n"
    whole = passages(doc, "markdown", max_chars=1000)
    assert len(whole) == 1 and whole[0].text.endswith("```")
    split = passages(doc, "markdown", max_chars=60, overlap_chars=0)
    check_invariants(doc, split, 60)
    assert all(p.heading == "Code" for p in split)
    # greedy packing of the fence's blank-line blocks, inside the section
    assert [(p.start_line, p.end_line) for p in split] == [(1, 7), (9, 13), (15, 17)]


def test_markdown_unclosed_fence_runs_to_the_end() -> None:
    doc = "# A\n\n```\n# B\ncode\n"
    assert [p.heading for p in passages(doc, "markdown")] == ["A"]


def test_markdown_multiline_setext_title() -> None:
    doc = "Intro.\n\nA title on\ntwo lines\n---------\n\nBody.\n"
    assert spans(chunk_text(doc, "markdown")) == [
        (1, 1, "Intro.", ""),
        (3, 7, "A title on\ntwo lines\n---------\n\nBody.", "A title on two lines"),
    ]


# --- reStructuredText -----------------------------------------------------------------------------

RST = """=======
 Guide
=======

Intro text.

Install
=======

Steps here.

Linux
-----

Use apt.

Windows
=======

Use msi.
"""


def test_rst_titles_levels_and_breadcrumbs() -> None:
    assert spans(chunk_text(RST, "rst")) == [
        (1, 5, "=======\n Guide\n=======\n\nIntro text.", "Guide"),  # overline + underline: level 1
        (7, 10, "Install\n=======\n\nSteps here.", "Guide > Install"),  # underline "=": level 2
        (12, 15, "Linux\n-----\n\nUse apt.", "Guide > Install > Linux"),  # "-": level 3
        (17, 20, "Windows\n=======\n\nUse msi.", "Guide > Windows"),  # "=" again: level 2
    ]


def test_rst_short_underline_indented_lines_and_transitions_are_not_titles() -> None:
    doc = "Title too long\n=====\n\n    Indented\n    --------\n\nText.\n\n----------\n\nMore.\n"
    assert {p.heading for p in passages(doc, "rst")} == {""}


def test_rst_wide_characters_count_two_columns() -> None:
    doc = "概要\n====\n\n本文です。\n"
    assert spans(chunk_text(doc, "rst")) == [(1, 4, "概要\n====\n\n本文です。", "概要")]


# --- Code -----------------------------------------------------------------------------------------

CODE = '''import os
import sys


def alpha(x):
    """Return x doubled."""
    y = x * 2
    return y


# helper comment
@decorator
def beta(y):
    return y + 1


class Gamma:
    def method(self):
        return 3
'''


def test_code_windows_start_at_definitions() -> None:
    # the line-window chunker (what languages without a grammar get), pinned apart from the syntax chunker
    assert spans(chunk_text(CODE, "code", "python", max_chars=80, overlap_chars=20, syntax=False)) == [
        (1, 2, "import os\nimport sys", ""),
        (5, 8, 'def alpha(x):\n    """Return x doubled."""\n    y = x * 2\n    return y', ""),
        # the comment and the decorator stay with the function they introduce
        (11, 14, "# helper comment\n@decorator\ndef beta(y):\n    return y + 1", ""),
        (17, 19, "class Gamma:\n    def method(self):\n        return 3", ""),
    ]


def test_code_packs_small_definitions_together() -> None:
    assert [(p.start_line, p.end_line) for p in passages(CODE, "code", max_chars=200)] == [(1, 14), (17, 19)]


def test_code_window_ends_before_a_definition_rather_than_inside_one() -> None:
    methods = "\n\n".join(f"    def m{i}(self):\n        return {i} * {i}" for i in range(8))
    imports = "import os\nimport sys\nimport json\nimport typing"  # 45 characters: over a quarter of 160
    doc = f"{imports}\n\n\nclass Big:\n    '''Doc.'''\n\n{methods}\n"
    result = passages(doc, "code", max_chars=160, overlap_chars=0)
    check_invariants(doc, result, 160)
    # not the imports plus the class's first lines just because they fitted
    assert (result[0].start_line, result[0].end_line) == (1, 4)
    assert result[1].text.startswith("class Big:")
    # but a window under a quarter full is not worth it: a lone import shares one with the class
    alone = passages(f"import os\n\n\nclass Big:\n    '''Doc.'''\n\n{methods}\n", "code", max_chars=160)
    assert alone[0].text.startswith("import os\n\n\nclass Big:")


def test_allman_brace_stays_with_its_signature() -> None:
    body = "\n".join(f"    x{i} = f({i});" for i in range(12))
    doc = f"static int\ncompute(int a)\n{{\n{body}\n    return x0;\n}}\n"
    result = passages(doc, "code", "c", max_chars=150, overlap_chars=0, syntax=False)
    check_invariants(doc, result, 150)
    assert result[0].text.startswith("static int\ncompute(int a)\n{\n    x0 = f(0);")


def test_big_class_is_cut_between_methods() -> None:
    body = "\n".join(f"        x{j} = compute({j})" for j in range(6))
    methods = "\n\n".join(f"    def method_{i}(self):\n{body}\n        return x0" for i in range(5))
    doc = f"class Service:\n    '''A service.'''\n\n{methods}\n"
    result = passages(doc, "code", max_chars=400, overlap_chars=0)
    check_invariants(doc, result, 400)
    heads = [p.text.split("\n")[0] for p in result]
    assert heads[0] == "class Service:"
    assert all(h.startswith("    def method_") for h in heads[1:])


def test_dense_function_is_cut_at_its_statements_not_mid_statement() -> None:
    lines = ["def f(a, b):"]
    for i in range(20):
        lines += [f"    if a > {i}:", f"        b = g(b, {i})", "    else:", f"        b = h(b, {i})"]
    doc = "\n".join(lines)
    result = passages(doc, "code", max_chars=200, overlap_chars=0)
    check_invariants(doc, result, 200)
    for p in result[1:]:
        first = p.text.split("\n")[0]
        assert first.startswith("    if a >")  # never "else:" nor a body line without its header


def test_closing_braces_stay_with_their_block() -> None:
    fn = "function f{i}() {{\n  const a = {i};\n  return a;\n}}"
    doc = "\n".join(fn.format(i=i) for i in range(8))  # no blank lines between functions
    result = passages(doc, "code", "javascript", max_chars=120, overlap_chars=0)
    check_invariants(doc, result, 120)
    assert all(p.text.startswith("function f") and p.text.endswith("}") for p in result)


def test_code_has_no_heading() -> None:
    assert {p.heading for p in passages(CODE, "code", max_chars=60)} == {""}


# --- Triage ---------------------------------------------------------------------------------------


def test_minified_bundle_is_skipped() -> None:
    bundle = "!function(e,t){" + ";".join(f"var a{i}=e[{i}]||t.x({i},{{k:{i}}})" for i in range(2500)) + "}"
    assert len(bundle) > 50_000
    assert chunk_text(bundle, "code", "javascript") == NO_PROSE
    # a licence comment in front does not rescue it: the huge line goes on its own
    assert chunk_text("/*! lib v1 | MIT */\n" + bundle, "code", "javascript") == NO_PROSE


def test_markdown_keeps_prose_and_drops_an_inline_base64_image() -> None:
    blob = base64.b64encode(bytes(range(256)) * 8).decode()
    prose = (
        "This guide explains how the index is built, where it lives on disk, and how to rebuild it safely."
    )
    doc = f"# Guide\n\n{prose}\nHere is the logo:\n![logo](data:image/png;base64,{blob})\nAfter.\n\n{prose}\n"
    result = passages(doc, "markdown")
    assert spans(result) == [
        (1, 4, f"# Guide\n\n{prose}\nHere is the logo:", "Guide"),
        (6, 8, f"After.\n\n{prose}", "Guide"),  # line 5 is a wall: no passage spans it
    ]


def test_wrapped_base64_block_is_dropped() -> None:
    blob = base64.encodebytes(bytes(range(256)) * 4).decode().strip()  # 76-character lines
    prose = "Certificates are rotated every ninety days by the deploy job. The runbook has the details."
    prose += " Ask the platform team before rotating by hand."
    doc = f"{prose}\n\n-----BEGIN CERTIFICATE-----\n{blob}\n-----END CERTIFICATE-----\n\n{prose}\n"
    result = passages(doc, "text")
    end = 3 + len(blob.splitlines()) + 1  # the END line
    assert spans(result) == [
        (1, 3, f"{prose}\n\n-----BEGIN CERTIFICATE-----", ""),  # only the payload lines go
        (end, end + 2, f"-----END CERTIFICATE-----\n\n{prose}", ""),
    ]
    assert chunk_text(f"-----BEGIN KEY-----\n{blob}\n-----END KEY-----\n", "text") == NO_PROSE


def test_word_lists_and_constants_are_not_payload() -> None:
    words = "\n".join(f"word{i}" for i in range(100))
    assert len(passages(words, "text")) >= 1
    constants = "\n".join(f"    TOKEN_NAME_{i}={i}" for i in range(60))
    assert covered(passages(constants, "code")) == set(range(1, 61))


def test_long_prose_lines_are_not_machine_lines() -> None:
    line = "A long sentence (with some punctuation, numbers like 3.14 and 95% CI) that goes on. " * 30
    assert covered(passages(line, "text")) == {1}


def test_undecodable_text_is_not_text() -> None:
    assert chunk_text("ab\ufffd" * 100, "text") == NOT_TEXT
    assert not isinstance(chunk_text("some words " * 20 + "\ufffd", "text"), str)  # under 1 %: kept


# --- The span invariant over generated documents -------------------------------------------------

WORDS = [
    "alpha",
    "beta",
    "δέλτα",
    "日本語",
    "naïve",
    "x",
    "return",
    "def",
    "{",
    "}",
    "#",
    "=",
    "--",
    "\x0c",
    "\u2028",
]


def random_line(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.02:
        return "ω" * rng.randint(50, 400)  # over-long line without spaces (not base64: kept)
    if roll < 0.05:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 120)))  # over-long prose line
    if roll < 0.10:
        return rng.choice(
            ["# Heading", "## Sub", "===", "---", "```", "~~~", "Title", "-----", "=====", "  "]
        )
    if roll < 0.13:
        return rng.choice(["@decorator", "def f():", "class C:", "}", "else:", "    pass", "\t\tx = 1"])
    indent = " " * rng.choice([0, 0, 0, 2, 4, 8])
    return indent + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


def random_document(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 80)):
        lines.append("" if rng.random() < 0.25 else random_line(rng))
    sep = rng.choice(["\n", "\n", "\r\n"])
    return sep.join(lines) + rng.choice(["", sep, sep * 3])


@pytest.mark.parametrize("kind", KINDS)
def test_span_invariant_on_random_documents(kind: FileKind) -> None:
    rng = random.Random(f"chunk-{kind}")
    for _ in range(400):
        doc = random_document(rng)
        max_chars = rng.choice([1, 7, 40, 120, 500, 1000])
        overlap = rng.choice([0, 10, 60, 200])
        result = chunk_text(doc, kind, max_chars=max_chars, overlap_chars=overlap)
        if isinstance(result, str):
            assert result == EMPTY and not doc.strip()
            continue
        check_invariants(doc, result, max_chars)
        # nothing is lost: every non-blank line is in some passage (no machine lines are generated)
        assert covered(result) >= {i + 1 for i, line in enumerate(source_lines(doc)) if line.strip()}


def test_markdown_passages_stay_inside_their_section_on_random_documents() -> None:
    rng = random.Random("sections")
    for _ in range(200):
        doc = random_document(rng)
        lines = source_lines(doc)
        result = chunk_text(doc, "markdown", max_chars=rng.choice([40, 200, 1000]), overlap_chars=50)
        if isinstance(result, str):
            continue
        for p in result:
            # a heading line is only ever the first line of a passage (unless inside a fence)
            inner = lines[p.start_line : p.end_line]
            if not any(line.startswith(("```", "~~~")) for line in lines[: p.end_line]):
                assert not any(line.startswith("# ") for line in inner)
