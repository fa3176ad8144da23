"""Settings and where they come from.

Precedence, lowest first: built-in defaults < `~/.config/kenning/config.toml` (or `$XDG_CONFIG_HOME`) <
`<root>/.kenning.toml` < `KENNING_*` environment variables < command-line flags. Loading reads files; nothing
happens at import.

`store` (a PostgreSQL URL: where the index lives) is likewise honoured only from the user's config, the
environment or a flag: a workspace file must not send its reader's files to a server it names.

`snapshot_source` (where a root's index starts from) likewise: a snapshot decides what searches return.

`allow_remote` (sending workspace text to a remote embedder) is honoured only from the user's own config, the
environment or a flag: a `.kenning.toml` inside a cloned repository must not be able to opt its reader in.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kenning.errors import ConfigError

DEFAULT_MODEL = "minilm"
PREVIEWS = ("none", "short", "full")


@dataclass(frozen=True)
class Config:
    model: str = DEFAULT_MODEL
    index_dir: str | None = None  # default: <root>/.kenning
    cache_dir: str | None = None  # model cache; default: $XDG_CACHE_HOME/kenning
    max_chars: int = 1000
    overlap_chars: int = 200
    code_symbols: bool = True  # cut code along its syntax tree's symbols; False: line windows only
    # read a passage past the model's token limit in windows; False: its first window only
    embed_windows: bool = True
    chunk_workers: int = 0  # processes that read and chunk changed files: 0 = as many as cores for large runs
    limit: int = 10
    preview: str = "short"
    grep_timeout: int = 30  # seconds a grep may take before it stops with partial results (0 = no limit)
    # seconds a search may spend bringing files changed since indexing into the index first (0 = never)
    refresh_timeout: float = 5.0
    # a first search answers from the words and leaves the semantic pass to a detached `kenning index`
    background_index: bool = True
    allow_remote: bool = False
    # where indexes live: unset for the SQLite folder beside each root, or a PostgreSQL URL for a team's server
    store: str | None = None
    store_name: str | None = None  # the index's name on that server; default: the root folder's name
    # where commit snapshots come from (kenning.engine.snapshot): a .kpack file, a folder of them, or an
    # http(s) URL of one (with {commit} standing for a commit id); a root without an index starts from one
    snapshot_source: str | None = None
    snapshot_timeout: float = 600.0  # seconds a snapshot's download may take, whole (0 = no limit)
    embedders: dict[str, dict[str, Any]] = field(default_factory=dict)  # [embedders.NAME] tables
    sources: tuple[str, ...] = ()  # which files/layers contributed, for `kenning status`
    explicit: frozenset[str] = frozenset()  # settings given by a file, the environment or a flag

    def with_overrides(self, **values: Any) -> Config:
        """Apply command-line flags (None means "not given")."""
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return self
        return _validated(replace(self, **given, explicit=self.explicit | set(given)))


_SCALARS: dict[str, type] = {
    "model": str,
    "index_dir": str,
    "cache_dir": str,
    "max_chars": int,
    "overlap_chars": int,
    "code_symbols": bool,
    "embed_windows": bool,
    "chunk_workers": int,
    "limit": int,
    "preview": str,
    "grep_timeout": int,
    "refresh_timeout": float,
    "background_index": bool,
    "allow_remote": bool,
    "store": str,
    "store_name": str,
    "snapshot_source": str,
    "snapshot_timeout": float,
}


_FOLDERS = ("index_dir", "cache_dir")

# The settings a workspace's `.kenning.toml` cannot set (`_merge` refuses each one): they would send the reader's
# files to a server, pick which index a run rewrites, decide what searches return, or opt the reader in to a
# remote embedder. tests/test_docs.py checks this list against what `load_config` refuses.
USER_ONLY = frozenset({"store", "store_name", "snapshot_source", "allow_remote"})

# What each setting is for, for people: docs/configuration.md's table is generated from this, the types and the
# defaults above (`python docs/generate.py`), and tests/test_docs.py fails while a setting has no line here.
SETTING_DOCS: dict[str, str] = {
    "model": "the embedder: `minilm` (all-MiniLM-L6-v2 on onnxruntime), `hash` (a deterministic stub, for tests), "
    "`st:<name>` (a sentence-transformers model, `pip install 'kenning[st]'`), or the name of an "
    "`[embedders.NAME]` table. Each embedder gets an index of its own",
    "index_dir": "where indexes live, one subfolder per root; unset: `<root>/.kenning`. A relative folder in a "
    "config file is relative to that file's folder",
    "cache_dir": "where the model is prepared once (and its weights kept, unless `KENNING_WEIGHTS_DIR`); unset: "
    "`$XDG_CACHE_HOME/kenning`, else `~/.cache/kenning`. Relative in a config file: to that file's folder",
    "max_chars": "the largest passage, in characters (at least 100)",
    "overlap_chars": "how much a passage repeats of the one before it, in whole paragraphs (whole pieces for "
    "code), up to this many characters (below `max_chars`)",
    "code_symbols": "cut code along its tree-sitter symbols (false: line windows)",
    "embed_windows": "read a passage longer than the model's 256 tokens in windows, scoring its best (false: its "
    "first 256 tokens only, a faster semantic pass on long documents). Switching it re-embeds only the passages "
    "it changes, at the next `kenning index`; searches meanwhile use the vectors there are",
    "chunk_workers": "processes that read and chunk changed files: 0 (auto) uses up to 4 of the cores for a run "
    "with at least 4 MB of changed files, where processes can be forked (Linux); 1: never",
    "limit": "hits per query group (1-1000)",
    "preview": "the text a hit shows: `none`, `short` or `full`",
    "grep_timeout": "seconds a `kenning grep` may take before it stops with partial results (0: no limit; "
    "`kenning grep --timeout`)",
    "refresh_timeout": "seconds a search may spend bringing files changed since indexing into the index first "
    "(0: never; at most 3600)",
    "background_index": "after a search answers from an index whose semantic pass is pending (a first search "
    "builds only the words' part), embed the rest in a detached, low-priority `kenning index` (its log: "
    "`background.log` in the index's folder); a daemon serving the root does it instead. Off: `kenning index` "
    "finishes it",
    "allow_remote": "let a remote embedding endpoint (an `openai` provider) receive workspace text",
    "store": "keep indexes on a PostgreSQL server, `postgresql://[user@]host[:port]/database`; unset: a folder "
    "beside each root",
    "store_name": "the index's name on that server; unset: the root folder's name",
    "snapshot_source": "where a root without an index starts from: a `.kpack` file, a folder of them, an "
    "http(s) URL of one (`{commit}` stands for the commit id), or a team's index on `postgresql://`",
    "snapshot_timeout": "seconds a snapshot's download from a URL may take, whole (0: no limit; at most 86400)",
}


def masked_store(text: str) -> str:
    """`text` with the passwords a store setting may hold (`user:password@`, `password=...`) replaced by ***."""
    out = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
    return re.sub(r"(password=)[^&\s]*", r"\1***", out, flags=re.IGNORECASE)


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kenning" / "config.toml"


def cache_dir(config: Config) -> Path:
    if config.cache_dir:
        return Path(os.path.expanduser(config.cache_dir))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kenning"


def state_dir(env: Mapping[str, str], home: Path) -> Path:
    """kenning's state folder (gate grants, install records): `$XDG_STATE_HOME/kenning`, else
    `~/.local/state/kenning`. A relative XDG_STATE_HOME is ignored, as the XDG spec says."""
    base = env.get("XDG_STATE_HOME", "")
    return (Path(base) if os.path.isabs(base) else home / ".local" / "state") / "kenning"


def load_config(root: Path | None = None, *, env: dict[str, str] | None = None) -> Config:
    env = dict(os.environ) if env is None else env
    values: dict[str, Any] = {}
    embedders: dict[str, dict[str, Any]] = {}
    sources: list[str] = ["defaults"]

    user = user_config_path()
    if user.is_file():
        _merge(values, embedders, _read_toml(user), str(user), trusted=True)
        sources.append(str(user))
    if root is not None:
        local = root / ".kenning.toml"
        if local.is_file():
            _merge(values, embedders, _read_toml(local), str(local), trusted=False)
            sources.append(str(local))
    for key, kind in _SCALARS.items():
        raw = env.get(f"KENNING_{key.upper()}")
        if raw is not None and raw != "":
            values[key] = _coerce(raw, kind, f"${'KENNING_' + key.upper()}")
            sources.append(f"$KENNING_{key.upper()}")
    return _validated(
        Config(**values, embedders=embedders, sources=tuple(sources), explicit=frozenset(values))
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}", hint="fix or remove the file") from exc


def _merge(
    values: dict[str, Any],
    embedders: dict[str, dict[str, Any]],
    data: dict[str, Any],
    where: str,
    *,
    trusted: bool,
) -> None:
    for key, value in data.items():
        if key == "embedders":
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise ConfigError(f"{where}: [embedders.NAME] must be tables")
            for name, table in value.items():
                if not trusted and table.get("provider") == "openai":
                    # a repository must not be able to route its reader's text to a server it names
                    raise ConfigError(
                        f"{where}: remote embedder '{name}' may only be defined in {user_config_path()}",
                        hint="move the [embedders] table to your user config",
                    )
                embedders[name] = dict(table)
            continue
        if key not in _SCALARS:
            known = ", ".join(sorted(_SCALARS))
            raise ConfigError(f"{where}: unknown setting '{key}'", hint=f"known settings: {known}, embedders")
        if key in ("store", "store_name") and not trusted:
            # a repository must not be able to send its reader's files to a server it names, nor pick which
            # index on the reader's server its `kenning index` rewrites (or `--rebuild` drops)
            raise ConfigError(
                f"{where}: {key} cannot be set by a workspace file",
                hint=f"set it in {user_config_path()}, $KENNING_STORE or --store",
            )
        if key == "snapshot_source" and not trusted:
            # a snapshot decides what its reader's searches return: a repository must not pick it for them
            raise ConfigError(
                f"{where}: snapshot_source cannot be set by a workspace file",
                hint=f"set it in {user_config_path()}, $KENNING_SNAPSHOT_SOURCE or --snapshot-source",
            )
        if key == "allow_remote" and not trusted:
            raise ConfigError(
                f"{where}: allow_remote cannot be set by a workspace file",
                hint=f"set it in {user_config_path()}, $KENNING_ALLOW_REMOTE or --allow-remote",
            )
        kind = _SCALARS[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)  # `refresh_timeout = 5` in TOML is an int
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ConfigError(f"{where}: '{key}' must be {kind.__name__}, not {type(value).__name__}")
        if (
            key in _FOLDERS
            and isinstance(value, str)
            and value
            and not os.path.isabs(os.path.expanduser(value))
        ):
            # relative to the file that says it: relative to the working directory, the CLI and the daemon
            # (started elsewhere) would read the same file as two different folders
            value = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(where)), value))
        values[key] = value


def _coerce(raw: str, kind: type, where: str) -> Any:
    if kind is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{where}={raw!r} is not a boolean", hint="use 1/0, true/false")
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{where}={raw!r} is not an integer") from None
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{where}={raw!r} is not a number of seconds") from None
    return raw


def _validated(config: Config) -> Config:
    if config.max_chars < 100:
        raise ConfigError(f"max_chars={config.max_chars} is too small", hint="use at least 100")
    if not 0 <= config.overlap_chars < config.max_chars:
        raise ConfigError(f"overlap_chars={config.overlap_chars} must be >= 0 and below max_chars")
    if not 1 <= config.limit <= 1000:
        raise ConfigError(f"limit={config.limit} must be between 1 and 1000")
    if config.grep_timeout < 0:
        raise ConfigError(
            f"grep_timeout={config.grep_timeout} is negative", hint="use 0 for no limit, or seconds"
        )
    if not 0 <= config.refresh_timeout <= 3600:
        raise ConfigError(
            f"refresh_timeout={config.refresh_timeout} must be between 0 and 3600 seconds",
            hint="use 0 to search without refreshing first",
        )
    if not 0 <= config.snapshot_timeout <= 86400:
        raise ConfigError(
            f"snapshot_timeout={config.snapshot_timeout} must be between 0 and 86400 seconds",
            hint="use 0 for no limit on a snapshot's download",
        )
    if config.store is not None and urlsplit(config.store).scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f"store={masked_store(config.store)!r} is not a PostgreSQL URL",
            hint="use postgresql://[user@]host[:port]/database, or leave store unset for the local index",
        )
    if config.preview not in PREVIEWS:
        raise ConfigError(f"preview={config.preview!r} must be one of {', '.join(PREVIEWS)}")
    return config


def describe(config: Config) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in fields(config)}
