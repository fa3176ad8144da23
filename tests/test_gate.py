"""The search-first gate: its shell tokenizer, and the hook fed Claude Code PreToolUse payloads through the real CLI."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from kenning.agents import gate
from kenning.engine import find_index_root

SESSION = "4b1e0c2a-7d3f-4e8a-9c61-2f0d5a8b9e17"


# --- the tokenizer -----------------------------------------------------------------------------------------

COMMANDS = [
    ("a|grep x", [["a"], ["grep", "x"]]),
    ("foo && rg y || bar; baz & qux", [["foo"], ["rg", "y"], ["bar"], ["baz"], ["qux"]]),
    ("echo $(rg x)", [["rg", "x"], ["echo", "$(…)"]]),
    ("echo `grep x`", [["grep", "x"], ["echo", "$(…)"]]),
    ('echo "grep x"', [["echo", "grep x"]]),
    ("echo 'a b'\"c\"\\ d", [["echo", "a bc d"]]),
    ("# grep x", []),
    ("echo hi # rg", [["echo", "hi"]]),
    ("echo a#b", [["echo", "a#b"]]),
    ("ls\nrg x", [["ls"], ["rg", "x"]]),
    ("(cd src && rg x)", [["cd", "src"], ["rg", "x"]]),
    ("{ rg x; }", [["rg", "x"]]),
    ("if grep -q x f; then echo y; fi", [["grep", "-q", "x", "f"], ["echo", "y"]]),
    ("grep -rn x src 2>/dev/null >out.txt", [["grep", "-rn", "x", "src"]]),
    ("rg x &> log; ls >&2", [["rg", "x"], ["ls"]]),
    ("cat <<'EOF'\ngrep x\nEOF\nls", [["cat"], ["ls"]]),
    ("diff <(rg a) b", [["rg", "a"], ["diff", "$(…)", "b"]]),
    ('echo "$(grep -c x f)"', [["grep", "-c", "x", "f"], ["echo", "$(…)"]]),
    ("x=$((1 + 2)) rg y", [["x=$(…)", "rg", "y"]]),
    ("rg x \\\n  src", [["rg", "x", "src"]]),
    ('echo "a\\"b" "x\\y" c\\ d', [["echo", 'a"b', "x\\y", "c d"]]),
    # how Claude Code writes commit messages: the heredoc body is text, not commands
    (
        "git commit -m \"$(cat <<'EOF'\nUse rg, not grep\n\nrg x\nEOF\n)\" && git push",
        [["cat"], ["git", "commit", "-m", "$(…)"], ["git", "push"]],
    ),
    ("cat <<-END | wc -l\n\tgrep x\n\tEND\nrg y", [["cat"], ["wc", "-l"], ["rg", "y"]]),
]


@pytest.mark.parametrize(("text", "expected"), COMMANDS)
def test_commands_splits_shell_text_into_simple_commands(text: str, expected: list[list[str]]) -> None:
    assert gate.commands(text) == expected


def greps(command: str, cwd: Path = Path("/w")) -> list[list[str]]:
    searched, found = gate.classify("Bash", {"command": command}, cwd)
    assert not searched
    return found


RUNS_GREP = [
    "grep x",
    "a|grep x src",
    "foo && rg y",
    "echo $(rg x)",
    "echo `grep x`",
    "sudo -u bob grep x",
    "sudo --user=bob -E grep x",
    "env A=1 rg x",
    "env -i -u HOME rg x",
    "xargs -0 grep x",
    "find . -name '*.py' | xargs -n 1 -I{} rg x {}",
    "timeout 5 rg x",
    "timeout -s KILL --kill-after=2 5 rg x",
    "nice -n 5 grep x",
    "nice -10 grep x",
    "time grep x",
    "nohup rg x",
    "command rg x",
    "exec grep x",
    "FOO=1 grep x",
    "FOO='a b' BAR=2 egrep x",
    "/usr/bin/grep x",
    "fgrep -r x .",
    "sudo env A=1 timeout 5 nice -n 3 rg x",
    "cd src; rg -n 'def main'",
    # regression: grep -r with no path searches "." even when something is piped into it
    "echo nothing | grep -r retry",
    "ls | grep -Rn retry",
    "true | grep --recursive retry",
]

NOT_GREP = [
    'echo "grep x"',
    'git commit -m "use rg"',
    "cat rg.txt",
    "grep --help",
    "grep -V",
    "rg --version",
    "rg -V",
    "rg -h",
    "rg --files",
    "# grep x",
    "echo hi # rg",
    "git grep --help",
    "git log -S grep",
    "bash -c 'echo grep x'",
    "bash script.sh",
    'echo x | bash -c "grep y"',  # a filter over bash's own stdin
    "find . -exec grep x {} +",
    "command -v grep",
    "which rg",
    "ls grep",
    "git log --oneline | grep fix",  # a filter over another command's output
    "ps aux | rg python",
    "ps aux | grep -v grep",
    "ps aux | grep -e retry",
    "cat <<EOF\ngrep x\nEOF",
]


# regression (issue 32): these passed the gate as if they ran no grep
RUNS_GREP += [
    "git grep x",
    "git --no-pager grep -n retry_count",
    "git -C src grep x",
    'bash -c "rg x"',
    "sh -c 'cd src && grep -rn x .'",
    'bash -lc "rg -n x src"',
    'bash -o pipefail -c "rg x | head"',
    "zsh -c 'sh -c \"rg x\"'",
    'eval "rg x src"',
]


@pytest.mark.parametrize("command", RUNS_GREP)
def test_grep_at_a_command_position_counts(command: str) -> None:
    assert greps(command)


@pytest.mark.parametrize("command", NOT_GREP)
def test_grep_elsewhere_does_not_count(command: str) -> None:
    assert greps(command) == []


@pytest.mark.parametrize(
    ("command", "paths"),
    [
        ("grep -rn x", ["."]),
        ("rg x src tests", ["src", "tests"]),
        ("rg -e x -e y src", ["src"]),
        ("grep -A3 --regexp=x lib", ["lib"]),
        ("grep -f patterns.txt a b", ["a", "b"]),
        ("rg -g '*.py' -t py --max-depth 2 x /etc", ["/etc"]),
        ("grep -inC2 x -- -odd-name", ["-odd-name"]),
        ("rg -- -x dir", ["dir"]),
        ("find . | xargs grep x", ["."]),
        ("git grep -e x -- src docs", ["src", "docs"]),
        ("git -C lib grep x", ["lib/."]),
        ('bash -c "rg x tests"', ["tests"]),
    ],
)
def test_grep_path_operands(command: str, paths: list[str]) -> None:
    assert greps(command) == [paths]


@pytest.mark.parametrize(
    "command",
    ['kenning search "how are uploads retried"', "ken search -k 5 backoff .", "cd x && kenning search q"],
)
def test_kenning_search_in_the_shell_counts_as_a_search(command: str) -> None:
    assert gate.classify("Bash", {"command": command}, Path("/w"))[0]


@pytest.mark.parametrize(
    "command", ['echo "kenning search x"', "kenning index .", "kenning grep x .", "pip install kenning"]
)
def test_other_kenning_commands_are_not_searches(command: str) -> None:
    assert not gate.classify("Bash", {"command": command}, Path("/w"))[0]


def test_mcp_text_search_tool_names() -> None:
    assert gate.classify("mcp__kenning__text_search", {"query": "q"}, Path("/w"))[0]
    assert gate.classify("mcp__plugin_kenning_kenning__text_search", {}, Path("/w"))[0]
    assert not gate.classify("mcp__other__text_search", {}, Path("/w"))[0]
    assert not gate.classify("mcp__kenning__status", {}, Path("/w"))[0]


# --- the hook ------------------------------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path, engine_factory: Any) -> Path:
    """An indexed workspace (hash embedder) with an unindexed sibling folder next to it."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "upload.py").write_text("def upload(retry_count=3):\n    pass\n")
    (tmp_path / "elsewhere").mkdir()
    engine_factory(root).index()
    assert find_index_root(root / "src") == root.resolve()
    return root


def payload(cwd: Path, tool_name: str, tool_input: dict[str, Any], session: str = SESSION) -> dict[str, Any]:
    """What Claude Code sends a PreToolUse command hook on stdin."""
    return {
        "session_id": session,
        "transcript_path": f"/home/dev/.claude/projects/-ws/{session}.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01HkG7qVQ3nY5bT2wZ8xR4mP",
    }


def grep_tool(cwd: Path, path: Path | None = None, session: str = SESSION) -> dict[str, Any]:
    tool_input: dict[str, Any] = {"pattern": "retry_count", "output_mode": "content", "-n": True}
    if path is not None:
        tool_input["path"] = str(path)
    return payload(cwd, "Grep", tool_input, session)


def bash(cwd: Path, command: str, session: str = SESSION) -> dict[str, Any]:
    return payload(cwd, "Bash", {"command": command, "description": "Search the code"}, session)


def text_search(cwd: Path, session: str = SESSION) -> dict[str, Any]:
    return payload(
        cwd, "mcp__kenning__text_search", {"query": "where are uploads retried", "limit": 5}, session
    )


def hook_cli(tmp_path: Path, data: dict[str, Any] | str, *flags: str) -> tuple[int, str, str]:
    """`kenning gate` as Claude Code runs it, with a private HOME and state directory."""
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state")}
    text = data if isinstance(data, str) else json.dumps(data)
    out = run_cli("gate", *flags, cwd=tmp_path, env=env, input=text)
    assert "Traceback" not in out.stderr
    return out.returncode, out.stdout, out.stderr


def hook(state: Path, data: dict[str, Any], now: float, budget: int = 3, window: float = 10) -> bool:
    """The hook in-process (for time travel): True when the call is allowed."""
    stdout = io.StringIO()
    code = gate.main(
        io.StringIO(json.dumps(data)), stdout, budget=budget, window_minutes=window, now=now, state_dir=state
    )
    assert code == 0
    return stdout.getvalue() == ""


def is_denial(stdout: str) -> str:
    """The reason of a well-formed PreToolUse denial."""
    out = json.loads(stdout)
    assert list(out) == ["hookSpecificOutput"]
    specific = out["hookSpecificOutput"]
    assert set(specific) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}
    assert specific["hookEventName"] == "PreToolUse" and specific["permissionDecision"] == "deny"
    return str(specific["permissionDecisionReason"])


def test_not_indexed_allows_everything_and_keeps_no_state(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for data in (grep_tool(plain), bash(plain, "rg -n retry_count"), text_search(plain)):
        assert hook_cli(tmp_path, data) == (0, "", "")
    assert not (tmp_path / "state").exists()


def test_grep_in_an_indexed_workspace_is_denied_with_the_way_out(tmp_path: Path, ws: Path) -> None:
    code, stdout, _ = hook_cli(tmp_path, grep_tool(ws, ws / "src"))
    assert code == 0
    reason = is_denial(stdout)
    assert "kenning index" in reason and "`text_search`" in reason and 'kenning search "' in reason
    assert "3 grep calls are allowed for 10 minutes" in reason
    code, stdout, _ = hook_cli(tmp_path, bash(ws / "src", "grep -rn retry_count . | head"), "--budget", "5")
    assert "5 grep calls are allowed for 10 minutes" in is_denial(stdout)


def test_a_search_grants_budget_greps_then_denies(tmp_path: Path, ws: Path) -> None:
    assert hook_cli(tmp_path, text_search(ws)) == (0, "", "")
    calls = [grep_tool(ws), bash(ws, "rg retry_count src"), grep_tool(ws / "src")]
    for data in calls:
        assert hook_cli(tmp_path, data, "--budget", "3") == (0, "", "")
    _, stdout, _ = hook_cli(tmp_path, grep_tool(ws))
    assert "used up" in is_denial(stdout)


def test_a_shell_kenning_search_grants_too(tmp_path: Path, ws: Path) -> None:
    assert hook_cli(tmp_path, bash(ws, 'kenning search "where are uploads retried" .')) == (0, "", "")
    assert hook_cli(tmp_path, grep_tool(ws), "--budget", "1") == (0, "", "")
    assert is_denial(hook_cli(tmp_path, grep_tool(ws), "--budget", "1")[1])
    # a search and a grep in one command: the search runs first and the grep spends from it
    assert (
        hook_cli(tmp_path, bash(ws, 'ken search "upload retries" && rg -n retry_count src'), "--budget", "1")[
            1
        ]
        == ""
    )
    assert is_denial(hook_cli(tmp_path, grep_tool(ws), "--budget", "1")[1])


def test_sessions_do_not_share_grants(tmp_path: Path, ws: Path) -> None:
    assert hook_cli(tmp_path, text_search(ws, session="session-a"))[1] == ""
    assert hook_cli(tmp_path, grep_tool(ws, session="session-a"))[1] == ""
    assert is_denial(hook_cli(tmp_path, grep_tool(ws, session="session-b"))[1])


def test_a_corrupt_state_file_reads_as_no_grant(tmp_path: Path, ws: Path) -> None:
    assert hook_cli(tmp_path, text_search(ws))[1] == ""
    [ledger] = (tmp_path / "state" / "kenning" / "gate").glob("*.json")
    ledger.write_text('{"version": 1, "roots": {"/x": {"at": "soon"')
    code, stdout, stderr = hook_cli(tmp_path, grep_tool(ws))
    assert code == 0 and is_denial(stdout) and stderr == ""
    assert hook_cli(tmp_path, text_search(ws))[1] == ""
    assert hook_cli(tmp_path, grep_tool(ws))[1] == ""
    assert json.loads(ledger.read_text())["roots"][str(ws.resolve())]["used"] == 1


def test_grep_outside_the_index_root_passes(tmp_path: Path, ws: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    assert hook_cli(tmp_path, grep_tool(ws, elsewhere))[1] == ""
    assert hook_cli(tmp_path, bash(ws, f"rg -n retry_count {elsewhere} /etc/hosts"))[1] == ""
    assert hook_cli(tmp_path, bash(ws / "src", "grep -rn x ../../elsewhere"))[1] == ""
    # one operand inside is enough, and so is a parent folder that holds the index
    assert is_denial(hook_cli(tmp_path, bash(ws, f"rg x {elsewhere} src"))[1])
    assert is_denial(hook_cli(tmp_path, bash(ws / "src", "rg x .."))[1])
    assert is_denial(hook_cli(tmp_path, bash(ws, "rg x $HOME/ws"))[1])


def test_garbage_stdin_and_missing_fields_allow(tmp_path: Path, ws: Path) -> None:
    for data in ("", "not json {", "[1, 2]", json.dumps({"tool_name": "Grep", "cwd": str(ws)})):
        code, stdout, stderr = hook_cli(tmp_path, data)
        assert code == 0 and stdout == ""
        assert len(stderr.strip().splitlines()) == 1 and "allowing" in stderr
    # the note names what is missing
    assert "has no session_id" in hook_cli(tmp_path, json.dumps({"tool_name": "Grep", "cwd": str(ws)}))[2]


def test_other_hook_events_and_tools_pass(tmp_path: Path, ws: Path) -> None:
    post = dict(grep_tool(ws), hook_event_name="PostToolUse")
    assert hook_cli(tmp_path, post) == (0, "", "")
    assert hook_cli(tmp_path, payload(ws, "Read", {"file_path": str(ws / "src" / "upload.py")})) == (
        0,
        "",
        "",
    )
    assert hook_cli(tmp_path, bash(ws, "git log -n 3; pytest -q")) == (0, "", "")


@pytest.mark.parametrize(
    ("flags", "word"),
    [
        (("--budget", "0"), "--budget must be between"),
        (("--budget", "21"), "--budget must be between"),
        (("--window", "0.5"), "--window must be between"),
        (("--budget", "x"), "argument --budget"),
    ],
)
def test_misconfigured_gate_is_a_one_line_error_that_does_not_block(
    tmp_path: Path, flags: tuple[str, ...], word: str
) -> None:
    """Regression: exit 2 from a PreToolUse hook blocks the call, so a bad flag blocked every Bash call."""
    code, stdout, stderr = hook_cli(tmp_path, "{}", *flags)
    assert code == 1 and stdout == ""
    assert len(stderr.strip().splitlines()) == 1 and word in stderr


def test_the_grant_expires_with_its_window(tmp_path: Path, ws: Path) -> None:
    state, t0 = tmp_path / "state", 1_000_000.0
    assert hook(state, text_search(ws), t0)
    assert hook(state, grep_tool(ws), t0 + 60)
    assert hook(state, grep_tool(ws), t0 + 10 * 60 - 1)
    assert not hook(state, grep_tool(ws), t0 + 10 * 60)
    assert hook(state, text_search(ws), t0 + 11 * 60, window=2)
    assert hook(state, grep_tool(ws), t0 + 12 * 60, window=2)
    assert not hook(state, grep_tool(ws), t0 + 13 * 60, window=2)


def test_a_new_search_resets_the_grant_without_adding_up(tmp_path: Path, ws: Path) -> None:
    state, t0 = tmp_path / "state", 1_000_000.0
    for k in range(3):
        assert hook(state, text_search(ws), t0 + k)
    assert [hook(state, grep_tool(ws), t0 + 10 + k, budget=2) for k in range(3)] == [True, True, False]
    assert hook(state, text_search(ws), t0 + 20)
    assert [hook(state, grep_tool(ws), t0 + 30 + k, budget=2) for k in range(3)] == [True, True, False]


def test_outside_greps_do_not_spend_the_budget(tmp_path: Path, ws: Path) -> None:
    state, t0 = tmp_path / "state", 1_000_000.0
    assert hook(state, text_search(ws), t0)
    for _ in range(3):
        assert hook(state, grep_tool(ws, tmp_path / "elsewhere"), t0, budget=1)
    assert hook(state, grep_tool(ws), t0, budget=1)
    assert not hook(state, grep_tool(ws), t0, budget=1)


def test_an_unusable_state_directory_fails_open(tmp_path: Path, ws: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("sys.stderr", stderr)
        code = gate.main(
            io.StringIO(json.dumps(grep_tool(ws))), stdout, budget=3, window_minutes=10, state_dir=not_a_dir
        )
    assert code == 0 and stdout.getvalue() == "" and "allowing" in stderr.getvalue()


def test_old_ledgers_are_pruned_and_tables_stay_bounded(tmp_path: Path, ws: Path) -> None:
    state, now = tmp_path / "state", time.time()
    assert hook(state, text_search(ws, session="old"), now)
    [old] = state.glob("*.json")
    os.utime(old, (now - 2 * 86400, now - 2 * 86400))
    assert hook(state, text_search(ws), now)
    [ledger] = state.glob("*.json")
    assert not old.exists() and ledger != old
    crowded = {f"/root/{k}": {"at": now - k, "used": 0} for k in range(100)}
    ledger.write_text(json.dumps({"version": 1, "roots": crowded}))
    assert hook(state, text_search(ws), now)
    roots = json.loads(ledger.read_text())["roots"]
    assert len(roots) == gate.MAX_ROOTS and str(ws.resolve()) in roots and "/root/0" in roots


def test_regression_gate_given_deeply_nested_json_gave_a_traceback(tmp_path: Path) -> None:
    # found by tests/test_fuzz.py: json.loads raised RecursionError, which the hook did not expect
    code, _, err = hook_cli(tmp_path, "[" * 100_000)
    assert code == 0 and "allowing the call" in err and len(err.splitlines()) == 1  # never blocks a tool


def test_regression_git_grep_and_bash_c_rg_passed_the_search_first_gate(tmp_path: Path, ws: Path) -> None:
    for command in (
        "git grep -n retry_count",
        'bash -c "rg -n retry_count"',
        "sh -c 'grep -rn retry_count src'",
    ):
        code, stdout, _ = hook_cli(tmp_path, bash(ws, command))
        assert code == 0 and "kenning" in is_denial(stdout), command
    # a search inside a script grants as one typed at the prompt does
    assert hook_cli(tmp_path, bash(ws, "bash -c 'kenning search \"upload retries\" .'"))[:2] == (0, "")
    assert hook_cli(tmp_path, bash(ws, "git grep -n retry_count"))[:2] == (0, "")
