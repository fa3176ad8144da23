"""`kenning install` / `kenning uninstall`: register kenning with coding agents, and take it back out.

This module owns every change kenning makes to an agent's user-level configuration: the MCP server entry,
the guidance (a skill file, or a block in an AGENTS.md-style file) and, with ``--gate``, Claude Code's
PreToolUse hook. Everything it writes is a managed block it can find again: text between
``kenning:begin``/``kenning:end`` marker lines (Markdown, TOML), the single entry under kenning's key in a
JSON file (spliced into its text by kenning.agents.jsonedit, in the indentation the file uses; opencode's JSONC with
its comments and trailing commas kept), or a whole file carrying kenning's mark (skills). Nothing outside those
blocks is touched, byte for byte. An agent whose files kenning cannot edit (a config that does not parse, a
block it did not write) is left out with a note naming the file and the fix, and the others are done.

For each file it changes, the bytes from before the first install are kept under
``$XDG_STATE_HOME/kenning/install/`` (default ``~/.local/state``); uninstall puts them back exactly while
the file still holds what kenning wrote, and otherwise removes only kenning's blocks. Files and directories
kenning created are deleted once nothing else is in them. Every write is atomic and keeps the file's mode.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from kenning.agents import jsonedit
from kenning.agents.targets import AGENTS
from kenning.config import state_dir
from kenning.errors import ConfigError, UsageError

SKILL_NAME = "kenning-search"
GATE_MATCHER = "Grep|Bash|mcp__kenning__text_search"
_WHO = "(managed by `kenning install`; `kenning uninstall` removes it)"
FILE_MARK = "<!-- kenning:managed-file (written by `kenning install`; `kenning uninstall` deletes it) -->"


@dataclass(frozen=True)
class Edit:
    """kenning's one managed block in one file.

    kind: ``json`` (the entry "kenning" inside the object at ``keys``), ``hook`` (kenning's gate group in
    ``hooks.PreToolUse``), ``block`` (text between marker lines) or ``file`` (a whole file kenning owns).
    """

    kind: str
    path: Path
    show: str
    label: str
    value: Any
    keys: tuple[str, ...] = ()
    jsonc: bool = False  # the file may hold comments and trailing commas (opencode's), kept as they are


@dataclass(frozen=True)
class Change:
    edit: Edit
    old: bytes | None
    new: bytes | None  # None: the file goes away
    verb: str


def server_command() -> list[str]:
    """How an agent starts this kenning: the `kenning` script beside this interpreter, on PATH, or `-m`."""
    for found in (Path(sys.executable).parent / "kenning", shutil.which("kenning")):
        if found and Path(found).is_file() and os.access(found, os.X_OK):
            return [str(Path(found).absolute())]
    return [sys.executable, "-m", "kenning.cli"]


def _guidance(name: str) -> str:
    return (resources.files("kenning") / "guidance" / name).read_text(encoding="utf-8")


def _skill() -> str:
    """The packaged SKILL.md with kenning's ownership mark right after its front matter."""
    text = _guidance("SKILL.md")
    end = text.index("\n---\n", 4) + 5
    return f"{text[:end]}{FILE_MARK}\n{text[end:]}"


def _targets(
    home: Path, env: Mapping[str, str], cmd: list[str], install: bool, gate: bool
) -> dict[str, list[Edit]]:
    """The table of targets: the files each agent reads at user level, and kenning's block in each.

    Uninstall looks at every place an install could have used; install picks one: the gate hook only with
    --gate, and opencode's guidance as a skill when creating its AGENTS.md would hide ~/.claude/CLAUDE.md
    (opencode reads that file only while it has no global AGENTS.md of its own).
    """
    claude = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude")
    codex = Path(env.get("CODEX_HOME") or home / ".codex")
    opencode = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    oc_json = opencode / "opencode.json"
    if not oc_json.exists() and (opencode / "opencode.jsonc").exists():
        oc_json = opencode / "opencode.jsonc"
    args = [*cmd[1:], "mcp"]
    stdio = {"command": cmd[0], "args": args}
    hook = shlex.join([*cmd, "gate"])
    skill, snippet = _skill(), _guidance("AGENTS.md")
    oc_skill = not (opencode / "AGENTS.md").exists() and (claude / "CLAUDE.md").exists()
    rows: dict[str, list[tuple[str, Path, str, Any, tuple[str, ...]]]] = {
        "claude": [
            ("json", (claude if env.get("CLAUDE_CONFIG_DIR") else home) / ".claude.json",
             "mcpServers.kenning", {"type": "stdio", **stdio}, ("mcpServers",)),
            ("file", claude / "skills" / SKILL_NAME / "SKILL.md", "", skill, ()),
            ("block", claude / "CLAUDE.md", "kenning block", snippet, ()),
            *[("hook", claude / "settings.json", f"hooks.PreToolUse {GATE_MATCHER}: {hook}", hook, ())]
            * (gate or not install),
        ],
        "codex": [
            ("block", codex / "config.toml", "[mcp_servers.kenning]",
             f"[mcp_servers.kenning]\ncommand = {json.dumps(cmd[0])}\nargs = {json.dumps(args)}\n", ()),
            ("block", codex / "AGENTS.md", "kenning block", snippet, ()),
        ],
        "cursor": [
            ("json", home / ".cursor" / "mcp.json", "mcpServers.kenning", stdio, ("mcpServers",)),
            ("file", home / ".cursor" / "skills" / SKILL_NAME / "SKILL.md", "", skill, ()),
        ],
        "opencode": [
            ("json", oc_json, "mcp.kenning", {"type": "local", "command": [*cmd, "mcp"], "enabled": True}, ("mcp",)),
            *[("block", opencode / "AGENTS.md", "kenning block", snippet, ())] * (not install or not oc_skill),
            *[("file", opencode / "skills" / SKILL_NAME / "SKILL.md", "", skill, ())] * (not install or oc_skill),
        ],
    }  # fmt: skip
    return {
        agent: [
            Edit(kind, path, _show(path, home), label, value, keys, jsonc=agent == "opencode")
            for kind, path, label, value, keys in row
        ]
        for agent, row in rows.items()
    }


def _show(path: Path, home: Path) -> str:
    try:
        return str(Path("~") / path.relative_to(home))
    except ValueError:
        return str(path)


# ---- transforms: (current text, install?) -> new text; None means the file should not exist ----

_SKIP = "or leave this agent out with --target"


def _refuse(e: Edit, problem: str, fix: str = "fix the file") -> ConfigError:
    return ConfigError(f"{e.show}{problem}; nothing was changed", hint=fix)


def _load_json(e: Edit, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        obj = jsonedit.loads(text) if e.jsonc else json.loads(text)
    except json.JSONDecodeError as exc:
        what = "JSONC" if e.jsonc else "JSON"
        raise _refuse(e, f" is not valid {what} (line {exc.lineno}: {exc.msg})", f"fix it, {_SKIP}") from None
    if not isinstance(obj, dict):
        raise _refuse(e, " does not hold a JSON object")
    return obj


def _node(e: Edit, obj: dict[str, Any], keys: Sequence[str], create: bool) -> dict[str, Any] | None:
    """The object at keys (made on the way when create), or None when it is not there."""
    for key in keys:
        child = obj.get(key)
        if child is None and create:
            child = obj[key] = {}
        if child is None:
            return None
        if not isinstance(child, dict):
            raise _refuse(e, f": {key!r} is not a JSON object")
        obj = child
    return obj


def _prune(obj: dict[str, Any], keys: Sequence[str]) -> None:
    """Drop the containers on the way to kenning's entry that its removal left empty."""
    for depth in range(len(keys), 0, -1):
        node: Any = obj
        for key in keys[: depth - 1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(keys[depth - 1]) in ({}, []):
            del node[keys[depth - 1]]


def _is_gate(hook: Any) -> bool:
    try:
        words = shlex.split(str(hook.get("command", "")))
    except (AttributeError, ValueError):
        return False
    return "gate" in words[1:] and (Path(words[0]).name in ("kenning", "ken") or "kenning.cli" in words)


def _edit_json(e: Edit, text: str | None, install: bool) -> str | None:
    obj = _load_json(e, text)
    before = copy.deepcopy(obj)
    if e.kind == "json":
        mcp = obj.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        v2 = e.keys == ("mcp",) and isinstance(servers, dict) and "type" not in servers  # opencode 2's layout
        if install:
            value = {k: v for k, v in e.value.items() if k != "enabled"} if v2 else e.value
            node = _node(e, obj, ("mcp", "servers") if v2 else e.keys, True)
            assert node is not None
            node["kenning"] = value
        for keys in [] if install else [e.keys, ("mcp", "servers")] if e.keys == ("mcp",) else [e.keys]:
            node = _node(e, obj, keys, False)
            if node is not None and node.pop("kenning", None) is not None:
                _prune(obj, keys)
    else:
        hooks = _node(e, obj, ("hooks",), install)
        groups = (hooks or {}).get("PreToolUse")
        if hooks is not None and install and groups is None:
            groups = hooks["PreToolUse"] = []
        if groups is not None and not isinstance(groups, list):
            raise _refuse(e, ": hooks.PreToolUse is not a list")
        if groups is not None:
            ours = [
                g for g in groups if isinstance(g, dict) and g.get("hooks") and all(map(_is_gate, g["hooks"]))
            ]
            at = groups.index(ours[0]) if ours else len(groups)
            groups[:] = [g for g in groups if g not in ours]
            if install:
                entry = {"matcher": GATE_MATCHER, "hooks": [{"type": "command", "command": e.value}]}
                groups.insert(min(at, len(groups)), entry)
            _prune(obj, ("hooks", "PreToolUse"))
    if obj == before:
        return text
    if text is None or not text.strip():
        return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    # the user's file keeps its bytes (indentation, key order, escapes, numbers, comments) outside kenning's entry
    try:
        out = jsonedit.edited(text, before, obj, jsonc=e.jsonc)
        if json.dumps(jsonedit.loads(out)) == json.dumps(obj):
            return out
    except ValueError:
        pass
    if e.jsonc and jsonedit.plain(text) != text:
        # written again from its value, the file would lose its comments
        raise _refuse(
            e, ": kenning cannot place its entry without losing the comments", f"add it by hand, {_SKIP}"
        )
    doc = jsonedit.JsonText(text)  # cannot fail: json.loads read it
    end = "\n" if text.endswith("\n") else ""
    return json.dumps(obj, indent=doc.unit, ensure_ascii=False).replace("\n", doc.newline) + end


def _toml(e: Edit, text: str, fix: str, now: bool = True) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _refuse(
            e, f" {'is' if now else 'would'} not {'' if now else 'be '}valid TOML ({exc})", fix
        ) from None


def _edit_block(e: Edit, text: str | None, install: bool) -> str | None:
    toml = e.path.suffix == ".toml"
    begin, end = (
        (f"# kenning:begin {_WHO}", "# kenning:end")
        if toml
        else (f"<!-- kenning:begin {_WHO} -->", "<!-- kenning:end -->")
    )
    if toml:
        _toml(e, text or "", f"fix the file, {_SKIP}")
    lines = (text or "").splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if ln.strip().startswith(begin.split(" (")[0])]
    stops = [i for i, ln in enumerate(lines) if starts and i > starts[0] and ln.strip() == end]
    if starts and not stops:
        raise _refuse(e, " has kenning:begin without kenning:end", "delete the broken kenning block by hand")
    block = [f"{begin}\n", *e.value.splitlines(keepends=True), f"{end}\n"] if install else []
    if starts:
        i, j = starts[0], stops[0]
        if not install and i > 0 and not lines[i - 1].strip():
            i -= 1  # the blank line kenning put before its block
        new = "".join(lines[:i] + block + lines[j + 1 :])
    elif not install:
        return text
    else:
        new = (text or "") + ("" if not text else "\n" if text.endswith("\n") else "\n\n") + "".join(block)
    if toml and install:
        mine = tomllib.loads(e.value)["mcp_servers"]["kenning"]
        fix = "remove the [mcp_servers.kenning] table that kenning did not write, then run again"
        if _toml(e, new, fix, now=False).get("mcp_servers", {}).get("kenning") != mine:
            raise _refuse(e, ": kenning's [mcp_servers.kenning] would not take effect", fix)
    return new


def _edit_file(e: Edit, text: str | None, install: bool) -> str | None:
    if text is not None and FILE_MARK not in text:
        if not install:
            return text
        raise _refuse(e, " exists and was not written by kenning", f"move it away, {_SKIP}")
    return e.value if install else None


def _transform(e: Edit, text: str | None, install: bool) -> str | None:
    edit = {"json": _edit_json, "hook": _edit_json, "block": _edit_block, "file": _edit_file}[e.kind]
    return edit(e, text, install)


def _bare(e: Edit, text: str | None) -> bool:
    """Nothing is left in the file but what kenning could have put there."""
    if text is None:
        return True
    return not _load_json(e, text) if e.kind in ("json", "hook") else not text.strip()


# ---- state: what each file held before kenning first changed it ----


class _State:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, path: Path) -> Path:
        return self.root / (hashlib.sha256(str(path).encode()).hexdigest()[:24] + ".json")

    def load(self, path: Path) -> dict[str, Any] | None:
        try:
            rec = json.loads(self._file(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) and rec.get("path") == str(path) else None

    def save(self, path: Path, rec: dict[str, Any]) -> None:
        _write(self._file(path), json.dumps({**rec, "path": str(path)}, indent=2).encode(), mode=0o600)

    def drop(self, path: Path) -> None:
        self._file(path).unlink(missing_ok=True)
        for d in (self.root, self.root.parent):
            _rmdir(d)


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _rmdir(d: Path) -> None:
    with contextlib.suppress(OSError):  # not empty, or already gone
        d.rmdir()


def _write(path: Path, data: bytes, mode: int | None = None) -> list[str]:
    """Replace path's content atomically (through a symlink, which stays); return the directories made."""
    path = Path(os.path.realpath(path))
    made = [str(p) for p in reversed(path.parents) if not p.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".kenning-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return made


# ---- plan, confirm, apply ----


def _read(e: Edit) -> tuple[bytes | None, str | None]:
    try:
        data = e.path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        raise _refuse(e, f" cannot be read ({exc.strerror})", "check its permissions") from None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(e, " is not UTF-8 text") from None


def _plan(edits: list[Edit], install: bool, state: _State) -> list[Change]:
    changes = []
    for e in edits:
        old, text = _read(e)
        rec = None if install else state.load(e.path)
        if rec and rec.get("written") and rec["written"] == _sha(old):
            orig = rec.get("original")
            new, verb = (None if orig is None else base64.b64decode(orig)), "restore"
        else:
            after = _transform(e, text, install)
            if rec and rec.get("created") and _bare(e, after):
                after = None
            new, verb = (None if after is None else after.encode("utf-8")), "update"
        if new != old:
            changes.append(
                Change(e, old, new, "create" if old is None else "delete" if new is None else verb)
            )
    return changes


def _plan_agents(
    names: list[str], table: dict[str, list[Edit]], install: bool, state: _State
) -> tuple[list[Change], dict[str, ConfigError]]:
    """The changes for each agent whose files kenning can edit, and the error of each it cannot (left out, so
    one broken configuration does not stop the others). When no agent can be done, the first error is raised."""
    changes: list[Change] = []
    skipped: dict[str, ConfigError] = {}
    for name in names:
        try:
            changes += _plan(table[name], install, state)
        except ConfigError as exc:
            skipped[name] = exc
    if skipped and len(skipped) == len(names):
        raise next(iter(skipped.values()))
    return changes, skipped


def _install(ch: Change, state: _State) -> None:
    assert ch.new is not None
    path, rec = ch.edit.path, state.load(ch.edit.path)
    made = _write(path, ch.new)
    if rec is None:
        text = None if ch.old is None else ch.old.decode("utf-8")
        if _transform(ch.edit, text, False) == text:  # kenning-free before: worth keeping for uninstall
            orig = None if ch.old is None else base64.b64encode(ch.old).decode()
            state.save(
                path, {"original": orig, "created": ch.old is None, "dirs": made, "written": _sha(ch.new)}
            )
    else:  # a file changed by someone else since kenning wrote it cannot go back to the saved bytes
        state.save(path, {**rec, "written": _sha(ch.new) if rec.get("written") == _sha(ch.old) else None})


def _uninstall(changes: list[Change], state: _State) -> None:
    made: list[str] = []
    for ch in changes:
        path = ch.edit.path
        made += (state.load(path) or {}).get("dirs", [])
        if ch.new is None:
            Path(os.path.realpath(path)).unlink()
        else:
            _write(path, ch.new)
        state.drop(path)
    for d in sorted(set(made), key=len, reverse=True):
        _rmdir(Path(d))


def run(
    targets: Sequence[str],
    *,
    gate: bool = False,
    yes: bool = False,
    dry_run: bool = False,
    uninstall: bool = False,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    command: Sequence[str] | None = None,
) -> int:
    """Install (or uninstall) kenning for the named agents ("all": every one); return the exit code.

    ``home`` defaults to the user's home. Given a ``home``, the process environment (CODEX_HOME,
    CLAUDE_CONFIG_DIR, XDG_CONFIG_HOME, XDG_STATE_HOME) is ignored unless ``env`` is passed too, so a
    temporary home never leads to the real configuration. ``command`` overrides the server command.
    """
    out, inp = stdout or sys.stdout, stdin or sys.stdin
    env = (os.environ if home is None else {}) if env is None else env
    home = home or Path.home()
    targets = list(targets) or ["all"]
    unknown = sorted(set(targets) - {*AGENTS, "all"})
    if unknown:
        raise UsageError(f"unknown target {unknown[0]!r}", hint=f"choose from {', '.join(AGENTS)} or all")
    names = [n for n in AGENTS if n in targets or "all" in targets]
    table = _targets(home, env, list(command) if command else server_command(), not uninstall, gate)
    state = _State(state_dir(env, home) / "install")
    changes, skipped = _plan_agents(names, table, not uninstall, state)
    # the gate's grants (kenning.agents.gate): state of Claude Code's hook, gone with it
    grants = state_dir(env, home) / "gate"
    leftover = (
        grants if uninstall and "claude" in names and "claude" not in skipped and grants.is_dir() else None
    )
    for name, exc in skipped.items():
        print(f"note: {name} left out: {exc}", file=out)
    names = [n for n in names if n not in skipped]
    edits = [e for n in names for e in table[n]]
    verb = "uninstall" if uninstall else "install"
    if gate and "claude" not in names:
        print(
            "note: the search-first gate is Claude Code only; not installed (add --target claude)", file=out
        )
    if not uninstall and any(ch.edit is table["opencode"][-1] and ch.edit.kind == "file" for ch in changes):
        print("note: opencode gets kenning's guidance as a skill, since an AGENTS.md of its own would stop it "
              "reading ~/.claude/CLAUDE.md", file=out)  # fmt: skip
    override = table["codex"][1].path.with_name("AGENTS.override.md")
    if "codex" in names and not uninstall and override.exists():
        print(f"note: Codex reads {_show(override, home)} instead of AGENTS.md while it exists", file=out)
    if not changes and leftover is None:
        print(
            f"nothing to change: kenning is {'not' if uninstall else 'already'} installed for {', '.join(names)}",
            file=out,
        )
        return 0
    print(f"kenning {verb} for {', '.join(names)}:", file=out)
    for ch in changes:
        label = f"  ({'-' if uninstall else '+'} {ch.edit.label})" if ch.edit.label else ""
        print(f"  {ch.verb} {ch.edit.show}{label}", file=out)
    if leftover is not None:
        print(f"  delete {_show(leftover, home)}/ (the search-first gate's grants)", file=out)
    if dry_run:
        print("dry run: nothing changed", file=out)
        return 0
    if not yes:
        if not inp.isatty():
            raise UsageError(
                f"kenning {verb} asks before changing files and stdin is not a terminal", hint="pass --yes"
            )
        print("Apply these changes? [y/N] ", end="", file=out, flush=True)
        if inp.readline().strip().lower() not in ("y", "yes"):
            print("nothing changed", file=out)
            return 1
    changes = _plan(edits, not uninstall, state)  # again: an agent may have rewritten a file meanwhile
    try:
        if uninstall:
            _uninstall(changes, state)
            if leftover is not None:
                shutil.rmtree(leftover)
                _rmdir(leftover.parent)  # the state folder, when nothing else of kenning's is kept there
        else:
            for ch in changes:
                _install(ch, state)
    except OSError as exc:
        where = _show(Path(exc.filename), home) if exc.filename else "a file"
        raise ConfigError(
            f"could not write {where} ({exc.strerror})", hint="fix its permissions and run again"
        ) from None
    print(f"done: {len(changes)} file{'' if len(changes) == 1 else 's'} changed", file=out)
    return 0
