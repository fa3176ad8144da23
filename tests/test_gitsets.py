"""bench/gitsets.py materialising a pinned tree the way a checkout has it, on real git repositories made here
(bench/check_sets.py is tests/test_check_sets.py's)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from bench_repos import commit_files, git_out, mirrored_gitsets


@pytest.fixture
def mirrored(tmp_path: Path) -> tuple[ModuleType, Path, str]:
    """gitsets with its mirrors folder holding one bare repository `o/r`; the bare dir and its commit."""
    work = tmp_path / "work"
    work.mkdir()
    git_out(work, "init", "-q")
    files = {
        "src/a.py": "def a():\n    return 1\n",
        "tests/test_a.py": "def test_a():\n    assert True\n",
        "big.bin": "x" * 100,
        ".gitattributes": "/tests export-ignore\n",
    }
    commit = commit_files(work, "pin", files)
    gitsets, bare = mirrored_gitsets(work, tmp_path / "mirrors", "o/r")
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
    blob = git_out(bare, "rev-parse", f"{commit}:big.bin")
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
