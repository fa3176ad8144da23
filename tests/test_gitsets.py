"""bench/gitsets.py materialising a pinned tree the way a checkout has it, on real git repositories made here
(bench/check_sets.py is tests/test_check_sets.py's)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def mirrored(tmp_path: Path) -> tuple[ModuleType, Path, str]:
    """gitsets with its mirrors folder holding one bare repository `o/r`; the bare dir and its commit."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    (work / "src" / "a.py").write_text("def a():\n    return 1\n")
    (work / "tests" / "test_a.py").write_text("def test_a():\n    assert True\n")
    (work / "big.bin").write_text("x" * 100)
    (work / ".gitattributes").write_text("/tests export-ignore\n")
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "commit", "-qm", "pin")
    commit = _git(work, "rev-parse", "HEAD")
    bare = tmp_path / "mirrors" / "o+r" / "repo"
    bare.parent.mkdir(parents=True)
    _git(tmp_path, "clone", "-q", "--bare", "--no-local", str(work), str(bare))
    gitsets = _load("gitsets")
    gitsets.MIRRORS = tmp_path / "mirrors"
    return gitsets, bare, commit


def _source(gitsets: ModuleType, commit: str) -> object:
    return gitsets.Source("questions", "r", "o/r", commit, "python", "dev")


def test_gitset_keeps_export_ignored_files(mirrored: tuple[ModuleType, Path, str], tmp_path: Path) -> None:
    # A checkout has the files .gitattributes marks export-ignore (a judge indexes the checkout), so the
    # pinned corpus must have them too; `git archive` dropped them.
    gitsets, _bare, commit = mirrored
    corpus = tmp_path / "corpus"
    n = gitsets.extract(_source(gitsets, commit), corpus)
    assert (corpus / "tests" / "test_a.py").read_text().startswith("def test_a")
    assert (corpus / "src" / "a.py").read_text() == "def a():\n    return 1\n"
    assert n == 4


def test_gitset_skips_blob_missing_from_mirror(
    mirrored: tuple[ModuleType, Path, str], tmp_path: Path
) -> None:
    # A fetched snapshot lacks its largest blobs; the rest of the tree must still be materialised.
    gitsets, bare, commit = mirrored
    blob = _git(bare, "rev-parse", f"{commit}:big.bin")
    loose = bare / "objects" / blob[:2] / blob[2:]
    if not loose.is_file():  # the clone packed its objects: unpack them so one can be taken away
        for pack in (bare / "objects" / "pack").glob("*.pack"):
            data = pack.read_bytes()
            pack.unlink()
            pack.with_suffix(".idx").unlink()
            subprocess.run(["git", "unpack-objects", "-q"], cwd=bare, input=data, check=True)
    loose.unlink()
    corpus = tmp_path / "corpus"
    n = gitsets.extract(_source(gitsets, commit), corpus)
    assert not (corpus / "big.bin").exists()
    assert (corpus / "src" / "a.py").is_file()
    assert n == 3
