"""What a snapshot says of itself: `kpack.json`, the header at the front of every pack, and its parsing.

The header is JSON from elsewhere: it is checked field by field, and a value of the wrong type is a damaged pack,
never a guess. It names the commit, the model the vectors were made with, the file selection, the settings the
passages were cut with, and the database's size and digest (what reading the database is held to).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from kenning.errors import IndexCorrupt, IndexMismatch

__all__ = [
    "DATABASE",
    "DELTA_FORMAT",
    "HEADER",
    "HEADER_MAX",
    "PACK_FORMAT",
    "PACK_SUFFIX",
    "PackInfo",
    "parse_info",
]

PACK_FORMAT = 1
DELTA_FORMAT = 2  # a delta (kenning.pack.delta): a kenning that reads only whole packs refuses it
PACK_SUFFIX = ".kpack"
HEADER = "kpack.json"
DATABASE = "index.db"
HEADER_MAX = 1 << 20


@dataclass(frozen=True)
class PackInfo:
    """What `kpack.json` says of a snapshot."""

    commit: str
    committed: float  # the commit's time
    subject: str
    model: str  # the model's name, as a config names it
    identity: str  # the embedder identity vectors were made with; a reader must embed queries the same way
    remote: bool  # made by a remote embedder (an OpenAI-compatible server): its vectors came from there
    lexical_only: bool
    selection: dict[str, Any]
    settings: str  # what the passages depend on (`engine.index.index_settings`)
    files: int
    passages: int
    embedded: int
    created: float
    schema: int
    db_sha256: str
    db_bytes: int
    kenning: str = ""
    format: int = PACK_FORMAT
    # a delta's base: the pack it applies to, by its commit and its database's digest ("" for a whole pack)
    base_commit: str = ""
    base_sha256: str = ""

    @property
    def delta(self) -> bool:
        return self.format == DELTA_FORMAT

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()


_TYPES: dict[str, type | tuple[type, ...]] = {
    "commit": str, "committed": (int, float), "subject": str, "model": str, "identity": str, "remote": bool,
    "lexical_only": bool, "selection": dict, "settings": str, "files": int, "passages": int, "embedded": int,
    "created": (int, float), "schema": int, "db_sha256": str, "db_bytes": int, "kenning": str, "format": int,
}  # fmt: skip


def parse_info(raw: bytes, label: str) -> PackInfo:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested past the parser's depth
        raise IndexCorrupt(f"{label} is not a kenning snapshot: its header is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise IndexCorrupt(f"{label} is not a kenning snapshot: its header is not an object")
    if data.get("format") not in (PACK_FORMAT, DELTA_FORMAT):
        raise IndexMismatch(
            f"{label} is a snapshot of format {data.get('format')!r}; this kenning reads formats "
            f"{PACK_FORMAT} and {DELTA_FORMAT}",
            hint="use a kenning of the version that made it, or export the snapshot again with this one",
        )
    for key, kind in _TYPES.items():
        value = data.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise IndexCorrupt(f"{label} is damaged: its header's {key!r} is missing or malformed")
    if len(data["commit"]) != 40 or not all(c in "0123456789abcdef" for c in data["commit"]):
        raise IndexCorrupt(f"{label} is damaged: its header names no commit id")
    info = PackInfo(**{key: data[key] for key in _TYPES})
    if info.delta:
        base, digest = data.get("base_commit"), data.get("base_sha256")
        if not (isinstance(base, str) and len(base) == 40 and isinstance(digest, str) and len(digest) == 64):
            raise IndexCorrupt(f"{label} is damaged: it is a delta whose header names no base")
        info = PackInfo(**{**asdict(info), "base_commit": base, "base_sha256": digest})
    return info
