"""Tests of kenning.chunk.syntax: outlines per language, passages along symbols, and the span contract."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kenning.chunk import Source
from kenning.chunk.code import chunk_code
from kenning.chunk.source import split_lines
from kenning.chunk.syntax import LANGUAGES, chunk_syntax, enclosing, header, outline
from kenning.chunk.syntax import languages as syntax_languages
from kenning.chunk.syntax.languages import grammar
from kenning.types import Passage, Symbol, SymbolSpan

FIXTURES = Path(__file__).parent / "fixtures" / "syntax"
# The Python fixture is not named .py: it holds a syntax error on purpose, and ruff would lint it.
EXT = {
    "python": "py.txt",
    "javascript": "js",
    "typescript": "ts",
    "tsx": "tsx",
    "go": "go",
    "rust": "rs",
    "java": "java",
    "c": "c",
    "cpp": "cpp",
    "csharp": "cs",
    "ruby": "rb",
    "php": "php",
    "kotlin": "kt",
    "swift": "swift",
    "scala": "scala",
    "shell": "sh",
    "lua": "lua",
}
# The function in each fixture that is longer than 1000 characters, so it must be split.
LONG = {
    "python": "long_function",
    "javascript": "main",
    "typescript": "summarize",
    "tsx": "Table",
    "go": "Describe",
    "rust": "describe",
    "java": "Registry.describe",
    "c": "describe",
    "cpp": "describe",
    "csharp": "Shapes.Core.Registry.Describe",
    "ruby": "describe",
    "php": "Describes.describe",
    "kotlin": "describe",
    "swift": "describe",
    "scala": "describe",
    "shell": "describe",
    "lua": "M.describe",
}


def fixture(lang: str) -> str:
    return (FIXTURES / f"{lang}.{EXT[lang]}").read_text(encoding="utf-8")


# Each fixture's outline, checked by hand against the file: "kind scope first-last" (1-based lines,
# doc comments and decorators included). Symbols inside a syntax error may be missing, not wrong.
EXPECTED = {
    "python": """
        value T 6-6
        value MAX_RETRIES 7-7
        class Outer 10-29
        class Outer.Inner 17-20
        function Outer.Inner.method 18-20
        function Outer.get 22-23
        function Outer.get 25-26
        function Outer.get 28-29
        function größe 32-33
        function long_function 36-71
    """,
    "javascript": """
        alias helper, other as renamed 2-2
        class Shape 4-20
        function Shape.constructor 8-10
        class Shape.Inner 12-15
        function Shape.Inner.describe 14-14
        function Shape.label 17-19
        function double 22-22
        value LIMIT 23-23
        function naïve 25-27
        function main 29-58
    """,
    "typescript": """
        interface Shape 3-7
        function Shape.area 5-5
        alias Id 9-9
        class Color 11-14
        module Geometry 16-21
        value Geometry.ORIGIN 17-17
        class Geometry.Point 18-20
        function Geometry.Point.constructor 19-19
        class Container 23-36
        function Container.add 27-27
        function Container.add 28-28
        function Container.add 29-31
        class Container.Inner 33-35
        function Container.Inner.ping 34-34
        function größe 38-40
        function summarize 42-70
        function broken 72-74
        alias * 76-76
    """,
    "tsx": """
        interface Props 3-5
        function List 7-10
        function Button 12-12
        class Panel 14-22
        function Panel.render 15-17
        class Panel.Header 19-21
        function Panel.Header.title 20-20
        function Table 24-62
        function Broken 64-66
    """,
    "go": """
        value MaxSides 9-10
        value registry 12-15
        interface Shape 17-20
        class Point 22-25
        alias Größe 27-27
        function Point.Area 29-32
        function Map 34-40
        function Describe 42-70
        function broken 72-74
    """,
    "rust": """
        alias crate::geometry::{Point, Size} 3-3
        value MAX_SIDES 5-6
        interface Shape 8-11
        function Shape.area 10-10
        class Square 13-17
        impl Square 19-25
        function Square.area 20-24
        module units 27-33
        alias units.Metres 28-28
        function units.größe 30-32
        class Kind 35-38
        function describe 40-66
        impl Kind 68-72
        function Kind.fmt 69-71
    """,
    "java": """
        class Registry 5-74
        class Registry.Entry 10-21
        function Registry.Entry.Entry 14-16
        class Registry.Entry.Detail 18-20
        function Registry.Entry.Detail.describe 19-19
        interface Registry.Visitor 23-25
        function Registry.Visitor.visit 24-24
        function Registry.toString 27-30
        function Registry.add 32-32
        function Registry.add 34-34
        function Registry.größe 36-38
        function Registry.describe 40-65
        class Registry.Kind 67-67
        class Registry.Pair 69-69
        function Registry.broken 71-73
    """,
    "c": """
        value MAX_SIDES 4-5
        function SQUARE 6-6
        class point_t 8-12
        class shape 14-17
        class kind 19-19
        alias visitor_fn 21-21
        value registry_size 23-23
        function area 25-25
        function square_area 27-30
        function describe 32-60
    """,
    "cpp": """
        module geo 4-40
        class geo.Shape 6-11
        function geo.Shape.~Shape 9-9
        function geo.Shape.area 10-10
        class geo.Square 13-29
        function geo.Square.Square 17-17
        function geo.Square.area 18-18
        function geo.Square.scale 19-19
        function geo.Square.scale 20-20
        class geo.Square.Corner 22-25
        function geo.Square.Corner.operator== 24-24
        alias geo.Shapes 31-31
        alias geo.uint 32-32
        class geo.Kind 33-33
        value geo.MAX_SIDES 34-34
        function geo.größe 36-38
        function geo.Square.scale 42-45
        function describe 47-73
    """,
    "csharp": """
        module Shapes.Core 4-79
        interface Shapes.Core.IShape 6-10
        function Shapes.Core.IShape.Area 9-9
        class Shapes.Core.Registry 12-72
        function Shapes.Core.Registry.Count 18-18
        function Shapes.Core.Registry.Registry 20-20
        function Shapes.Core.Registry.Add 22-22
        function Shapes.Core.Registry.Add 24-24
        class Shapes.Core.Registry.Entry 26-34
        function Shapes.Core.Registry.Entry.Name 28-28
        class Shapes.Core.Registry.Entry.Detail 30-33
        function Shapes.Core.Registry.Entry.Detail.Größe 32-32
        function Shapes.Core.Registry.Describe 36-67
        function Shapes.Core.Registry.Broken 69-71
        class Shapes.Core.Kind 74-74
        alias Shapes.Core.Visitor 76-76
        class Shapes.Core.Pair 78-78
    """,
    "ruby": """
        module Shapes 3-27
        value Shapes.MAX_SIDES 5-5
        class Shapes.Square 7-22
        function Shapes.Square.initialize 11-13
        function Shapes.Square.unit 15-17
        class Shapes.Square.Corner 19-21
        function Shapes.Square.Corner.index 20-20
        function Shapes.größe 24-26
        class Shapes.Circle 29-31
        function Shapes.Circle.area 30-30
        function describe 33-60
    """,
    "php": """
        module App.Shapes 2-2
        value MAX_SIDES 6-6
        interface HasArea 8-12
        function HasArea.area 11-11
        class Square 14-33
        function Square.__construct 22-22
        function Square.area 24-27
        function Square.größe 29-32
        class Describes 35-64
        function Describes.describe 37-63
        class Kind 66-69
        function helper 71-71
        value $registry 73-73
        function broken 75-77
    """,
    "kotlin": """
        value MAX_SIDES 5-6
        interface Shape 8-11
        function Shape.area 10-10
        class Square 13-29
        function Square.area 16-16
        function Square.scale 18-18
        function Square.scale 20-20
        class Square.Corner 22-24
        function Square.Corner.next 23-23
        class Square.Companion 26-28
        function Square.Companion.unit 27-27
        class Registry 31-33
        alias Shapes 35-35
        function größe 37-37
        function describe 39-65
    """,
    "swift": """
        value maxSides 3-4
        interface Shape 6-9
        function Shape.area 8-8
        class Square 11-32
        function Square.init 16-18
        function Square.area 20-22
        function Square.scale 24-24
        function Square.scale 26-26
        class Square.Corner 28-31
        function Square.Corner.next 30-30
        class Square 34-36
        class Kind 38-40
        alias Shapes 42-42
        function größe 44-46
        function describe 48-74
        function broken 76-78
    """,
    "scala": """
        interface Shape 5-8
        function Shape.area 7-7
        class Square 10-22
        function Square.area 13-13
        function Square.scale 15-15
        function Square.scale 17-17
        class Square.Corner 19-21
        function Square.Corner.next 20-20
        class Square 24-27
        function Square.unit 26-26
        alias Shapes 29-29
        value registry 31-31
        function größe 33-33
        function describe 35-61
        function broken 63-65
    """,
    "shell": """
        value MAX_SIDES 4-5
        value SHAPES_HOME 6-6
        function usage 8-11
        function area 13-16
        function outer 18-23
        function outer.inner 19-21
        function describe 25-54
    """,
    "lua": """
        value M 1-2
        value M.MAX_SIDES 4-5
        value Square 7-7
        value Square.__index 8-8
        function Square.new 10-13
        function Square.area 15-17
        function helper 19-24
        function helper.inner 20-22
        function größe 26-26
        function M.describe 28-54
    """,
}

# A few signatures and docs, to pin down where a header ends and how comments are read.
SIGNATURES = {
    ("python", "Outer.Inner.method"): "def method(self, x: int) -> str",
    ("python", "Outer"): "class Outer(Generic[T])",
    ("python", "MAX_RETRIES"): "MAX_RETRIES = 3",
    ("javascript", "Shape"): "class Shape",
    ("typescript", "Container.add"): "add(item: T): void",
    ("go", "Point.Area"): "func (p *Point[T]) Area() float64",
    ("rust", "Square"): "pub struct Square<T>",
    ("rust", "Kind.fmt"): "fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result",
    ("java", "Registry.toString"): "@Override public String toString()",
    ("c", "describe"): "char *describe(struct shape *shapes, int n, int verbose)",
    ("cpp", "geo.Square.scale"): "double scale(int factor) const",
    ("csharp", "Shapes.Core.Registry.Describe"): "public string Describe(List<T> shapes, bool verbose)",
    ("ruby", "Shapes.Square.Corner.index"): "def index",
    ("php", "Square.größe"): "public static function größe(float $maß): float",
    ("kotlin", "Square.area"): "override fun area(): Double",
    ("swift", "Square.init"): "init(side: T)",
    ("scala", "größe"): "def größe(maß: Double): Double",
    ("shell", "area"): "function area",
    ("lua", "Square.area"): "function Square:area()",
}
DOCS = {
    ("python", "Outer"): "Outer keeps a value of type T.",
    ("python", "Outer.Inner.method"): "Describe x.",
    ("javascript", "Shape"): "A shape with a name.",
    ("go", "Point"): "Point is generic over its coordinate.",
    ("rust", "Square.area"): "The side squared.",
    ("java", "Registry"): "A registry of shapes.",
    ("c", "square_area"): "Area of a square.",
    ("cpp", "geo.Shape"): "Something with an area.",
    ("csharp", "Shapes.Core.IShape"): "Something with an area.",
    ("php", "Square"): "A square, with a side.",
    ("shell", "usage"): "Print a usage line.",
    ("lua", "Square.new"): "Make a square with a side.",
}


def source(lang: str, text: str | None = None) -> Source:
    return Source(split_lines(fixture(lang) if text is None else text), lang=lang)


def chunks(lang: str, max_chars: int = 1000, text: str | None = None) -> list[Passage]:
    return chunk_syntax(source(lang, text), max_chars=max_chars, overlap_chars=200)


def check_contract(src: Source, result: list[Passage], max_chars: int) -> None:
    """The span contract of kenning.chunk, plus what the syntax chunker adds: no overlap, bounded
    headings, every non-blank kept line covered."""
    lines = src.lines
    pieces: dict[int, list[str]] = {}
    last_end = 0
    for p in result:
        assert 1 <= p.start_line <= p.end_line <= len(lines)
        assert 0 < len(p.text) <= max_chars
        exact = "\n".join(lines[p.start_line - 1 : p.end_line])
        if p.text != exact:  # a piece of one over-long line
            assert p.start_line == p.end_line and len(exact) > max_chars and p.text in exact
            pieces.setdefault(p.start_line, []).append(p.text)
        else:
            assert lines[p.start_line - 1].strip() and lines[p.end_line - 1].strip()
        if src.keep is not None:
            assert all(src.keep[p.start_line - 1 : p.end_line])
        # In order and disjoint (pieces of one line share it).
        assert p.start_line > last_end or (p.start_line == last_end and p.start_line in pieces)
        last_end = p.end_line
        assert len(p.heading) <= max_chars // 2 + 20
        assert "\n" not in p.heading
    for n, cut in pieces.items():
        assert "".join(cut) == lines[n - 1]
    covered = {n for p in result for n in range(p.start_line, p.end_line + 1)}
    for n, line in enumerate(lines, 1):
        if line.strip() and (src.keep is None or src.keep[n - 1]):
            assert n in covered, f"line {n} not covered: {line!r}"


# --- languages and outlines -----------------------------------------------------------------------


def test_every_language_has_a_grammar_and_a_fixture() -> None:
    assert set(LANGUAGES) == set(EXT) == set(EXPECTED)
    for lang in LANGUAGES:
        assert grammar(lang) is not None, f"{lang}: wheel missing or query does not compile"


@pytest.mark.parametrize("lang", sorted(EXT))
def test_outline_matches_the_hand_written_expectation(lang: str) -> None:
    spans = outline(fixture(lang), lang)
    assert spans is not None
    got = [f"{s.symbol.kind} {s.symbol.scope} {s.start_line}-{s.end_line}" for s in spans]
    want = [line.strip() for line in EXPECTED[lang].strip().splitlines()]
    assert got == want
    for s in spans:
        assert s.symbol.scope.endswith(s.symbol.name) and s.symbol.name
        assert len(s.symbol.signature) <= 200 and "\n" not in s.symbol.signature


def test_signatures_and_docs() -> None:
    found: dict[tuple[str, str], Symbol] = {}
    for lang in EXT:
        for span in outline(fixture(lang), lang) or []:
            found.setdefault((lang, span.symbol.scope), span.symbol)  # overloads: the first
    for key, signature in SIGNATURES.items():
        assert found[key].signature == signature, key
    for key, doc in DOCS.items():
        assert found[key].doc == doc, key


def test_outline_of_an_unknown_language_is_none() -> None:
    assert outline("IDENTIFICATION DIVISION.\n", "cobol") is None


def test_outline_counts_lines_like_kenning_does() -> None:
    text = "import os\r\n\r\ndef f():\r\n    return 1\r\n\x0c\r\ndef g():\r\n    pass\r\n"
    spans = outline(text, "python") or []
    assert [(s.symbol.name, s.start_line, s.end_line) for s in spans] == [("f", 3, 4), ("g", 6, 7)]


def test_enclosing_picks_the_innermost_symbol() -> None:
    spans = outline(fixture("python"), "python") or []
    assert (hit := enclosing(spans, 19)) is not None and hit.symbol.scope == "Outer.Inner.method"
    assert (hit := enclosing(spans, 17)) is not None and hit.symbol.scope == "Outer.Inner"
    assert (hit := enclosing(spans, 15)) is not None and hit.symbol.scope == "Outer"
    assert enclosing(spans, 3) is None
    assert enclosing([], 1) is None
    same = [SymbolSpan(Symbol("class", "A", "A"), 1, 1), SymbolSpan(Symbol("function", "f", "A.f"), 1, 1)]
    assert enclosing(same, 1) == same[1]


# --- passages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", sorted(EXT))
@pytest.mark.parametrize("max_chars", [1000, 300, 120, 40])
def test_span_contract_over_every_fixture(lang: str, max_chars: int) -> None:
    src = source(lang)
    check_contract(src, chunk_syntax(src, max_chars=max_chars, overlap_chars=100), max_chars)


@pytest.mark.parametrize("lang", sorted(EXT))
def test_walls_are_respected(lang: str) -> None:
    src = source(lang)
    rng = random.Random(lang)
    src.keep = [rng.random() > 0.08 for _ in src.lines]
    check_contract(src, chunk_syntax(src, max_chars=300, overlap_chars=0), 300)


@pytest.mark.parametrize("lang", sorted(EXT))
def test_long_function_is_split_into_a_group_with_an_outline(lang: str) -> None:
    result = chunks(lang)
    parts = [p for p in result if p.symbol is not None and p.symbol.scope == LONG[lang]]
    assert len(parts) >= 3, parts  # the outline and at least two windows
    group = parts[0].group
    assert group is not None and result[group] is parts[0]
    assert all(p.group == group for p in parts)
    outline_passage = parts[0]
    assert outline_passage.heading.startswith("function ") and " | contents: " in outline_passage.heading
    assert outline_passage.end_line < parts[1].start_line
    # Every window is headed by the symbol's header, so its context travels with it.
    assert all(p.heading.startswith(header(outline_passage.symbol, 250)[:20]) for p in parts)  # type: ignore[arg-type]


@pytest.mark.parametrize("lang", sorted(EXT))
def test_small_symbols_are_whole_passages(lang: str) -> None:
    spans = {(s.symbol, s.start_line, s.end_line) for s in outline(fixture(lang), lang) or []}
    for p in chunks(lang):
        if p.symbol is not None and p.group is None and p.symbol.kind != "module":
            assert (p.symbol, p.start_line, p.end_line) in spans
            assert p.heading.startswith(f"{p.symbol.kind} {p.symbol.scope}")


def test_python_passages() -> None:
    result = chunks("python")
    by_lines = {(p.start_line, p.end_line): p for p in result}
    imports = by_lines[(1, 4)]  # module docstring and imports: a gap, on its own
    assert imports.symbol is None and imports.heading == ""
    packed = by_lines[(6, 7)]  # two small values, packed together
    assert packed.symbol is None and packed.heading == "value T; value MAX_RETRIES"
    outer = by_lines[(10, 29)]
    assert outer.symbol is not None and outer.symbol.scope == "Outer" and outer.group is None
    assert outer.heading == "class Outer(Generic[T]) — Outer keeps a value of type T."
    assert by_lines[(74, 79)].symbol is None  # the broken function and the main block


def test_a_big_class_is_split_and_its_methods_become_passages() -> None:
    result = chunks("python", max_chars=240)
    outer = [p for p in result if p.symbol is not None and p.symbol.scope.startswith("Outer")]
    assert outer[0].symbol is not None and outer[0].symbol.scope == "Outer"
    assert (outer[0].start_line, outer[0].end_line) == (10, 13)  # comment, decorator, class line, doc
    assert outer[0].heading.endswith("| contents: Inner, get")
    assert {p.group for p in outer} == {result.index(outer[0])}
    inner = next(p for p in outer if p.symbol is not None and p.symbol.scope == "Outer.Inner")
    assert (inner.start_line, inner.end_line) == (17, 20) and inner.heading == "class Outer.Inner"
    # Small siblings inside the split class are packed, headed by their names.
    packed = next(
        p for p in outer if p.heading == "function Outer.get; function Outer.get; function Outer.get"
    )
    assert (packed.start_line, packed.end_line) == (22, 29) and packed.symbol == outer[0].symbol


def test_header_is_bounded_and_compact() -> None:
    sym = Symbol("function", "method", "Outer.method", "def method(self, x, y)", "Do it.")
    assert header(sym, 250) == "function Outer.method(self, x, y) — Do it."
    assert header(sym, 20) == "function Outer.meth…"
    assert len(header(sym, 20)) == 20
    unnamed = Symbol("function", "subscript", "A.subscript", "subscript(i: Int) -> Int")
    assert header(unnamed, 250) == "function A.subscript(i: Int) -> Int"
    other = Symbol("function", "init", "A.init", "convenience(x: Int)")
    assert header(other, 250) == "function A.init: convenience(x: Int)"


def test_unknown_language_falls_back_to_line_windows() -> None:
    text = fixture("python")
    src = Source(split_lines(text), lang="cobol")
    assert chunk_syntax(src, max_chars=300, overlap_chars=50) == chunk_code(
        src, max_chars=300, overlap_chars=50
    )
    none = Source(split_lines(text), lang=None)
    assert chunk_syntax(none, max_chars=300, overlap_chars=50) == chunk_code(
        none, max_chars=300, overlap_chars=50
    )


def test_a_missing_grammar_wheel_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = syntax_languages.Spec("tree_sitter_klingon", "(x) @function")
    monkeypatch.setitem(syntax_languages.SPECS, "klingon", broken)
    try:
        assert grammar("klingon") is None
        src = Source(split_lines(fixture("python")), lang="klingon")
        assert chunk_syntax(src, max_chars=300, overlap_chars=0) == chunk_code(
            src, max_chars=300, overlap_chars=0
        )
        assert outline("x", "klingon") is None
    finally:
        grammar.cache_clear()


def test_a_file_without_symbols_falls_back() -> None:
    text = "import os\nimport sys\n\nprint(os, sys)\n"
    src = Source(split_lines(text), lang="python")
    assert chunk_syntax(src, max_chars=100, overlap_chars=0) == chunk_code(
        src, max_chars=100, overlap_chars=0
    )


@pytest.mark.parametrize("lang", sorted(EXT))
def test_a_file_that_is_all_syntax_error_still_chunks(lang: str) -> None:
    rng = random.Random(lang)
    junk = "".join(rng.choice("{}()[];:=<>\"'`#/*\\\n  abcXYZ01.,$@!?-+ ") for _ in range(5000))
    src = source(lang, junk)
    result = chunk_syntax(src, max_chars=200, overlap_chars=0)
    assert result
    check_contract(src, result, 200)


def test_a_function_whose_body_is_a_syntax_error_does_not_crash_the_chunker() -> None:
    """Regression: an unclosed call as a function's only statement left tree-sitter a body without a named
    child, and reading its docstring raised IndexError, which ended `kenning index` (found by bench/scale.py)."""
    text = "import sys\n\n\ndef check():\n    f( a b\n"
    src = source("python", text)
    result = chunk_syntax(src, max_chars=200, overlap_chars=0)
    check_contract(src, result, 200)
    assert any("def check" in p.text for p in result)


@pytest.mark.parametrize("lang", ["python", "javascript", "c"])
def test_an_over_long_line_is_cut_into_pieces(lang: str) -> None:
    long_line = {
        "python": "X = [" + ", ".join(map(str, range(400))) + "]",
        "javascript": "const X = [" + ", ".join(map(str, range(400))) + "];",
        "c": "int X[] = {" + ", ".join(map(str, range(400))) + "};",
    }[lang]
    text = fixture(lang) + "\n" + long_line + "\n"
    src = source(lang, text)
    result = chunk_syntax(src, max_chars=300, overlap_chars=0)
    check_contract(src, result, 300)
    assert sum(1 for p in result if p.start_line == len(src.lines)) > 1


def test_an_empty_source_gives_no_passages() -> None:
    assert chunk_syntax(Source([], lang="python"), max_chars=100, overlap_chars=0) == []


@pytest.mark.parametrize("lang", sorted(EXT))
def test_registered_behind_chunk_text(lang: str) -> None:
    """Through kenning.chunk's entry point (triage first, CRLF line ends), as the index will call it."""
    from kenning.chunk import _REGISTRY as REGISTRY
    from kenning.chunk import chunk_text, register_chunker

    # the registry holds this chunker for every grammar already: put back what was there, or every later test
    # in the process chunked that language in line windows (test_file_ranking's fixtures lost their passages)
    previous = REGISTRY.get(("code", lang))
    register_chunker("code", chunk_syntax, lang=lang)
    try:
        text = fixture(lang).replace("\n", "\r\n")
        result = chunk_text(text, "code", lang, max_chars=300, overlap_chars=0)
        assert not isinstance(result, str)
        check_contract(Source(split_lines(text), lang=lang), result, 300)
        assert any(p.symbol is not None for p in result)
    finally:
        if previous is None:
            del REGISTRY[("code", lang)]
        else:
            REGISTRY[("code", lang)] = previous
