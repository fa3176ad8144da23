"""kenning grep: both engines (rg and Python) on real files, and that they print byte-identical output."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import KEY_BODY, KEY_FILES, NOT_KEY_FILES, make_tree
from kenning.errors import UsageError
from kenning.search.grep import (
    MAX_LINE_CHARS,
    GrepFile,
    GrepLine,
    GrepOptions,
    grep,
    render_grep,
    rg_available,
)
from kenning.types import Selection, Skip

CONTEXT_FILE = "".join(f"line {i}{' needle' if i in (3, 5, 12, 20) else ''}\n" for i in range(1, 21))

CORPUS: dict[str, str | bytes] = {
    ".gitignore": "ignored.txt\n",
    "ignored.txt": "needle in a gitignored file\n",
    ".env": "API_KEY=needle\n",
    "secrets.yaml": "token: needle\n",
    "data.txt": b"needle\x00\x01\x02 binary\n",  # text by its name, binary by the sniff
    "image.png": b"\x89PNG needle\n",  # an unsupported format, never read
    "docs/unicode.md": "# Überblick\n\nnaïve café needle\nStraße ohne Nadel\n",
    "docs/legacy.txt": "café crème needle\n€ euro sign\n".encode("cp1252"),
    "docs/latin1.txt": b"\x81 is not cp1252; caf\xe9 needle\n",  # read_text falls back to latin-1
    "src/ctx.txt": CONTEXT_FILE,
    "src/flags.sh": "run -x now\nrun --x later\nrun-x never\n",
    "src/literal.txt": "call a.c( here\ncall abc( there\n",
    "src/crlf.txt": "first needle\r\nsecond\r\nthird needle\r\n",
    "src/oldmac.txt": "one\rtwo needle\rthree\r",
    "src/utf16.txt": "utf16 needle\nzweite Zeile\n".encode("utf-16"),
    "src/long.txt": "x" * 600 + " needle\n",
}
EXCLUDED = ("ignored.txt", ".env", "secrets.yaml", "data.txt", "image.png")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "ws", CORPUS)


@pytest.fixture(params=["python", "rg"])
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "rg" and not rg_available():
        pytest.skip("rg is not on PATH (test_rg_is_installed_on_ci keeps CI from skipping this)")
    return str(request.param)


def run(root: Path, engine: str, *patterns: str, **kw: Any) -> list[GrepFile]:
    paths = kw.pop("paths", ())
    selection = kw.pop("selection", Selection())
    return list(grep(root, GrepOptions(patterns, **kw), paths=paths, selection=selection, engine=engine))  # type: ignore[arg-type]


def text(root: Path, engine: str, *patterns: str, **kw: Any) -> str:
    return "\n".join(render_grep(run(root, engine, *patterns, **kw)))


def test_rg_is_installed_on_ci() -> None:
    if os.environ.get("CI", "").lower() != "true":
        pytest.skip("only enforced where CI=true")
    assert rg_available(), "CI must install ripgrep (apt-get install ripgrep) so the rg engine is tested"


# -- the two engines agree -----------------------------------------------------------------------------------

SAME_OUTPUT = [
    pytest.param(("needle",), {}, id="plain"),
    pytest.param(("NEEDLE",), {"ignore_case": True}, id="-i"),
    pytest.param(("café",), {}, id="non-ascii"),
    pytest.param(("CAFÉ", "CRÈME"), {"ignore_case": True}, id="-i-non-ascii"),
    pytest.param(("caf.",), {}, id="dot-over-latin1"),
    # \w is Unicode in both engines; \b is ASCII in both (RE2 has no other), so it is not next to the é here
    pytest.param((r"\w+é\s\bn",), {}, id="unicode-classes"),
    pytest.param(("€",), {}, id="cp1252-euro"),
    pytest.param(("a.c(",), {"fixed": True}, id="-F"),
    pytest.param(("-x",), {}, id="leading-dash"),
    pytest.param(("-x",), {"word": True}, id="-w-leading-dash"),
    pytest.param(("café", "line"), {"word": True}, id="-w"),
    pytest.param(("needle", "euro", "Zeile"), {}, id="-e-several"),
    pytest.param(("needle",), {"before": 1, "after": 1}, id="-C1"),
    pytest.param(("needle",), {"after": 2}, id="-A2"),
    pytest.param(("needle",), {"before": 2}, id="-B2"),
    pytest.param(("needle",), {"before": 50, "after": 50}, id="-C50"),
    pytest.param(("needle",), {"max_count": 1, "after": 3}, id="-m1-A3"),
    pytest.param(("needle$",), {}, id="dollar-at-crlf"),
    pytest.param(("^",), {}, id="every-line"),
    pytest.param(("(?i)STRASSE|straße",), {}, id="inline-flag"),
]


@pytest.mark.parametrize(("patterns", "kw"), SAME_OUTPUT)
def test_both_engines_print_the_same_bytes(ws: Path, patterns: tuple[str, ...], kw: dict[str, Any]) -> None:
    if not rg_available():
        pytest.skip("rg is not on PATH")
    by_python = text(ws, "python", *patterns, **kw)
    by_rg = text(ws, "rg", *patterns, **kw)
    assert by_python, "the case must find something, or the comparison proves nothing"
    assert by_rg.encode() == by_python.encode()


@pytest.mark.parametrize(("patterns", "kw"), SAME_OUTPUT)
def test_both_engines_place_the_same_submatches(
    ws: Path, patterns: tuple[str, ...], kw: dict[str, Any]
) -> None:
    """rg's own submatches (rg engine) and RE2's (Python engine): the spans `kenning grep --json` prints."""
    if not rg_available():
        pytest.skip("rg is not on PATH")
    placed = [
        [(f.path, [(ln.line, ln.spans) for ln in f.lines]) for f in run(ws, engine, *patterns, **kw)]
        for engine in ("python", "rg")
    ]
    assert placed[0] == placed[1]


def test_both_engines_raise_the_same_error_for_an_invalid_regex(ws: Path) -> None:
    if not rg_available():
        pytest.skip("rg is not on PATH")
    messages = []
    for engine in ("python", "rg"):
        with pytest.raises(UsageError) as err:
            run(ws, engine, "needle", "(unclosed")
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert "'(unclosed'" in messages[0] and "-F" in messages[0] and len(messages[0].splitlines()) == 1


def test_rg_engine_hands_each_plain_text_file_to_rg_with_its_encoding(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins the routing: UTF-8 and cp1252 files go to rg; files rg would read differently stay in Python."""
    if not rg_available():
        pytest.skip("rg is not on PATH")
    calls: list[list[str]] = []
    real_run = subprocess.run

    def spy(args: list[str], **kw: Any) -> Any:
        calls.append(list(args))
        return real_run(args, **kw)

    monkeypatch.setattr(subprocess, "run", spy)  # kenning.search.grep calls subprocess.run through the module
    run(ws, "rg", "needle")
    files_by_encoding = {}
    for args in calls:
        if "--" in args:  # a search (the pattern check reads stdin and names no file)
            encoding = args[args.index("--encoding") + 1] if "--encoding" in args else "auto"
            files_by_encoding[encoding] = args[args.index("--") + 1 :]
    assert len([c for c in calls if "--" in c]) == 2
    assert files_by_encoding["auto"] == [
        "docs/unicode.md", "src/ctx.txt", "src/flags.sh", "src/literal.txt", "src/long.txt",
    ]  # fmt: skip
    files_1252 = files_by_encoding["windows-1252"]
    assert files_1252 == ["docs/legacy.txt"]


# -- behaviour, on each engine -------------------------------------------------------------------------------


def test_selection_is_the_indexing_selection(ws: Path, engine: str) -> None:
    paths = [f.path for f in run(ws, engine, "needle")]
    assert paths == [
        "docs/latin1.txt",
        "docs/legacy.txt",
        "docs/unicode.md",
        "src/crlf.txt",
        "src/ctx.txt",
        "src/long.txt",
        "src/oldmac.txt",
        "src/utf16.txt",
    ]
    assert paths == sorted(paths)
    assert not set(EXCLUDED) & set(paths)


def test_secrets_stay_out_even_with_hidden_and_no_ignore(ws: Path, engine: str) -> None:
    paths = [f.path for f in run(ws, engine, "needle", selection=Selection(hidden=True, no_ignore=True))]
    assert "ignored.txt" in paths and ".gitignore" not in paths
    assert ".env" not in paths and "secrets.yaml" not in paths and "data.txt" not in paths


def test_skipped_files_are_reported(ws: Path, engine: str) -> None:
    skips: list[Skip] = []
    opts = GrepOptions(("needle",))
    list(grep(ws, opts, engine=engine, on_skip=skips.append))  # type: ignore[arg-type]
    assert Skip("data.txt", "binary") in skips
    assert any(s.rel == "secrets.yaml" and "secret" in s.reason for s in skips)


def test_regression_a_private_key_under_another_name_is_never_grepped(tmp_path: Path, engine: str) -> None:
    """Secrets were judged by name only, so grep printed the key in ``deploy_key`` or ``server.crt``."""
    root = make_tree(tmp_path / "ws", KEY_FILES | NOT_KEY_FILES)
    skips: list[Skip] = []
    opts = GrepOptions(("BEGIN", "ssh-rsa", KEY_BODY[64:96]))
    found = list(grep(root, opts, engine=engine, on_skip=skips.append))  # type: ignore[arg-type]
    assert [f.path for f in found] == sorted(NOT_KEY_FILES)  # certificates, public keys, a parser's constant
    assert sorted(skips, key=lambda s: s.rel) == [
        Skip(rel, "secret file (contains a private key)") for rel in sorted(KEY_FILES)
    ]


def test_exact_rendering_with_context_and_separators(ws: Path, engine: str) -> None:
    out = text(ws, engine, "needle", before=1, after=1, paths=["src/ctx.txt"])
    assert out == (
        "src/ctx.txt\n"
        "2-line 2\n3:line 3 needle\n4-line 4\n5:line 5 needle\n6-line 6\n--\n"
        "11-line 11\n12:line 12 needle\n13-line 13\n--\n"
        "19-line 19\n20:line 20 needle"
    )


def test_after_and_before_context(ws: Path, engine: str) -> None:
    [after] = run(ws, engine, "needle", after=2, paths=["src/ctx.txt"])
    assert [ln.line for ln in after.lines] == [3, 4, 5, 6, 7, 12, 13, 14, 20]
    assert [ln.line for ln in after.lines if ln.match] == [3, 5, 12, 20]
    [before] = run(ws, engine, "needle", before=2, paths=["src/ctx.txt"])
    assert [ln.line for ln in before.lines] == [1, 2, 3, 4, 5, 10, 11, 12, 18, 19, 20]


def test_no_separator_without_context(ws: Path, engine: str) -> None:
    out = text(ws, engine, "needle", paths=["src/ctx.txt"])
    assert out == "src/ctx.txt\n3:line 3 needle\n5:line 5 needle\n12:line 12 needle\n20:line 20 needle"


def test_max_count_keeps_trailing_context_as_context(ws: Path, engine: str) -> None:
    [found] = run(ws, engine, "needle", max_count=1, after=3, paths=["src/ctx.txt"])
    assert [(ln.line, ln.match) for ln in found.lines] == [(3, True), (4, False), (5, False), (6, False)]
    assert run(ws, engine, "needle", max_count=0) == []


def test_ignore_case_fixed_word_and_several_patterns(ws: Path, engine: str) -> None:
    [uni] = run(ws, engine, "NAÏVE CAFÉ", ignore_case=True, paths=["docs/unicode.md"])
    assert [ln.text for ln in uni.lines] == ["naïve café needle"]
    [lit] = run(ws, engine, "a.c(", fixed=True, paths=["src/literal.txt"])
    assert [ln.line for ln in lit.lines] == [1]
    [word] = run(ws, engine, "-x", word=True, paths=["src/flags.sh"])
    assert [ln.text for ln in word.lines] == ["run -x now", "run --x later"]
    [both] = run(ws, engine, "now", "never", paths=["src/flags.sh"])
    assert [ln.line for ln in both.lines] == [1, 3]


def test_pattern_starting_with_a_dash(ws: Path, engine: str) -> None:
    [found] = run(ws, engine, "--x", paths=["src/flags.sh"])
    assert [ln.text for ln in found.lines] == ["run --x later"]


def test_latin1_and_cp1252_files_print_their_letters(ws: Path, engine: str) -> None:
    found = {f.path: [ln.text for ln in f.lines] for f in run(ws, engine, "café|€")}
    assert found["docs/legacy.txt"] == ["café crème needle", "€ euro sign"]
    assert found["docs/latin1.txt"] == ["\x81 is not cp1252; café needle"]


def test_line_ends_and_utf16(ws: Path, engine: str) -> None:
    found = {f.path: [(ln.line, ln.text) for ln in f.lines] for f in run(ws, engine, "needle$")}
    assert found["src/crlf.txt"] == [(1, "first needle"), (3, "third needle")]
    assert found["src/oldmac.txt"] == [(2, "two needle")]  # a lone CR ends a line, as read_text reads it
    assert found["src/utf16.txt"] == [(1, "utf16 needle")]


def test_long_lines_are_clipped_when_rendered(ws: Path, engine: str) -> None:
    [found] = run(ws, engine, "needle", paths=["src/long.txt"])
    assert len(found.lines[0].text) == 607  # the data keeps the whole line
    rendered = list(render_grep([found]))[1]
    assert rendered == "1:" + "x" * MAX_LINE_CHARS + " … [+107 chars]"


def test_paths_narrow_the_search(ws: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [f.path for f in run(ws, engine, "needle", paths=["docs"])] == [
        "docs/latin1.txt",
        "docs/legacy.txt",
        "docs/unicode.md",
    ]
    assert [
        f.path for f in run(ws, engine, "needle", paths=[ws / "src" / "crlf.txt", "docs/unicode.md"])
    ] == [
        "docs/unicode.md",
        "src/crlf.txt",
    ]
    assert len(run(ws, engine, "needle", paths=["."])) == 8
    monkeypatch.chdir(ws / "src")  # a shell user's spelling: relative to the current directory
    assert [f.path for f in run(ws, engine, "needle", paths=["crlf.txt"])] == ["src/crlf.txt"]


def test_paths_outside_the_root_or_missing_are_usage_errors(ws: Path, engine: str) -> None:
    (ws.parent / "outside.txt").write_text("needle\n")
    with pytest.raises(UsageError, match="outside the root"):
        run(ws, engine, "needle", paths=[ws.parent / "outside.txt"])
    with pytest.raises(UsageError, match="outside the root"):
        run(ws, engine, "needle", paths=["../outside.txt"])
    with pytest.raises(UsageError, match="does not exist"):
        run(ws, engine, "needle", paths=["no/such/dir"])


def test_a_path_that_is_a_symlink_searches_its_target_inside_the_root_and_is_refused_outside(
    ws: Path, engine: str
) -> None:
    """Regression: a PATH through a link kept the link's name, which a walk that does not follow links never
    yields, so a link inside the root searched nothing and one leaving it searched nothing silently."""
    (ws / "alias").symlink_to(ws / "docs", target_is_directory=True)
    docs = ["latin1.txt", "legacy.txt", "unicode.md"]
    assert [f.path for f in run(ws, engine, "needle", paths=["alias"])] == [f"docs/{d}" for d in docs]
    followed = run(ws, engine, "needle", paths=["alias"], selection=Selection(follow=True))
    assert [f.path for f in followed] == [f"alias/{d}" for d in docs]
    (ws / "away").symlink_to(ws.parent, target_is_directory=True)
    for selection in (Selection(), Selection(follow=True)):
        with pytest.raises(UsageError, match=r"symlink to .* outside the root"):
            run(ws, engine, "needle", paths=["away"], selection=selection)


@pytest.mark.parametrize(
    ("patterns", "kw", "expected"),
    [
        (("(unclosed",), {}, "-F"),
        (("a\nb",), {}, "line break"),
        (("a\nb",), {"fixed": True}, "line break"),
        (("(a)\\1",), {}, "backreferences"),
        (("a(?=b)",), {}, "look-around"),
        ((), {}, "no pattern"),
        (("x",), {"before": -1}, "negative"),
        (("x",), {"max_count": -1}, "negative"),
    ],
)
def test_unusable_patterns_and_options(
    ws: Path, engine: str, patterns: tuple[str, ...], kw: dict[str, Any], expected: str
) -> None:
    with pytest.raises(UsageError, match=expected) as err:
        grep(ws, GrepOptions(patterns, **kw), engine=engine)  # type: ignore[arg-type]  # raises at the call
    assert len(str(err.value).splitlines()) == 1


def test_look_around_is_refused_by_both_engines_in_one_line(ws: Path, engine: str) -> None:
    # RE2 and rg's default engine match in linear time and have no look-around: refused alike, before any file
    with pytest.raises(UsageError, match="look-around") as err:
        grep(ws, GrepOptions(("run(?= -x)",)), engine=engine)  # type: ignore[arg-type]
    assert len(str(err.value).splitlines()) == 1


def test_posix_classes_work_in_both_engines(ws: Path, engine: str) -> None:
    [found] = run(ws, engine, "^[[:alpha:]]+ --x", paths=["src/flags.sh"])
    assert [ln.line for ln in found.lines] == [2]


def test_a_path_that_is_not_utf8(tmp_path: Path, engine: str) -> None:
    name = os.fsdecode(b"caf\xe9.txt")  # rg reports this path as {"bytes": base64}
    root = make_tree(tmp_path / "ws", {name: "needle\n"})
    assert [f.path for f in run(root, engine, "needle")] == [name]


def test_engine_rg_without_rg_is_a_usage_error(
    ws: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert not rg_available()
    with pytest.raises(UsageError, match="--engine python"):
        grep(ws, GrepOptions(("needle",)), engine="rg")
    assert len(list(grep(ws, GrepOptions(("needle",)), engine="auto"))) == 8  # auto falls back to Python


# -- rendering -----------------------------------------------------------------------------------------------


def files() -> Iterator[GrepFile]:
    yield GrepFile("a.txt", (GrepLine(1, "one", True), GrepLine(9, "nine", True)))
    yield GrepFile(
        "b.txt", (GrepLine(2, "two", False), GrepLine(3, "three", True), GrepLine(7, "x", True)), True
    )


def test_render_groups_by_file() -> None:
    assert list(render_grep(files())) == [
        "a.txt",
        "1:one",
        "9:nine",
        "",
        "b.txt",
        "2-two",
        "3:three",
        "--",
        "7:x",
    ]


def test_render_in_colour() -> None:
    lines = list(render_grep(files(), color=True))
    assert lines[0] == "\x1b[35ma.txt\x1b[0m" and lines[1] == "\x1b[32m1\x1b[0m:one"
    assert lines[7] == "--"


def test_match_spans_are_character_offsets_and_the_engines_agree(ws: Path, engine: str) -> None:
    """The spans behind `grep --json`'s submatches: found by the same regex in both engines, in characters."""
    found = {f.path: f.lines for f in run(ws, engine, "café|needle")}
    [line] = found["docs/unicode.md"]
    assert line.text == "naïve café needle" and line.spans == ((6, 10), (11, 17))
    [line] = found["docs/legacy.txt"]  # decoded from cp1252: offsets count characters, not bytes
    assert line.spans == ((0, 4), (11, 17))
    [found_ctx] = run(ws, engine, "needle", paths=["src/ctx.txt"], before=1)
    assert all(bool(ln.spans) == ln.match for ln in found_ctx.lines)  # context lines carry none
    [empty] = run(ws, engine, "x*", paths=["src/flags.sh"], max_count=1)
    assert empty.lines[0].spans == ((5, 6),)  # the one real match, not an empty one at every position
    [empty] = run(ws, engine, "^", paths=["src/flags.sh"], max_count=1)
    assert empty.lines[0].spans == ((0, 0),)  # only empty matches: the first, so a column is still known


def test_regression_a_hidden_folder_named_outright_was_refused_or_gave_no_match(tmp_path: Path) -> None:
    """`kenning grep PAT .github` refused with "left out of the search: it is hidden", and the MCP grep answered
    "no line matches" for the same call, where ripgrep searches a path it is given. A hidden PATH is searched
    now; what is hidden inside it, and secrets, stay out, and a walk without PATHs still skips it."""
    from conftest import run_cli
    from test_mcp import call, drive

    root = make_tree(
        tmp_path / "ws",
        {
            ".github/workflows/ci.yml": "jobs:\n  test:\n    runs-on: ubuntu-latest\n",
            ".github/.cache.yml": "runs-on: ubuntu-hidden\n",
            ".github/.env": "RUNNER=ubuntu-secret\n",
            "src/a.py": 'RUNNER = "ubuntu-src"\n',
        },
    )
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for engine in ("python", "rg"):
        out = run_cli("grep", "--engine", engine, "ubuntu", ".github", cwd=root)
        assert out.returncode == 0, out.stderr
        assert out.stdout == ".github/workflows/ci.yml\n3:    runs-on: ubuntu-latest\n", out.stdout
        whole = run_cli("grep", "--engine", engine, "-l", "ubuntu", cwd=root)
        assert whole.stdout == "src/a.py\n"  # no PATH: hidden folders stay out, as before
    one = run_cli("grep", "-l", "ubuntu", ".github/workflows/ci.yml", cwd=root)
    assert one.stdout == ".github/workflows/ci.yml\n", one.stderr

    async def body(client: Any) -> None:
        text, _data = await call(client, "grep", {"pattern": "ubuntu", "paths": [".github"]})
        assert "ubuntu-latest" in text and "ubuntu-hidden" not in text and "ubuntu-secret" not in text, text

    drive(body, root)
