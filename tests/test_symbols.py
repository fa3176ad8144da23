"""Code symbols end to end: syntax passages in the index, symbol filters, definitions first, outlines, grep."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import make_tree, run_cli
from kenning.engine import Engine

CONFIG_PY = '''\
"""Configuration loading."""

import json

DEFAULT_PATH = "settings.json"


class ConfigError(Exception):
    """Raised when the settings cannot be used."""


def parse_config(text):
    """Read the settings from JSON text and check the required keys."""
    data = json.loads(text)
    if "name" not in data:
        raise ConfigError("missing name")
    if not isinstance(data.get("retries", 3), int):
        raise ConfigError("retries must be a whole number")
    data.setdefault("retries", 3)
    data.setdefault("timeout", 30.0)
    return data


class Loader:
    """Finds and loads settings files."""

    def load(self, path=DEFAULT_PATH):
        with open(path) as fh:
            return parse_config(fh.read())
'''

# call sites that say parse_config more often than its definition does, so BM25 alone ranks them first
CALLERS = {
    f"app/use{i}.py": f"from config import parse_config\n\n\ndef run{i}(text):\n"
    f"    # parse_config again: parse_config validates, parse_config returns the dict\n"
    f"    settings = parse_config(text)\n    return parse_config(text) or settings\n"
    for i in range(4)
}


@pytest.fixture
def code_ws(tmp_path: Path) -> Path:
    root = make_tree(
        tmp_path / "code", {"config.py": CONFIG_PY, **CALLERS, "README.md": "# App\n\nSee config.\n"}
    )
    done = run_cli("index", str(root))
    assert done.returncode == 0, done.stderr
    return root


def _hits(root: Path, *args: str) -> list[dict[str, object]]:
    out = run_cli("search", "--json", *args, str(root))
    assert out.returncode in (0, 1), out.stderr
    return [r for r in map(json.loads, out.stdout.splitlines()) if r["type"] == "hit"]


def test_passages_carry_their_symbol_in_text_and_json(code_ws: Path) -> None:
    hits = _hits(code_ws, "-k", "20", "read the settings from JSON text")
    by_symbol = {h["symbol"]["scope"]: h for h in hits if h["symbol"]}  # type: ignore[index]
    parse = by_symbol["parse_config"]
    assert (parse["path"], parse["start_line"], parse["end_line"]) == ("config.py", 12, 21)
    assert parse["symbol"]["kind"] == "function"  # type: ignore[index]
    assert parse["symbol"]["signature"].startswith("def parse_config(text)")  # type: ignore[index]
    text = run_cli("search", "read the settings from JSON text", str(code_ws)).stdout
    assert "symbol: function parse_config" in text


def test_identifier_query_ranks_definition_above_call_sites(code_ws: Path) -> None:
    """A query that is just a name asks for its definition; --prefer-symbol asks so for a name among words."""
    for args in (["parse_config"], ["parse_config()"], ["--prefer-symbol", "where is parse_config defined"]):
        hits = _hits(code_ws, "--trace", *args)
        top = hits[0]
        assert (top["path"], top["start_line"]) == ("config.py", 12), (args, [h["path"] for h in hits])
        assert top["trace"]["symbol"]["rank"] == 1  # type: ignore[index]


def test_definition_named_among_words_is_lifted_above_where_bm25_puts_it(code_ws: Path) -> None:
    """A name inside a sentence is one of the ranking's signals (the definition route's rank), not a rule that
    puts its definition first (that is for a bare name or --prefer-symbol): the definition still rises above the
    call sites BM25 prefers, among the first three."""
    plain = _hits(code_ws, "--trace", "-k", "20", "where is parse_config defined")
    ranks = {(h["path"], h["start_line"]): n for n, h in enumerate(plain)}
    lexical = {(h["path"], h["start_line"]): h["trace"]["lexical"]["rank"] for h in plain}  # type: ignore[index]
    definition = ("config.py", 12)
    assert plain[ranks[definition]]["trace"]["symbol"]["rank"] == 1  # type: ignore[index]
    assert ranks[definition] < 3
    assert lexical[definition] is None or ranks[definition] + 1 < lexical[definition]


def test_call_sites_outrank_definition_without_the_definition_route(code_ws: Path) -> None:
    """The fixture is a real test of the definition route: BM25 alone puts a call site first."""
    hits = _hits(code_ws, "--trace", "parse_config")
    (bm25_first,) = [h for h in hits if h["trace"]["lexical"]["rank"] == 1]  # type: ignore[index]
    assert bm25_first["path"].startswith("app/")  # type: ignore[union-attr]


def test_symbol_type_filters_before_ranking(code_ws: Path) -> None:
    def kinds(hit: dict[str, object]) -> set[str]:
        own = {hit["symbol"]["kind"]} if hit["symbol"] else set()  # type: ignore[index]
        return own | {d["kind"] for d in hit["defines"]}  # type: ignore[attr-defined]

    hits = _hits(code_ws, "--symbol-type", "class", "settings")
    assert hits and all("class" in kinds(h) for h in hits)
    # ConfigError's own lines (its pack with the constants above starts at 5; see test_issue19), and Loader
    assert {h["start_line"] for h in hits} == {8, 24}
    hits = _hits(code_ws, "--symbol-type", "function", "settings")
    # parse_config, and Loader.load's own lines, no longer the Loader class around it
    assert {(h["path"], h["start_line"]) for h in hits} >= {("config.py", 12), ("config.py", 27)}
    assert all(kinds(h) & {"function"} for h in hits)
    bad = run_cli("search", "--symbol-type", "Function", "x", str(code_ws))
    assert bad.returncode == 2 and "module, class, interface, impl, function, value, alias" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_prefer_symbol_boosts_definitions_named_by_plain_words(code_ws: Path) -> None:
    plain = _hits(code_ws, "--trace", "loader load")
    preferred = _hits(code_ws, "--trace", "--prefer-symbol", "loader load")
    assert preferred[0]["symbol"] and preferred[0]["symbol"]["name"] in ("Loader", "load")  # type: ignore[index]
    assert preferred[0]["trace"]["symbol"] is not None  # type: ignore[index]
    assert plain[0]["trace"]["symbol"] is None  # type: ignore[index]


def test_symbols_command_prints_the_outline(code_ws: Path) -> None:
    out = run_cli("symbols", str(code_ws / "config.py"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].endswith("config.py (python)")
    assert any("function  parse_config" in ln and "12-21" in ln for ln in lines)
    assert any("function  Loader.load" in ln for ln in lines)
    data = json.loads(run_cli("symbols", "--json", str(code_ws / "config.py")).stdout)
    kinds = {(s["kind"], s["scope"]) for s in data["symbols"]}
    assert {("value", "DEFAULT_PATH"), ("class", "ConfigError"), ("class", "Loader")} <= kinds
    readme = run_cli("symbols", str(code_ws / "README.md"))
    assert readme.returncode == 1 and "not a source file" in readme.stdout
    missing = run_cli("symbols", str(code_ws / "nope.py"))
    assert missing.returncode == 2 and "not a file" in missing.stderr


def test_grep_names_the_enclosing_symbol(code_ws: Path) -> None:
    out = run_cli("grep", "json.loads|open\\(path", "config.py", cwd=code_ws)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[1:] == ["@ function parse_config", "14:    data = json.loads(text)", "@ function Loader.load",
                         "28:        with open(path) as fh:"]  # fmt: skip
    plain = run_cli("grep", "--no-symbols", "json.loads", "config.py", cwd=code_ws)
    assert "@ " not in plain.stdout


def test_code_symbols_off_falls_back_to_line_windows(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "w", {"config.py": CONFIG_PY})
    run_cli("index", str(root), env={"KENNING_CODE_SYMBOLS": "false"})
    hits = _hits(root, "parse_config")
    assert hits and all(h["symbol"] is None for h in hits)


def test_a_name_defined_inside_a_pack_of_small_symbols_is_found_first(code_ws: Path) -> None:
    hits = _hits(code_ws, "--trace", "DEFAULT_PATH")
    top = hits[0]
    assert (top["path"], top["start_line"], top["end_line"]) == ("config.py", 5, 9)
    assert top["trace"]["symbol"]["rank"] == 1  # type: ignore[index]
    hits = _hits(code_ws, "--symbol-type", "value", "default path")
    assert [(h["path"], h["start_line"]) for h in hits] == [("config.py", 5)]


def test_a_definition_outranks_a_call_site_that_tops_both_other_arms(tmp_path: Path) -> None:
    """Regression: weight 2 at rank 1 tied 1/61 + 1/61 exactly, and the tie went by passage id."""
    body = "\n".join(f"    part_{i} = compute_part({i})" for i in range(40))
    files = {f"c{i:03}.py": "from lib import make_widget\n\nmake_widget()\n" for i in range(150)}
    files["zz_def.py"] = f"def make_widget():\n{body}\n    return part_0\n"
    root = make_tree(tmp_path / "w", files)
    run_cli("index", str(root))
    assert _hits(root, "make_widget")[0]["path"] == "zz_def.py"


def test_a_filtered_search_finds_a_definition_behind_many_namesakes(tmp_path: Path) -> None:
    """Regression: the definition lookup cut at 1,000 rows before the exact spelling and the filters."""
    files = {
        f"d{i:03}.py": "def handle(x):\n    return x\n\n\ndef Handle(y):\n    return y\n" for i in range(600)
    }
    files["z/main.py"] = "def handle(event):\n    return event\n"
    root = make_tree(tmp_path / "w", files)
    run_cli("index", str(root))
    (top,) = _hits(root, "--path", "z", "--trace", "handle")
    assert top["path"] == "z/main.py" and top["trace"]["symbol"]["rank"] == 1  # type: ignore[index]


def test_no_index_search_refuses_a_bad_symbol_type_and_says_what_it_ignored(tmp_path: Path) -> None:
    """Regression: --no-index returned before --symbol-type was checked, and applied none of it."""
    root = make_tree(tmp_path / "w", {"a.py": "def compute_checksum(data):\n    return sum(data)\n"})
    bad = run_cli("search", "--no-index", "--symbol-type", "method", "compute_checksum", str(root))
    assert bad.returncode == 2 and "module, class, interface, impl, function, value, alias" in bad.stderr
    ok = run_cli("search", "--no-index", "--symbol-type", "class", "compute_checksum", str(root))
    assert ok.returncode == 0 and "--symbol-type need the index" in ok.stdout


def test_grep_marks_a_return_to_top_level(tmp_path: Path) -> None:
    """Regression: a module-level match after one inside a function was shown under the function's name."""
    root = make_tree(
        tmp_path / "w", {"a.py": "def foo():\n    token = 1\n    return token\n\n\nprint(token)\n"}
    )
    out = run_cli("grep", "token", "a.py", cwd=root).stdout.splitlines()
    assert out[1:] == [
        "@ function foo",
        "2:    token = 1",
        "3:    return token",
        "@ (top level)",
        "6:print(token)",
    ]


def test_regression_a_qualified_name_lost_its_definition_behind_50_others(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    """`Zed.run` among 60 other classes' `run`: the scope check ran after the cut to 50 definitions."""
    files = {f"m{i:03d}.py": f"class C{i:03d}:\n    def run(self):\n        return {i}\n" for i in range(60)}
    root = make_tree(
        tmp_path / "ws", {**files, "zzz.py": "class Zed:\n    def run(self):\n        return 0\n"}
    )
    engine = engine_factory(root)
    engine.index()
    for query, want in (("Zed.run", "zzz.py"), ("C005.run", "m005.py")):
        [result] = engine.search(query, trace=True, limit=3)
        assert result.hits[0].path == want, (query, [h.path for h in result.hits])


def test_regression_hybrid_over_an_unembedded_index_ranked_unlike_lexical(
    tmp_path: Path, engine_factory: Callable[..., Engine]
) -> None:
    """An empty semantic arm (no vectors yet) still took 0.7 of the weight, so the symbol bonus overrode BM25."""
    root = make_tree(tmp_path / "code", {"config.py": CONFIG_PY, **CALLERS})
    engine = engine_factory(root)
    engine.index(semantic=False)
    query = "where is parse_config defined"
    [lexical] = engine.search(query, mode="lexical")
    [hybrid] = engine.search(query, mode="hybrid")
    assert [(h.path, h.start_line) for h in hybrid.hits] == [(h.path, h.start_line) for h in lexical.hits]
    assert [h.score for h in hybrid.hits] == [h.score for h in lexical.hits]


def test_regression_fusing_a_query_with_itself_changed_the_ranking(
    code_ws: Path, engine_factory: Callable[..., Engine]
) -> None:
    """Each route of a fused group counted at full weight, so two queries outweighed the symbol bonus."""
    engine = engine_factory(code_ws)
    query = "where is parse_config defined"
    [one] = engine.search(query, prefer_symbol=True)
    [two] = engine.search([query, query], fuse=True, prefer_symbol=True)
    assert (one.hits[0].path, one.hits[0].start_line) == ("config.py", 12)
    assert [(h.path, h.start_line) for h in two.hits] == [(h.path, h.start_line) for h in one.hits]


RUST_LIB = """\
pub struct Meter {
    pub value: f64,
}

impl Meter {
    pub fn doubled(&self) -> f64 {
        self.value * 2.0
    }
}
"""


def test_regression_a_rust_impl_block_was_listed_as_a_class(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "crate", {"src/lib.rs": RUST_LIB})
    data = json.loads(run_cli("symbols", "--json", str(root / "src" / "lib.rs")).stdout)
    assert [(s["kind"], s["scope"]) for s in data["symbols"]] == [
        ("class", "Meter"),
        ("impl", "Meter"),
        ("function", "Meter.doubled"),
    ]
    # its own kind to filter by, and the struct is no longer found as two classes
    assert run_cli("index", str(root)).returncode == 0
    impls = _hits(root, "--symbol-type", "impl", "meter doubled")
    assert [h["symbol"]["kind"] for h in impls] == ["impl"]  # type: ignore[index]
    classes = _hits(root, "--symbol-type", "class", "meter")
    assert [h["symbol"]["kind"] for h in classes] == ["class"]  # type: ignore[index]
