"""Configuration layers: defaults < user config < workspace .kenning.toml < KENNING_* env < flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from kenning.config import Config, load_config
from kenning.errors import ConfigError


def _layers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str, local: str
) -> tuple[Path, dict[str, str]]:
    """A user config and a workspace file; the environment that finds the user config is set and returned."""
    (tmp_path / "xdg" / "kenning").mkdir(parents=True)
    (tmp_path / "xdg" / "kenning" / "config.toml").write_text(user)
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".kenning.toml").write_text(local)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return root, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def test_precedence_of_every_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, env = _layers(
        tmp_path,
        monkeypatch,
        "limit = 3\npreview = 'full'\nmax_chars = 800\n",
        "limit = 4\nmax_chars = 900\n",
    )
    config = load_config(root, env={**env, "KENNING_MAX_CHARS": "700"})
    assert (config.preview, config.limit, config.max_chars) == ("full", 4, 700)
    assert config.with_overrides(limit=9, preview=None).limit == 9
    assert Config().limit == 10


def test_regression_a_relative_folder_in_a_config_file_is_relative_to_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it was relative to the working directory: the CLI and the daemon (started elsewhere) read one file as two
    # different index folders
    root, env = _layers(
        tmp_path, monkeypatch, "cache_dir = 'models'\nindex_dir = 'idx'\n", "index_dir = '../shared-idx'\n"
    )
    elsewhere = tmp_path / "elsewhere" / "deeper"  # read from the working directory, both would land here
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    config = load_config(root, env=env)
    assert config.index_dir == str(tmp_path / "shared-idx")  # the workspace file's, from the root
    assert config.cache_dir == str(tmp_path / "xdg" / "kenning" / "models")
    absolute = load_config(root, env={**env, "KENNING_INDEX_DIR": str(tmp_path / "abs")})
    assert absolute.index_dir == str(tmp_path / "abs")


def test_bad_values_are_config_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, env = _layers(tmp_path, monkeypatch, "", "limit = 'many'\n")
    with pytest.raises(ConfigError, match="limit"):
        load_config(root, env=env)
    (root / ".kenning.toml").write_text("colour = 'blue'\n")
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_config(root, env=env)
    (root / ".kenning.toml").write_text("this is = not toml [")
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(root, env=env)
    (root / ".kenning.toml").write_text("")
    with pytest.raises(ConfigError, match="KENNING_LIMIT"):
        load_config(root, env={**env, "KENNING_LIMIT": "ten"})
    with pytest.raises(ConfigError, match="overlap_chars"):
        load_config(root, env={**env, "KENNING_OVERLAP_CHARS": "5000"})


def test_workspace_file_cannot_define_a_remote_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = _layers(
        tmp_path,
        monkeypatch,
        "",
        '[embedders.x]\nprovider = "openai"\nurl = "http://example.invalid"\ndim = 8\n',
    )
    with pytest.raises(ConfigError, match="may only be defined"):
        load_config(root, env=env)


def test_user_config_may_enable_remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, env = _layers(tmp_path, monkeypatch, "allow_remote = true\n", "")
    assert load_config(root, env=env).allow_remote
