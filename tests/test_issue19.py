"""Regression tests for issue 19: small defects a user met in the CLI, the MCP server and the installer."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import git, make_tree, run_cli


def _fuse_corpus(root: Path) -> Path:
    files = {
        "docs/errors.md": "# Errors\n\nregister error handler\n",
        "docs/notfound.md": "# Not found\n\ncustom 404 page\n",
    }
    # passages holding a little of both queries, which the summed ranking put above each query's own best
    for i in range(8):
        files[f"docs/mixed{i}.md"] = (
            f"# Topic {i}\n\nregister an error handler for a custom 404 page, variant {i}.\n"
        )
    for i in range(30):
        files[f"docs/noise{i}.md"] = (
            f"# Noise {i}\n\nunrelated words about cats and dogs number {i}, error.\n"
        )
    return make_tree(root, files)


def test_regression_fuse_keeps_each_groups_best_hit(tmp_path: Path) -> None:
    root = _fuse_corpus(tmp_path / "ws")
    assert run_cli("index", ".", cwd=root).returncode == 0
    queries = ("register error handler", "custom 404 page")
    best = []
    for q in queries:
        alone = run_cli("search", "--json", "-k", "1", q, ".", cwd=root)
        best.append(json.loads(alone.stdout.splitlines()[0])["path"])
    assert best == ["docs/errors.md", "docs/notfound.md"]
    out = run_cli("search", "--json", "-k", "5", "-q", queries[0], "-q", queries[1], "--fuse", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    hits = [json.loads(line) for line in out.stdout.splitlines() if json.loads(line)["type"] == "hit"]
    assert len(hits) == 5
    assert {h["path"] for h in hits[:2]} == set(best)


def test_regression_mcp_grep_paths_say_files_not_passages(corpus: Path) -> None:
    from mcp import Client

    from test_mcp import drive

    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        grep = tools["grep"].input_schema["properties"]
        assert "passage" not in json.dumps(grep).lower()  # grep reads lines of files: it has no passages
        assert "files or directories" in grep["paths"]["description"]
        assert "passages under" in tools["text_search"].input_schema["properties"]["paths"]["description"]

    drive(body, corpus)


def test_regression_grep_count_and_files_with_matches(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path / "ws",
        {"src/a.py": "a = 'retry'\nb = 1\nretry(retry)\n", "c.txt": "retry once\n", "d.md": "# nothing\n"},
    )
    for flag in ("-c", "--count"):
        out = run_cli("grep", flag, "retry", cwd=root)
        assert (out.returncode, out.stdout, out.stderr) == (
            0,
            "c.txt:1\nsrc/a.py:2\n",
            "",
        )  # lines, not matches
    for flag in ("-l", "--files-with-matches"):
        out = run_cli("grep", flag, "-C", "2", "retry", cwd=root)  # context means nothing to a list of files
        assert (out.returncode, out.stdout) == (0, "c.txt\nsrc/a.py\n")
    assert run_cli("grep", "-l", "--engine", "python", "retry", "src", cwd=root).stdout == "src/a.py\n"
    assert (
        run_cli("grep", "-c", "-l", "retry", cwd=root).stdout == "c.txt:1\nsrc/a.py:2\n"
    )  # -c wins, as in rg
    for flag in ("-c", "-l"):
        none = run_cli("grep", flag, "absent", cwd=root)
        assert (none.returncode, none.stdout) == (1, "")
        refused = run_cli("grep", flag, "--json", "retry", cwd=root)
        assert refused.returncode == 2 and refused.stdout == ""
        assert "cannot be combined with --json" in refused.stderr and len(refused.stderr.splitlines()) == 1


def _installed(tmp_path: Path, name: str, claude_json: str, *flags: str) -> tuple[Path, str]:
    home = tmp_path / name
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(claude_json, encoding="utf-8")
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp_path / f"{name}-state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CODEX_HOME": "",
        "CLAUDE_CONFIG_DIR": "",
    }
    out = run_cli("install", "--target", "claude", "--yes", *flags, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    return home, (home / ".claude.json").read_text(encoding="utf-8")


def test_regression_install_keeps_the_claude_json_indentation_and_key_order(tmp_path: Path) -> None:
    # 4 spaces, keys in no order, an escaped character and a number json.dumps would rewrite
    spaces = (
        '{\n    "zeta": true,\n    "mcpServers": {\n        "github": {"command": "gh-mcp", "args": []}\n    },\n'
        '    "alpha": "caf\\u00e9",\n    "numStartups": 1.50\n}\n'
    )
    _, after = _installed(tmp_path, "spaces", spaces)
    cut = spaces.index("\n    },")  # the end of the last server: kenning's entry goes after it
    assert after.startswith(spaces[:cut]) and after.endswith(spaces[cut:])
    added = after[cut : len(after) - len(spaces) + cut]
    assert added.startswith(',\n        "kenning": {\n            "type": "stdio",\n')
    assert added.endswith("\n        }") and "\t" not in added
    assert json.loads(after)["mcpServers"]["kenning"]["type"] == "stdio"

    # tabs, and no mcpServers yet: the whole object is added at the end, tab-indented
    tabs = '{\n\t"projects": {\n\t\t"/src/x": {"allowedTools": []}\n\t},\n\t"b": 2,\n\t"a": 1\n}'
    _, after = _installed(tmp_path, "tabs", tabs)
    cut = tabs.rindex("\n}")
    assert after.startswith(tabs[:cut]) and after.endswith(tabs[cut:])
    added = after[cut : len(after) - len(tabs) + cut]
    assert (
        added.startswith(',\n\t"mcpServers": {\n\t\t"kenning": {\n\t\t\t"type": "stdio",\n')
        and "  " not in added
    )
    assert list(json.loads(after)) == ["projects", "b", "a", "mcpServers"]


CART_TS = """export interface CartItem {
  name: string;
  price: number;
  quantity: number;
}

export function cartTotal(items: CartItem[]): number {
  return items.reduce((sum, item) => sum + item.price * item.quantity, 0);
}
"""


def test_regression_symbol_type_hit_is_the_symbols_own_span(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"web/cart.ts": CART_TS})
    assert run_cli("index", ".", cwd=root).returncode == 0
    query = "total price of the items in the cart"
    packed = json.loads(run_cli("search", "--json", query, ".", cwd=root).stdout.splitlines()[0])
    assert (packed["start_line"], packed["end_line"]) == (1, 9)  # the two small symbols are one passage
    for kind, span, name in (("function", (7, 9), "cartTotal"), ("interface", (1, 5), "CartItem")):
        out = run_cli("search", "--json", "--symbol-type", kind, query, ".", cwd=root)
        hit = json.loads(out.stdout.splitlines()[0])
        assert (hit["start_line"], hit["end_line"]) == span, hit
        assert hit["symbol"]["kind"] == kind and hit["symbol"]["name"] == name
        assert [d["name"] for d in hit["defines"]] == [name]
        assert hit["text"] == "\n".join(CART_TS.splitlines()[span[0] - 1 : span[1]])
        text = run_cli("search", "--symbol-type", kind, query, ".", cwd=root).stdout
        assert text.startswith(f"web/cart.ts:{span[0]}-{span[1]}  ") and f"symbol: {kind} {name}" in text
    # changed since indexing: its lines are no longer known, so a stale hit stays the whole passage (a search
    # that refreshes the index first finds the moved function itself)
    (root / "web/cart.ts").write_text("// moved\n" + CART_TS)
    out = run_cli("search", "--json", "--symbol-type", "function", query, ".", cwd=root)
    hit = json.loads(out.stdout.splitlines()[0])
    assert (hit["start_line"], hit["end_line"]) == ((1, 9) if hit["stale"] else (8, 10))


def test_regression_text_hit_on_a_big_symbol_shows_its_signature_and_members(tmp_path: Path) -> None:
    methods = "".join(
        f"    def method_{i}(self, request, nonce_{i}):\n"
        + "".join(
            f"        value_{j} = request.headers.get('x-digest-{i}-{j}', nonce_{i})\n" for j in range(6)
        )
        + "        return value_0\n\n"
        for i in range(12)
    )
    root = make_tree(
        tmp_path / "ws", {"auth.py": f"class Auth:\n    pass\n\n\nclass DigestAuth(Auth):\n{methods}"}
    )
    assert run_cli("index", ".", cwd=root).returncode == 0
    out = run_cli("search", "--symbol-type", "class", "-k", "5", "digest auth", ".", cwd=root)
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("auth.py:5-5  ")[1].split("\n\n")[0].splitlines()
    # the outline passage's text is the class line alone: what locates it is its signature and members
    assert block[1] == "  symbol: class DigestAuth(Auth)"
    assert block[2].startswith("  contents: method_0, method_1, method_2") and len(block[2]) <= 124
    assert block[3] == "  5  class DigestAuth(Auth):" and len(block) == 4
    window = run_cli("search", "-k", "1", "x-digest-3-4 nonce_3", ".", cwd=root).stdout.splitlines()
    assert window[1] == "  symbol: function DigestAuth.method_3(self, request, nonce_3)"


BILL_PY = (
    "def load_rows(path):\n"
    + "".join(f"    row_{i} = read_line(path, {i})  # the {i}th row of the sheet\n" for i in range(14))
    + "    return row_0\n\n\ndef compute_invoice_total(items):\n    return sum(i.price for i in items)\n\n\n"
    + "def unrelated(values):\n"
    + "".join(f"    value_{i} = values.get('key_{i}', {i})  # a default for key {i}\n" for i in range(14))
    + "    return value_0\n"
)
LINES = BILL_PY.splitlines()


def test_regression_search_context_lines_around_each_hit(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"bill.py": BILL_PY})
    assert run_cli("index", ".", cwd=root).returncode == 0

    def search(*flags: str) -> subprocess.CompletedProcess[str]:
        return run_cli("search", "-k", "1", *flags, "compute_invoice_total", ".", cwd=root)

    plain = search().stdout
    assert plain.splitlines()[2:] == [
        "  19  def compute_invoice_total(items):",
        "  20      return sum(i.price for i in items)",
        "",
    ]
    out = search("-C", "2")
    assert out.returncode == 0, out.stderr
    # the passage's own lines as without -C, its neighbours marked `N-` (an empty one with nothing trailing)
    assert out.stdout.splitlines()[2:] == [
        "  17-",
        "  18-",
        "  19  def compute_invoice_total(items):",
        "  20      return sum(i.price for i in items)",
        "  21-",
        "  22-",
        "",
    ]
    wide = search("-B", "3", "-A", "3").stdout.splitlines()[2:]
    assert (wide[0], wide[-2]) == ("  16-     return row_0", "  23- def unrelated(values):")
    assert search("-A", "0").stdout == plain
    # a short preview shows the first 10 lines of a long passage: the context follows what it shows
    long = run_cli("search", "-k", "1", "-A", "1", "unrelated values", ".", cwd=root).stdout.splitlines()
    assert long[0].startswith("bill.py:23-38 ") and long[-3:-1] == [
        "  32  " + LINES[31],
        "  33- " + LINES[32],
    ]

    def hit(*flags: str) -> dict[str, object]:
        found = search("--json", *flags)
        assert found.returncode == 0, found.stderr
        record: dict[str, object] = json.loads(found.stdout.splitlines()[0])
        return record

    assert "context_before" not in hit()  # the default record is unchanged
    record = hit("-B", "30", "-A", "1")
    assert record["context_before"] == [{"line": n, "text": t} for n, t in enumerate(LINES[:18], 1)]
    assert record["context_after"] == [{"line": 21, "text": ""}] and record["context_note"] is None
    assert hit("-A", "50")["context_after"][-1] == {"line": 38, "text": "    return value_0"}  # to the end

    # the same size and mtime but other bytes: the stat cannot tell, the stored sha256 can, and the lines
    # around line 19 are no longer the passage's neighbours
    path = root / "bill.py"
    before = path.stat()
    path.write_text(BILL_PY.replace("return row_0", "return row_1"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    record = hit("-C", "2")
    assert (record["stale"], record["context_before"], record["context_after"]) == (False, [], [])
    assert "changed since indexing" in str(record["context_note"])
    text = search("-C", "2").stdout.splitlines()
    assert (
        text[2].startswith("  note: the file changed since indexing") and text[3:] == plain.splitlines()[2:]
    )
    path.write_text(BILL_PY + "# edited\n")  # and one the stat tells, unless the search re-indexed it first
    record = hit("-C", "1")
    if record["stale"]:
        assert record["context_after"] == [] and "changed since indexing" in str(record["context_note"])
    else:
        assert record["context_after"] == [{"line": 21, "text": ""}]

    for flag in ("-A", "-B", "-C"):
        bad = search(flag, "-1")
        assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.splitlines()) == 1
        assert f"{flag} -1 is negative" in bad.stderr


def test_regression_a_root_that_looks_like_no_project_is_served_and_indexed_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = make_tree(tmp_path / "home", {"notes.md": "# Notes\n\nbuy milk\n"})
    project = make_tree(tmp_path / "proj", {"pyproject.toml": "[project]\nname = 'p'\n", "app.py": "x = 1\n"})
    git(project, "init", "-q")
    plain = make_tree(tmp_path / "plain", {"notes.md": "# Plain\n\njust notes\n"})
    temp = Path(tempfile.gettempdir())
    env = {"HOME": str(home), "KENNING_INDEX_DIR": str(tmp_path / "indexes")}

    check = run_cli("mcp", "--check", cwd=temp, env=env)  # an agent started in /tmp
    assert check.returncode == 0 and f"ready to serve {temp.resolve()} " in check.stdout
    assert check.stderr == (
        f"kenning mcp: warning: {temp.resolve()} looks like no project (a temp folder): start kenning mcp in "
        "your project's folder or pass --root DIR\n"
    )
    served = run_cli("mcp", cwd=home, env=env, input="")  # the server itself warns before it serves
    assert (served.returncode, served.stdout) == (0, "")
    assert f"{home} looks like no project (your home folder)" in served.stderr
    assert len(served.stderr.splitlines()) == 1
    for folder in (project, plain):
        quiet = run_cli("mcp", "--check", "--root", str(folder), cwd=tmp_path, env=env)
        assert quiet.returncode == 0 and quiet.stderr == ""

    indexed = run_cli("index", ".", cwd=home, env=env)  # warned, not refused
    assert indexed.returncode == 0, indexed.stderr
    warning = [line for line in indexed.stderr.splitlines() if "looks like no project" in line]
    assert warning == [
        f"kenning: warning: {home} looks like no project (your home folder): indexing it anyway; to index a "
        "project, run `kenning index` in its folder or pass it"
    ]
    assert run_cli("search", "--json", "milk", ".", cwd=home, env=env).returncode == 0
    assert "looks like no project" not in run_cli("index", ".", cwd=plain, env=env).stderr

    # the one rule both use
    from kenning.agents.project import looks_like_no_project

    monkeypatch.setenv("HOME", str(home))
    assert looks_like_no_project(home) == "your home folder"
    assert looks_like_no_project(temp) == looks_like_no_project("/tmp") == "a temp folder"
    assert looks_like_no_project("/") == "the filesystem root"
    assert looks_like_no_project(project) is None and looks_like_no_project(plain) is None
    assert looks_like_no_project(temp / "some-project") is None  # only the temp folder itself

    # the guidance an install writes points the agent at the project root, not at wherever it started
    installed, _ = _installed(tmp_path, "agent", "{}\n")
    for rel in (".claude/CLAUDE.md", ".claude/skills/kenning-search/SKILL.md"):
        text = (installed / rel).read_text(encoding="utf-8")
        assert 'text_index(paths=["."])' not in text and 'kenning search "QUERY" .' not in text
        assert "git rev-parse --show-toplevel" in text and "pyproject.toml, package.json, go.mod" in text
        assert "--root PROJECT" in text
