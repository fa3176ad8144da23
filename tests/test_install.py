"""`kenning install` / `uninstall` against real files in temporary home directories.

Most tests go through the real CLI in a subprocess (HOME, XDG_STATE_HOME and XDG_CONFIG_HOME point into
tmp dirs); a few call `install.run` in-process where a terminal or a fixed server command is needed.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from conftest import run_cli
from kenning.agents import install
from kenning.errors import ConfigError

CREATED = [
    ".claude.json",
    ".claude/CLAUDE.md",
    ".claude/skills/kenning-search/SKILL.md",
    ".codex/config.toml",
    ".codex/AGENTS.md",
    ".cursor/mcp.json",
    ".cursor/skills/kenning-search/SKILL.md",
    ".config/opencode/opencode.json",
    ".config/opencode/AGENTS.md",
]

# a home that already has the user's own configuration for every agent
USER_FILES: dict[str, str] = {
    ".claude.json": '{"numStartups": 12, "mcpServers": {"github": {"command": "gh-mcp", "args": []}},'
    ' "projects": {"/src/x": {"allowedTools": []}}}',
    ".claude/settings.json": json.dumps(
        {
            "model": "opus",
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]
            },
        },
        indent=4,
    ),
    ".claude/CLAUDE.md": "# Me\n\nAlways answer in English.",
    ".codex/config.toml": '# my codex\nmodel = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    'args = ["--x"]\n\n[profiles.fast]\nmodel = "mini"\n',
    ".codex/AGENTS.md": "Use pnpm.\n",
    ".cursor/mcp.json": '{\n\t"mcpServers": {\n\t\t"db": {"url": "http://localhost:1"}\n\t}\n}\n',
    ".config/opencode/opencode.json": '{"$schema": "https://opencode.ai/config.json", "theme": "dark",'
    ' "mcp": {"jira": {"type": "remote", "url": "https://j"}}}',
    ".config/opencode/AGENTS.md": "## Rules\n\n- be brief\n",
}


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes) and directory under root."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = p.read_bytes() if p.is_file() else "dir"
    return out


def write(home: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text, encoding="utf-8")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def cli(home: Path, *args: str, stdin: str = ""):  # type: ignore[no-untyped-def]
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(home.parent / "state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CODEX_HOME": "",
        "CLAUDE_CONFIG_DIR": "",
    }
    return run_cli(*args, cwd=home.parent, env=env, input=stdin)


def load(home: Path, rel: str) -> dict:  # type: ignore[type-arg]
    text = (home / rel).read_text(encoding="utf-8")
    return tomllib.loads(text) if rel.endswith(".toml") else json.loads(text)


def test_install_into_empty_home_creates_every_agent_config(home: Path) -> None:
    r = cli(home, "install", "--yes")
    assert r.returncode == 0, r.stderr
    assert "  create ~/.codex/config.toml  (+ [mcp_servers.kenning])" in r.stdout
    assert "  create ~/.claude/skills/kenning-search/SKILL.md\n" in r.stdout
    assert r.stdout.rstrip().endswith(f"done: {len(CREATED)} files changed")
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file()) == sorted(CREATED)

    claude = load(home, ".claude.json")["mcpServers"]["kenning"]
    cursor = load(home, ".cursor/mcp.json")["mcpServers"]["kenning"]
    codex = load(home, ".codex/config.toml")["mcp_servers"]["kenning"]
    for entry in (claude, cursor, codex):
        assert Path(entry["command"]).is_absolute() and entry["args"][-1] == "mcp"
    assert claude["type"] == "stdio"
    opencode = load(home, ".config/opencode/opencode.json")["mcp"]["kenning"]
    assert opencode["type"] == "local" and opencode["enabled"] is True and opencode["command"][-1] == "mcp"
    assert not (home / ".claude/settings.json").exists()  # the gate only with --gate

    skill = (home / ".claude/skills/kenning-search/SKILL.md").read_text()
    assert skill.startswith("---\nname: kenning-search\ndescription: ")
    for rel in (".claude/CLAUDE.md", ".codex/AGENTS.md", ".config/opencode/AGENTS.md"):
        text = (home / rel).read_text()
        assert text.startswith("<!-- kenning:begin") and text.rstrip().endswith("<!-- kenning:end -->")
        assert "text_search" in text


def test_install_keeps_user_content_and_uninstall_restores_it_byte_for_byte(home: Path) -> None:
    write(home, USER_FILES)
    before = tree(home)
    assert cli(home, "install", "--gate", "-y").returncode == 0

    claude = load(home, ".claude.json")
    assert claude["numStartups"] == 12 and claude["projects"] == {"/src/x": {"allowedTools": []}}
    assert set(claude["mcpServers"]) == {"github", "kenning"}
    settings = load(home, ".claude/settings.json")
    assert settings["model"] == "opus" and len(settings["hooks"]["PreToolUse"]) == 2
    codex_text = (home / ".codex/config.toml").read_text()
    assert codex_text.startswith(USER_FILES[".codex/config.toml"])  # appended, never rewritten
    codex = tomllib.loads(codex_text)
    assert codex["model"] == "o4" and codex["profiles"] == {"fast": {"model": "mini"}}
    assert set(codex["mcp_servers"]) == {"docs", "kenning"}
    assert (
        (home / ".claude/CLAUDE.md")
        .read_text()
        .startswith("# Me\n\nAlways answer in English.\n\n<!-- kenning")
    )
    assert (home / ".codex/AGENTS.md").read_text().startswith("Use pnpm.\n\n<!-- kenning:begin")
    assert set(load(home, ".cursor/mcp.json")["mcpServers"]) == {"db", "kenning"}
    opencode = load(home, ".config/opencode/opencode.json")
    assert opencode["theme"] == "dark" and set(opencode["mcp"]) == {"jira", "kenning"}

    r = cli(home, "uninstall", "--yes")
    assert r.returncode == 0, r.stderr
    assert "  restore ~/.claude.json  (- mcpServers.kenning)" in r.stdout
    assert tree(home) == before


def test_second_install_changes_nothing(home: Path) -> None:
    write(home, {".codex/AGENTS.md": "Use pnpm.\n"})
    assert cli(home, "install", "--gate", "--yes").returncode == 0
    after_first = tree(home)
    r = cli(home, "install", "--gate", "--yes")
    assert r.returncode == 0
    assert (
        r.stdout.strip()
        == "nothing to change: kenning is already installed for claude, codex, cursor, opencode"
    )
    assert tree(home) == after_first


def test_uninstall_deletes_what_install_created(home: Path) -> None:
    assert cli(home, "install", "--gate", "--yes").returncode == 0
    r = cli(home, "uninstall", "--yes")
    assert r.returncode == 0, r.stderr
    assert tree(home) == {}  # files, skill directories, ~/.codex, ~/.cursor, ~/.config: all gone
    assert not (home.parent / "state" / "kenning").exists()
    again = cli(home, "uninstall", "--yes")
    assert again.stdout.strip().startswith("nothing to change: kenning is not installed for claude")


def test_dry_run_shows_the_plan_and_changes_nothing(home: Path) -> None:
    write(home, USER_FILES)
    before = tree(home)
    r = cli(home, "install", "--gate", "--dry-run")
    assert r.returncode == 0
    assert "  update ~/.claude.json  (+ mcpServers.kenning)" in r.stdout
    assert "dry run: nothing changed" in r.stdout
    assert tree(home) == before
    assert not (home.parent / "state").exists()


def test_without_yes_and_no_terminal_it_refuses(home: Path) -> None:
    write(home, USER_FILES)
    before = tree(home)
    r = cli(home, "install", stdin="y\n")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--yes" in r.stderr
    assert tree(home) == before


def test_gate_hook_is_added_and_uninstall_removes_only_it(home: Path) -> None:
    write(home, {".claude/settings.json": USER_FILES[".claude/settings.json"]})
    assert cli(home, "install", "--target", "claude", "--gate", "--yes").returncode == 0
    groups = load(home, ".claude/settings.json")["hooks"]["PreToolUse"]
    assert groups[0]["hooks"][0]["command"] == "audit.sh"
    gate = groups[1]
    assert gate["matcher"] == "Grep|Bash|mcp__kenning__text_search"
    assert gate["hooks"][0]["type"] == "command" and gate["hooks"][0]["command"].endswith(" gate")

    # the user changes the file afterwards: uninstall can no longer restore bytes, it removes just the gate
    settings = load(home, ".claude/settings.json")
    settings["theme"] = "light"
    (home / ".claude/settings.json").write_text(json.dumps(settings))
    assert cli(home, "uninstall", "--target", "claude", "--yes").returncode == 0
    assert load(home, ".claude/settings.json") == {
        "model": "opus",
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}]},
        "theme": "light",
    }


def test_gate_without_claude_target_says_it_is_claude_only(home: Path) -> None:
    r = cli(home, "install", "--target", "codex", "--gate", "--yes")
    assert r.returncode == 0
    assert "Claude Code only" in r.stdout
    assert not (home / ".claude").exists()


def test_invalid_json_is_refused_and_nothing_is_written(home: Path) -> None:
    write(home, {".claude.json": '{"mcpServers": {,}', ".codex/AGENTS.md": "mine\n"})
    before = tree(home)
    r = cli(home, "install", "--yes", "--target", "claude")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "~/.claude.json is not valid JSON" in r.stderr and "--target" in r.stderr
    assert tree(home) == before


def test_regression_one_bad_config_stopped_every_agent(home: Path) -> None:
    """Issue 33: a config kenning cannot edit stopped `install` for every agent; now that agent is left out with a
    note and the others are installed (and uninstalled) as usual."""
    write(home, {".claude.json": '{"mcpServers": {,}', ".codex/AGENTS.md": "mine\n"})
    before = tree(home)
    r = cli(home, "install", "--yes")
    assert r.returncode == 0, r.stderr
    assert "note: claude left out: ~/.claude.json is not valid JSON (line 1" in r.stdout
    assert "kenning install for codex, cursor, opencode:" in r.stdout
    assert (home / ".claude.json").read_bytes() == before[".claude.json"]
    assert not (home / ".claude").exists()
    assert "kenning" in load(home, ".cursor/mcp.json")["mcpServers"]
    assert "kenning" in load(home, ".config/opencode/opencode.json")["mcp"]
    assert (home / ".codex/AGENTS.md").read_text().startswith("mine\n\n<!-- kenning:begin")
    r = cli(home, "uninstall", "--yes")
    assert r.returncode == 0 and "note: claude left out" in r.stdout
    assert tree(home) == before


JSONC = """{
  // the user's own notes
  "$schema": "https://opencode.ai/config.json",
  "theme": "dark", /* a block comment */
  "mcp": {
    "jira": {"type": "remote", "url": "https://j",}, // trailing commas, too
  },
}
"""


@pytest.mark.parametrize("name", ["opencode.jsonc", "opencode.json"])
def test_regression_opencode_jsonc_was_refused(home: Path, name: str) -> None:
    """Issue 33: opencode reads JSONC (comments, trailing commas) and kenning refused such a config ("cannot keep
    its comments"). Now its entry is spliced in with every comment kept, and uninstall restores the bytes."""
    from kenning.agents import jsonedit

    write(home, {f".config/opencode/{name}": JSONC})
    before = tree(home)
    r = cli(home, "install", "--yes", "--target", "opencode")
    assert r.returncode == 0, r.stderr
    assert f"update ~/.config/opencode/{name}  (+ mcp.kenning)" in r.stdout
    text = (home / ".config/opencode" / name).read_text()
    for line in JSONC.splitlines():
        assert line in text.splitlines(), line  # every line of the user's kept as it was
    config = jsonedit.loads(text)
    assert set(config["mcp"]) == {"jira", "kenning"} and config["theme"] == "dark"
    assert config["mcp"]["kenning"]["command"][-1] == "mcp"
    assert cli(home, "uninstall", "--yes", "--target", "opencode").returncode == 0
    assert tree(home) == before


def test_a_jsonc_config_edited_after_install_keeps_its_comments_on_uninstall(home: Path) -> None:
    from kenning.agents import jsonedit

    write(home, {".config/opencode/opencode.jsonc": JSONC})
    assert cli(home, "install", "--yes", "--target", "opencode").returncode == 0
    path = home / ".config/opencode/opencode.jsonc"
    edited = path.read_text().replace('"theme": "dark",', '"theme": "light", // changed since')
    path.write_text(edited)
    r = cli(home, "uninstall", "--yes", "--target", "opencode")
    assert r.returncode == 0 and "update ~/.config/opencode/opencode.jsonc" in r.stdout
    assert path.read_text() == JSONC.replace('"theme": "dark",', '"theme": "light", // changed since')
    assert "kenning" not in jsonedit.loads(path.read_text())["mcp"]


def test_jsonc_comment_markers_inside_strings_are_text() -> None:
    from kenning.agents import jsonedit

    text = '{"url": "http://x/*y*/", "b": [1, 2,], /* c */ "c": "a,}",}'
    assert jsonedit.plain(text).replace(" ", "") == '{"url":"http://x/*y*/","b":[1,2],"c":"a,}"}'
    assert len(jsonedit.plain(text)) == len(text)
    assert jsonedit.loads(text) == {"url": "http://x/*y*/", "b": [1, 2], "c": "a,}"}


def test_target_codex_touches_only_codex_files(home: Path) -> None:
    write(home, USER_FILES)
    before = tree(home)
    r = cli(home, "install", "--target", "codex", "--yes")
    assert r.returncode == 0
    changed = {k for k in tree(home) if tree(home).get(k) != before.get(k)}
    assert changed == {".codex/config.toml", ".codex/AGENTS.md"}
    assert cli(home, "uninstall", "--target", "codex", "--yes").returncode == 0
    assert tree(home) == before


def test_uninstall_after_user_edits_removes_only_the_block(home: Path) -> None:
    write(home, {".codex/AGENTS.md": "Use pnpm.\n"})
    assert cli(home, "install", "--target", "codex", "--yes").returncode == 0
    agents = home / ".codex/AGENTS.md"
    agents.write_text(agents.read_text() + "\nRun the tests before committing.\n")
    assert cli(home, "uninstall", "--target", "codex", "--yes").returncode == 0
    assert agents.read_text() == "Use pnpm.\n\nRun the tests before committing.\n"
    assert not (home / ".codex/config.toml").exists()  # kenning created it; nothing else was in it


# ---- in-process ----


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(home: Path, *targets: str, **kw: object) -> tuple[int, str]:
    out = io.StringIO()
    kw.setdefault("yes", True)
    kw.setdefault("command", ["/opt/kenning/bin/kenning"])
    env = {"XDG_STATE_HOME": str(home.parent / "state")}
    code = install.run(list(targets) or ["all"], home=home, env=env, stdout=out, **kw)  # type: ignore[arg-type]
    return code, out.getvalue()


def test_prompt_on_a_terminal(home: Path) -> None:
    code, out = run(home, "cursor", yes=False, stdin=Terminal("n\n"))
    assert code == 1 and "Apply these changes? [y/N]" in out and tree(home) == {}
    code, out = run(home, "cursor", yes=False, stdin=Terminal("y\n"))
    assert code == 0 and out.rstrip().endswith("done: 2 files changed")
    assert load(home, ".cursor/mcp.json") == {
        "mcpServers": {"kenning": {"command": "/opt/kenning/bin/kenning", "args": ["mcp"]}}
    }


def test_explicit_home_ignores_the_process_environment(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_HOME", str(home.parent / "elsewhere"))
    assert run(home, "codex")[0] == 0
    assert (home / ".codex/config.toml").exists() and not (home.parent / "elsewhere").exists()


def test_a_codex_table_kenning_did_not_write_is_a_conflict(home: Path) -> None:
    write(home, {".codex/config.toml": '[mcp_servers.kenning]\ncommand = "old"\n'})
    with pytest.raises(ConfigError, match=r"~/.codex/config.toml .*not be valid TOML"):
        run(home, "codex")
    assert (home / ".codex/config.toml").read_text() == '[mcp_servers.kenning]\ncommand = "old"\n'


def test_invalid_toml_is_refused(home: Path) -> None:
    write(home, {".codex/config.toml": "model = \n"})
    with pytest.raises(ConfigError, match=r"~/\.codex/config\.toml is not valid TOML"):
        run(home, "codex")
    assert not (home / ".codex/AGENTS.md").exists()


def test_a_skill_kenning_did_not_write_is_left_alone(home: Path) -> None:
    write(home, {".cursor/skills/kenning-search/SKILL.md": "---\nname: kenning-search\n---\nmine\n"})
    with pytest.raises(ConfigError, match="not written by kenning"):
        run(home, "cursor")
    assert not (home / ".cursor/mcp.json").exists()


def test_opencode_2_layout_gets_the_server_under_mcp_servers(home: Path) -> None:
    write(
        home,
        {
            ".config/opencode/opencode.json": '{"mcp": {"servers": {"a": {"type": "local", "command": ["a"]}}}}'
        },
    )
    assert run(home, "opencode")[0] == 0
    servers = load(home, ".config/opencode/opencode.json")["mcp"]["servers"]
    assert servers["kenning"] == {"type": "local", "command": ["/opt/kenning/bin/kenning", "mcp"]}


def test_file_mode_is_kept_and_a_changed_command_is_an_update(home: Path) -> None:
    write(home, {".cursor/mcp.json": "{}"})
    os.chmod(home / ".cursor/mcp.json", 0o600)
    assert run(home, "cursor")[0] == 0
    assert stat.S_IMODE((home / ".cursor/mcp.json").stat().st_mode) == 0o600
    code, out = run(home, "cursor", command=["/new/kenning"])
    assert code == 0 and "  update ~/.cursor/mcp.json  (+ mcpServers.kenning)" in out
    assert load(home, ".cursor/mcp.json")["mcpServers"]["kenning"]["command"] == "/new/kenning"


def test_symlinked_config_stays_a_symlink(home: Path) -> None:
    dotfiles = home.parent / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "AGENTS.md").write_text("shared\n")
    (home / ".codex").mkdir()
    (home / ".codex/AGENTS.md").symlink_to(dotfiles / "AGENTS.md")
    assert run(home, "codex")[0] == 0
    assert (home / ".codex/AGENTS.md").is_symlink()
    assert "kenning:begin" in (dotfiles / "AGENTS.md").read_text()
    assert run(home, "codex", uninstall=True)[0] == 0
    assert (dotfiles / "AGENTS.md").read_text() == "shared\n"


def test_opencode_guidance_is_a_skill_when_an_agents_md_would_hide_claude_md(home: Path) -> None:
    write(home, {".claude/CLAUDE.md": "mine\n"})
    code, out = run(home, "opencode")
    assert code == 0 and "as a skill" in out
    assert (home / ".config/opencode/skills/kenning-search/SKILL.md").exists()
    assert not (home / ".config/opencode/AGENTS.md").exists()
    assert run(home, "opencode")[1].startswith("nothing to change")
    assert run(home, "opencode", uninstall=True)[0] == 0
    assert tree(home) == {".claude": "dir", ".claude/CLAUDE.md": b"mine\n"}


def test_install_without_gate_leaves_an_installed_gate_alone(home: Path) -> None:
    assert run(home, "claude", gate=True)[0] == 0
    settings = (home / ".claude/settings.json").read_bytes()
    assert run(home, "claude")[1].startswith("nothing to change")
    assert (home / ".claude/settings.json").read_bytes() == settings
    assert run(home, "claude", uninstall=True)[0] == 0
    assert tree(home) == {}


def test_agent_home_variables_are_honoured(home: Path) -> None:
    env = {
        "CODEX_HOME": str(home / "codex-home"),
        "CLAUDE_CONFIG_DIR": str(home / "claude-cfg"),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "XDG_STATE_HOME": str(home.parent / "state"),
    }
    out = io.StringIO()
    assert install.run(["all"], yes=True, home=home, env=env, stdout=out, command=["/k"]) == 0
    for rel in (
        "codex-home/config.toml",
        "claude-cfg/.claude.json",
        "claude-cfg/skills/kenning-search/SKILL.md",
        "xdg/opencode/opencode.json",
    ):
        assert (home / rel).is_file(), rel
    assert not (home / ".claude.json").exists() and not (home / ".codex").exists()


def test_a_failed_write_is_a_config_error_naming_the_file(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(path: Path, data: bytes, mode: int | None = None) -> list[str]:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(install, "_write", refuse)
    with pytest.raises(ConfigError, match=r"could not write ~/\.codex/config\.toml \(Permission denied\)"):
        run(home, "codex")


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({".codex/AGENTS.md": "mine\n<!-- kenning:begin (managed) -->\nhalf a block\n"}, ("--target", "codex"),
         "kenning:begin without kenning:end"),
        ({".claude/settings.json": '{"hooks": {"PreToolUse": {"matcher": "x"}}}'}, ("--target", "claude", "--gate"),
         "hooks.PreToolUse is not a list"),
    ],
)  # fmt: skip
def test_broken_user_files_are_refused_and_nothing_is_written(
    home: Path, files: dict[str, str], args: tuple[str, ...], message: str
) -> None:
    write(home, files)
    before = tree(home)
    r = cli(home, "install", "--yes", *args)
    assert r.returncode == 2 and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert tree(home) == before


def test_a_config_file_that_is_not_utf8_is_refused(home: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "AGENTS.md").write_bytes(b"caf\xe9\n")
    before = tree(home)
    r = cli(home, "install", "--yes", "--target", "codex")
    assert r.returncode == 2 and "is not UTF-8 text" in r.stderr
    assert tree(home) == before


def test_regression_the_gates_state_stayed_after_uninstall(home: Path) -> None:
    assert cli(home, "install", "--target", "claude", "--gate", "--yes").returncode == 0
    ws = home.parent / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("# Notes\n\nuploads are retried with backoff\n")
    assert run_cli("index", str(ws), cwd=home.parent).returncode == 0
    # the hook, as Claude Code runs it, records the search's grant
    hook = {"session_id": "s1", "cwd": str(ws), "hook_event_name": "PreToolUse", "tool_name": "Bash"}
    hook["tool_input"] = {"command": 'kenning search "upload retries"'}  # type: ignore[assignment]
    assert cli(home, "gate", stdin=json.dumps(hook)).returncode == 0
    grants = home.parent / "state" / "kenning" / "gate"
    assert list(grants.glob("*.json"))
    shown = cli(home, "uninstall", "--target", "claude", "--dry-run")
    assert "delete " + str(grants) + "/ (the search-first gate's grants)" in shown.stdout and grants.is_dir()
    r = cli(home, "uninstall", "--target", "claude", "--yes")
    assert r.returncode == 0, r.stderr
    assert not grants.exists() and not (home.parent / "state" / "kenning").exists()
    # with nothing else left, a second uninstall has nothing to do
    again = cli(home, "uninstall", "--target", "claude", "--yes")
    assert again.stdout.startswith("nothing to change")
