"""The search-first gate: a Claude Code PreToolUse hook that holds back grep until a kenning search has run.

This module owns the hook's stdin/stdout protocol, a small shell tokenizer that finds which programs a Bash
command runs (and where a grep, rg or `git grep` in it would look, inside `bash -c`/`sh -c`/`eval` scripts
too), and the per-session ledger of grants under
``$XDG_STATE_HOME/kenning/gate/``. A kenning search grants ``budget`` grep calls for ``window_minutes`` in
that session and index root; a new search resets the grant.

The hook fails open: unreadable input, a payload without its fields or an unusable state directory allows
the call with a note on stderr, because a broken hook must never stop the agent's work. Allowing means exit 0
with no output; printing "allow" would skip the user's own permission prompts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from kenning.config import state_dir
from kenning.errors import UsageError
from kenning.store.layout import find_index_root

MAX_ROOTS = 64  # grants kept per session; the oldest go first
STALE_SECONDS = 86400.0  # ledgers untouched this long are pruned; no window outlives them
GREPS = {"grep", "egrep", "fgrep", "rg"}
# shells whose -c runs a script given as text: its commands are read as if typed (`bash -c "rg x"`)
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"}
_SHELL_VALUES = {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}
# git's own options before its command that take a value as the next word; -C and --work-tree say where
_GIT_VALUES = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}
_NESTING = 4  # `bash -c "sh -c '...'"` is read this deep; deeper is not how anyone greps
_MCP_SEARCH = re.compile(r"^mcp__.*kenning.*__text_search$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBST = "$(…)"  # stands in for a substitution's output: never a path we can resolve
# reserved words that may open a command without being its program (`if grep -q x f; then ...`)
_KEYWORDS = {"!", "{", "}", "if", "then", "elif", "else", "fi", "do", "done", "while", "until", "esac"}
_WORD_END = " \t\n;&|()<>"

# wrapper -> (short options taking a value, long options taking a value, operands before the command)
_PREFIXES: dict[str, tuple[str, frozenset[str], int]] = {
    "sudo": ("CDghpRrTtUu", frozenset({"--chdir", "--close-from", "--group", "--host", "--prompt",
              "--chroot", "--role", "--type", "--command-timeout", "--other-user", "--user"}), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string"}), 0),
    "xargs": ("adEILnPs", frozenset({"--arg-file", "--delimiter", "--max-lines", "--max-args",
               "--max-procs", "--max-chars", "--process-slot-var"}), 0),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "nohup": ("", frozenset(), 0),
    "command": ("", frozenset(), 0),
    "exec": ("a", frozenset(), 0),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
}  # fmt: skip

# grep/rg -> (short options taking a value, long options taking a value, options that mean "no search")
_GREP_OPTIONS: dict[str, tuple[str, frozenset[str], frozenset[str]]] = {
    "grep": ("efmABCdD", frozenset({"--regexp", "--file", "--max-count", "--after-context",
             "--before-context", "--context", "--directories", "--devices", "--include", "--exclude",
             "--exclude-dir", "--exclude-from", "--label", "--binary-files", "--group-separator"}),
             frozenset({"--help", "-V", "--version"})),
    "rg": ("efgtTmABCjMErd", frozenset({"--regexp", "--file", "--glob", "--iglob", "--type", "--type-not",
           "--type-add", "--type-clear", "--max-count", "--max-depth", "--maxdepth", "--max-filesize",
           "--max-columns", "--encoding", "--replace", "--ignore-file", "--pre", "--pre-glob", "--sort",
           "--sortr", "--threads", "--color", "--colors", "--context-separator", "--field-context-separator",
           "--field-match-separator", "--path-separator", "--dfa-size-limit", "--regex-size-limit", "--engine",
           "--after-context", "--before-context", "--context", "--hyperlink-format", "--generate"}),
           frozenset({"-h", "--help", "-V", "--version", "--files", "--type-list"})),
    "git": ("efABCm", frozenset({"--max-count", "--max-depth", "--threads", "--after-context",
            "--before-context", "--context", "--open-files-in-pager"}), frozenset({"-h", "--help"})),
}  # fmt: skip


class _Scanner:
    """Splits shell text into simple commands; substitutions and subshells add their own commands."""

    def __init__(self, text: str, out: list[tuple[list[str], bool]]) -> None:
        self.s, self.i, self.out = text, 0, out
        self.heredocs: list[tuple[str, bool]] = []  # delimiters whose bodies start at the next newline

    def at(self, k: int = 0) -> str:
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def run(self, stop: str = "") -> None:
        """Read a command list up to `stop` (the `)` closing a subshell or `$(`) or the end of the text."""
        words: list[str] = []
        piped = False  # this command's stdin is the previous command's output

        def end(next_piped: bool) -> None:
            nonlocal words, piped
            if words:
                self.out.append((words, piped))
            words, piped = [], next_piped

        while self.i < len(self.s):
            c = self.at()
            if c == ")" and stop:
                self.i += 1
                break
            if c in " \t" or (c == "\\" and self.at(1) == "\n"):
                self.i += 1 if c != "\\" else 2
            elif c == "#":  # only reached at a word start: a comment
                while self.i < len(self.s) and self.at() != "\n":
                    self.i += 1
            elif c == "\n":
                self.i += 1
                end(False)
                self.skip_heredocs()
            elif c in "<>" or (c == "&" and self.at(1) == ">"):
                self.redirect(words)
            elif c in ";&|":
                op = next(o for o in ("||", "&&", "|&", ";;", "|", "&", ";") if self.s.startswith(o, self.i))
                self.i += len(op)
                end(op in ("|", "|&"))
            elif c in "()":  # a subshell, or a stray `)` closing a case pattern
                self.i += 1
                end(False)
                if c == "(":
                    self.run(")")
            else:
                word = self.word()
                if word is not None and (words or word not in _KEYWORDS):
                    words.append(word)
        end(False)

    def word(self) -> str | None:
        """One word with quotes removed; None when it was a file-descriptor number before a redirection."""
        buf: list[str] = []
        quoted = in_double = False
        while self.i < len(self.s) and ((c := self.at()) not in _WORD_END or in_double):
            if c == '"':
                in_double, quoted = not in_double, True
                self.i += 1
            elif c == "'" and not in_double:
                end = self.s.find("'", self.i + 1)
                end = len(self.s) if end < 0 else end
                buf.append(self.s[self.i + 1 : end])
                self.i, quoted = end + 1, True
            elif c == "\\" and (not in_double or self.at(1) in '"\\$`\n'):
                buf.append(self.at(1) if self.at(1) != "\n" else "")
                self.i, quoted = self.i + 2, True
            elif c == "$":
                self.dollar(buf)
            elif c == "`":
                self.backticks()
                buf.append(_SUBST)
            else:
                buf.append(c)
                self.i += 1
        text = "".join(buf)
        return None if self.at() in ("<", ">") and text.isdigit() and not quoted else text

    def dollar(self, buf: list[str]) -> None:
        if self.s.startswith("$((", self.i):  # arithmetic, not a command
            depth, self.i = 0, self.i + 1
            while self.i < len(self.s):
                depth += {"(": 1, ")": -1}.get(self.at(), 0)
                self.i += 1
                if depth == 0:
                    break
            buf.append(_SUBST)
        elif self.at(1) == "(":
            self.i += 2
            self.run(")")
            buf.append(_SUBST)
        elif self.at(1) == "{":
            end = self.s.find("}", self.i)
            end = len(self.s) if end < 0 else end
            buf.append(self.s[self.i : end + 1])
            self.i = end + 1
        else:
            buf.append("$")
            self.i += 1

    def backticks(self) -> None:
        inner: list[str] = []
        self.i += 1
        while self.i < len(self.s) and (c := self.at()) != "`":
            if c == "\\" and self.at(1) in "`\\$":
                c = self.at(1)
                self.i += 1
            inner.append(c)
            self.i += 1
        self.i += 1
        _Scanner("".join(inner), self.out).run()

    def redirect(self, words: list[str]) -> None:
        """Skip a redirection and its target, so `2>/dev/null` is never read as a path operand."""
        if self.at(1) == "(":  # process substitution <(...) / >(...): its commands run too
            self.i += 2
            self.run(")")
            words.append(_SUBST)
            return
        ops = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">&", ">>", ">|", "&>", "<", ">")
        op = next(o for o in ops if self.s.startswith(o, self.i))
        self.i += len(op)
        while self.at() in (" ", "\t"):
            self.i += 1
        target = self.word() if self.at() and self.at() not in _WORD_END else ""
        if op in ("<<", "<<-") and target:
            self.heredocs.append((target, op == "<<-"))

    def skip_heredocs(self) -> None:
        for delimiter, strip_tabs in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i : end]
                self.i = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self.heredocs.clear()


def pipeline_commands(shell_text: str) -> list[tuple[list[str], bool]]:
    """Each simple command's words, and whether its stdin is piped from the command before it."""
    out: list[tuple[list[str], bool]] = []
    _Scanner(shell_text, out).run()
    return out


def commands(shell_text: str) -> list[list[str]]:
    """The words of each simple command in `shell_text`, quotes removed, comments and redirections dropped."""
    return [words for words, _ in pipeline_commands(shell_text)]


def program(argv: Sequence[str]) -> tuple[str, list[str], bool] | None:
    """What a simple command runs, past assignments and wrappers: (name, arguments, fed by xargs)."""
    i, via_xargs = 0, False
    while i < len(argv):
        if _ASSIGNMENT.match(argv[i]):
            i += 1
            continue
        name = argv[i].rsplit("/", 1)[-1]
        if name not in _PREFIXES:
            return name, list(argv[i + 1 :]), via_xargs
        shorts, longs, operands = _PREFIXES[name]
        via_xargs = via_xargs or name == "xargs"
        i += 1
        while i < len(argv) and argv[i].startswith("-"):
            opt = argv[i]
            i += 1
            if opt == "--":
                break
            if opt.startswith("--"):
                i += int("=" not in opt and opt in longs)
                continue
            if name == "command" and ("v" in opt or "V" in opt):
                return None  # `command -v grep` looks grep up, it does not run it
            for k, ch in enumerate(opt[1:], 1):
                if ch in shorts:  # the value is the rest of the word, or the next word
                    i += int(k == len(opt) - 1)
                    break
        i += operands
    return None


def shell_script(args: Sequence[str]) -> str | None:
    """The script text of `bash -c SCRIPT` (any of SHELLS, options in any cluster: `-lc`, `-e -c`); None when
    the shell runs a file or its stdin."""
    i, given = 0, False
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in _SHELL_VALUES:
            i += 2
        elif arg.startswith("--"):
            i += 1
        elif arg[:1] in "-+" and len(arg) > 1:
            given = given or (arg[0] == "-" and "c" in arg[1:])
            i += 2 if arg[-1] in "oO" else 1  # `-eo pipefail`: the option's value follows
        else:
            break
    return args[i] if given and i < len(args) else None


def git_grep(args: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """For `git [-C DIR ...] grep ARGS`: (the folders git was pointed at, ARGS); None for any other git
    command."""
    where: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        arg = args[i]
        i += 1
        key, eq, value = arg.partition("=")
        if key in ("-C", "--work-tree"):
            where.append(value if eq else (args[i] if i < len(args) else ""))
        if key in _GIT_VALUES and not eq:
            i += 1
    if i < len(args) and args[i] == "grep":
        return where, list(args[i + 1 :])
    return None


def grep_paths(name: str, args: Sequence[str]) -> list[str] | None:
    """The path operands of a grep/rg/git grep (after its pattern); None when it would not search
    (`--help`)."""
    shorts, longs, quits = _GREP_OPTIONS[name if name in ("rg", "git") else "grep"]
    operands: list[str] = []
    pattern_given = False  # by -e/-f, so every operand is a path
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            operands.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            operands.append(arg)
        elif arg in quits:
            return None
        elif arg.startswith("--"):
            key = arg.split("=", 1)[0]
            pattern_given = pattern_given or key in ("--regexp", "--file")
            i += int("=" not in arg and key in longs)
        else:
            for k, ch in enumerate(arg[1:], 1):
                if ch in shorts:
                    pattern_given = pattern_given or ch in "ef"
                    i += int(k == len(arg) - 1)
                    break
    return operands if pattern_given else operands[1:]


def _recursive(name: str, args: Sequence[str]) -> bool:
    """grep -r with no path searches the current directory even when something is piped into it."""
    if name == "rg":
        return False
    for arg in args:
        if arg in ("--recursive", "--dereference-recursive", "--directories=recurse"):
            return True
        if arg.startswith("-") and not arg.startswith("--") and ("r" in arg[1:] or "R" in arg[1:]):
            # a short-option cluster (-rn); stop at an option that takes a value, whose value may hold an r
            cluster = arg[1:]
            for ch in cluster:
                if ch in "rR":
                    return True
                if ch in _GREP_OPTIONS["grep"][0]:
                    break
    return False


def _overlaps(paths: Sequence[str], cwd: Path, root: Path) -> bool:
    """Whether searching `paths` (relative to cwd) would read files under the index root."""
    for raw in paths:
        if raw == "-":  # stdin
            continue
        if "$" in raw or "`" in raw:
            return True  # known only once the shell expands it
        try:
            target = (cwd / Path(os.path.expanduser(raw))).resolve()
        except (OSError, RuntimeError, ValueError):
            return True
        if target.is_relative_to(root) or root.is_relative_to(target):
            return True
    return False


def classify(tool_name: str, tool_input: Mapping[str, Any], cwd: Path) -> tuple[bool, list[list[str]]]:
    """Whether the call runs a kenning search, and the path operands (relative to cwd) of each grep it runs."""
    if _MCP_SEARCH.match(tool_name):
        return True, []
    if tool_name == "Grep":
        path = tool_input.get("path")
        return False, [[path if isinstance(path, str) and path else str(cwd)]]
    command = tool_input.get("command")
    if tool_name != "Bash" or not isinstance(command, str):
        return False, []
    return _shell(command, piped_in=False, depth=0)


def _shell(text: str, *, piped_in: bool, depth: int) -> tuple[bool, list[list[str]]]:
    """`classify` for shell text; `piped_in`: the text's stdin is a pipe (`... | bash -c "grep x"`)."""
    searched, greps = False, []
    for n, (words, piped) in enumerate(pipeline_commands(text)):
        piped = piped or (piped_in and n == 0)
        found = program(words)
        if found is None:
            continue
        name, args, via_xargs = found
        searched = searched or (name in ("kenning", "ken") and args[:1] == ["search"])
        script = shell_script(args) if name in SHELLS else " ".join(args) if name == "eval" else None
        if script is not None and depth < _NESTING:
            inner_searched, inner_greps = _shell(script, piped_in=piped, depth=depth + 1)
            searched = searched or inner_searched
            greps += inner_greps
            continue
        if name == "git":
            called = git_grep(args)
            if called is None:
                continue
            where, args = called
            paths = grep_paths("git", args)
            if paths is not None:
                # git grep never reads stdin: without paths it searches the tree from where it runs
                greps.append([os.path.join(*where, p) for p in paths or ["."]])
            continue
        paths = grep_paths(name, args) if name in GREPS else None
        if paths is None or (not paths and piped and not via_xargs and not _recursive(name, args)):
            continue  # not a search, or a filter over the previous command's output
        greps.append([*paths, "."] if via_xargs or not paths else paths)
    return searched, greps


def deny_message(budget: int, window_minutes: float, *, again: bool) -> str:
    first = "run" if not again else "the grep calls from your last search are used up or expired; run"
    return (
        f"This workspace has a kenning index: {first} the `text_search` tool (or `kenning search "
        f'"<what you mean>"` in the shell) with a description of what you are looking for before grepping. '
        f"After a search, {budget} grep calls are allowed for {window_minutes:g} minutes."
    )


def decide(
    searched: bool,
    greps: list[list[str]],
    grants: dict[str, dict[str, float]],
    *,
    cwd: Path,
    root: Path,
    now: float,
    budget: int,
    window_minutes: float,
) -> str | None:
    """Apply one classified tool call (see `classify`) to a session's grants, updated in place: the reason to
    deny it, or None."""
    key = str(root)
    if searched:
        grants[key] = {"at": now, "used": 0}
    if not any(_overlaps(paths, cwd, root) for paths in greps):
        return None
    grant = grants.get(key)
    if grant and 0 <= now - grant["at"] < window_minutes * 60 and grant["used"] < budget:
        grant["used"] += 1
        return None
    return deny_message(budget, window_minutes, again=grant is not None)


def state_home() -> Path:
    return state_dir(os.environ, Path.home()) / "gate"


def _load(path: Path) -> dict[str, dict[str, float]]:
    """A session's grants; a ledger that cannot be read or has the wrong shape reads as no grants at all."""
    try:
        roots = json.loads(path.read_text(encoding="utf-8"))["roots"]
        return {str(k): {"at": float(g["at"]), "used": float(g["used"])} for k, g in roots.items()}
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return {}


def _save(path: Path, grants: dict[str, dict[str, float]]) -> None:
    kept = dict(sorted(grants.items(), key=lambda kv: kv[1]["at"])[-MAX_ROOTS:])
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": 1, "roots": kept}), encoding="utf-8")
    os.replace(tmp, path)  # readers see the old ledger or the new one, never half of one


def _prune(state_dir: Path, keep: Path) -> None:
    cutoff = time.time() - STALE_SECONDS
    for entry in os.scandir(state_dir):
        if entry.name.endswith((".json", ".tmp")) and entry.path != str(keep):
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                pass  # another hook got there first


def _allow(note: str) -> int:
    print(f"kenning gate: {note}; allowing the call", file=sys.stderr)
    return 0


def main(
    stdin: TextIO,
    stdout: TextIO,
    *,
    budget: int,
    window_minutes: float,
    now: float | None = None,
    state_dir: Path | None = None,
) -> int:
    """Run the hook once: read Claude Code's PreToolUse JSON, print a denial or nothing, return 0.

    Misconfigured flags raise UsageError; the CLI turns that into exit 1, not 2, for this command (Claude Code
    reads exit 2 as "block this call", and a typo in settings.json must not block every call the agent makes).
    """
    fix = (
        "fix the `kenning gate` command in Claude Code's settings.json, "
        "or run `kenning install --target claude --gate` again"
    )
    if not 1 <= budget <= 20:
        raise UsageError(f"--budget must be between 1 and 20, not {budget}", hint=fix)
    if not 1 <= window_minutes <= 240:
        raise UsageError(f"--window must be between 1 and 240 minutes, not {window_minutes:g}", hint=fix)
    try:
        payload = json.loads(stdin.read())
    except (ValueError, OSError, RecursionError):  # JSON nested deeper than the parser's stack
        return _allow("stdin is not the hook's JSON")
    if not (
        isinstance(payload, dict)
        and all(isinstance(payload.get(f), str) and payload[f] for f in ("session_id", "cwd", "tool_name"))
    ):
        missing = [
            f
            for f in ("session_id", "cwd", "tool_name")
            if not isinstance(payload, dict) or not payload.get(f)
        ]
        return _allow(
            f"the hook input has no {', '.join(missing)} (Claude Code always sends them; is this a hook payload?)"
        )
    if payload.get("hook_event_name", "PreToolUse") != "PreToolUse":
        return 0
    tool_input = payload.get("tool_input")
    cwd = Path(payload["cwd"])
    searched, greps = classify(payload["tool_name"], tool_input if isinstance(tool_input, dict) else {}, cwd)
    if not searched and not greps:
        return 0  # most Bash calls: neither a search nor a grep, so no index lookup and no ledger
    # from here on any failure is kenning's, not the agent's: report it in one line and let the call through
    try:
        root = find_index_root(payload["cwd"])
        if root is None:
            return 0
        home = state_dir or state_home()
        home.mkdir(parents=True, exist_ok=True)
        ledger = home / (hashlib.sha256(payload["session_id"].encode()).hexdigest()[:32] + ".json")
        grants = _load(ledger)
        before = json.dumps(grants, sort_keys=True)
        reason = decide(
            searched,
            greps,
            grants,
            cwd=cwd,
            root=root,
            now=time.time() if now is None else now,
            budget=budget,
            window_minutes=window_minutes,
        )
        # a denial is written too: if the ledger cannot be written, no search could ever be recorded, and
        # the failed write lets the call through instead of denying grep for the rest of the session
        if reason or json.dumps(grants, sort_keys=True) != before:
            _save(ledger, grants)
            _prune(home, ledger)
    except Exception as exc:
        return _allow(f"{type(exc).__name__}: {exc}")
    if reason:
        denial = {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
        stdout.write(json.dumps({"hookSpecificOutput": denial}) + "\n")
    return 0
