"""Real git repositories for the tests of bench/'s set builders (gitsets.py, mine.py): a bench module loaded from
its file, git run with a fixed author, commits made from a dict of files, and the bare mirror gitsets reads."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/NAME.py as module NAME (bench/ on sys.path, as when it runs from there)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def git_out(cwd: Path, *args: str) -> str:
    """Run git in `cwd` as author t <t@t>; its stdout, stripped."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def commit_files(work: Path, message: str, files: dict[str, str]) -> str:
    """Write `files` (path: text) into the work tree and commit all of it; the new commit's sha."""
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    git_out(work, "add", "-A")
    git_out(work, "commit", "-qm", message)
    return git_out(work, "rev-parse", "HEAD")


def mirrored_gitsets(work: Path, mirrors: Path, repo: str) -> tuple[ModuleType, Path]:
    """bench/gitsets.py reading its mirrors from `mirrors`, which holds a bare clone of `work` as `repo`
    ("owner/name"); the module and the bare repository."""
    bare = mirrors / repo.replace("/", "+") / "repo"
    bare.parent.mkdir(parents=True)
    git_out(mirrors, "clone", "-q", "--bare", "--no-local", str(work), str(bare))
    gitsets = load_bench("gitsets")
    gitsets.MIRRORS = mirrors
    return gitsets, bare
