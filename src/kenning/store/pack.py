"""The snapshot file (`.kpack`): one SQLite index, packed to ship from CI to every machine that searches it.

A pack is a tar archive of exactly two members, in this order: `kpack.json`, what the snapshot is (format,
schema version, model identity, commit, counts, the database's SHA-256), then `index.db`, a compacted copy of
the index's database (`VACUUM INTO`, consistent even while a writer works). The vector snapshot beside the
database is not shipped: the reader writes its own from the database's vectors, so no file of a pack is ever
handed to native code other than SQLite's.

A delta (format 2, `kenning.store.delta`) holds only what differs from an earlier pack, which its header names by
commit and database digest and which must lie beside it; reading it reads the whole chain.

Reading one trusts nothing in it: the header is JSON checked field by field, members are read by name and
never extracted by the archive's own paths, the database's digest is checked while it is copied out, and its
schema must be this kenning's own, object for object (a trigger a pack brought along would run on the
reader's next write). Nothing in a pack is executed or unpickled.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sqlite3
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from kenning.errors import IndexCorrupt, IndexMismatch
from kenning.store.layout import PRIVATE_FILE
from kenning.store.sqlite import schema
from kenning.walk.changes import sha256_file

__all__ = [
    "PACK_FORMAT", "PACK_SUFFIX", "PackInfo", "base_chain", "read_info", "unpack_chain", "unpack_db", "write_pack",
]  # fmt: skip

PACK_FORMAT = 1
DELTA_FORMAT = 2  # a delta (kenning.store.delta): a kenning that reads only whole packs refuses it
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


def _parse_info(raw: bytes, label: str) -> PackInfo:
    try:
        data = json.loads(raw)
    except ValueError as exc:
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


def write_pack(db_path: Path, info: PackInfo, out: Path, *, base: Path | None = None) -> PackInfo:
    """Pack the database at `db_path` into `out` (written whole, then renamed into place): the header's
    digest and size are the copy's, filled in here. With `base` (a pack of an earlier commit), only what
    differs from it is packed: a delta (kenning.store.delta), which needs that pack beside it to be read."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".kpack-") as tmp:
        copy = Path(tmp) / DATABASE
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            conn.execute("VACUUM INTO ?", (str(copy),))
        finally:
            conn.close()
        if base is not None:
            from kenning.store.delta import write_delta

            below = read_info(base)
            whole = Path(tmp) / "base.db"
            unpack_chain(base, whole)
            delta = Path(tmp) / "delta.db"
            write_delta(copy, whole, delta)
            copy = delta
            info = PackInfo(
                **{
                    **asdict(info),
                    "format": DELTA_FORMAT,
                    "base_commit": below.commit,
                    "base_sha256": below.db_sha256,
                }
            )
        size = copy.stat().st_size
        info = PackInfo(**{**asdict(info), "db_sha256": sha256_file(copy), "db_bytes": size})
        header = info.to_json()
        staging = Path(tmp) / "pack"
        with open(os.open(staging, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE), "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
                member = tarfile.TarInfo(HEADER)
                member.size, member.mtime, member.mode = len(header), int(time.time()), 0o600
                tar.addfile(member, io.BytesIO(header))
                member = tarfile.TarInfo(DATABASE)
                member.size, member.mtime, member.mode = size, int(time.time()), 0o600
                with copy.open("rb") as fh:
                    tar.addfile(member, fh)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(staging, out)
    return info


def _open(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path, mode="r:")
    except FileNotFoundError:
        raise IndexCorrupt(
            f"no snapshot at {path}", hint="check the path, or the configured snapshot_source"
        ) from None
    except (tarfile.TarError, OSError) as exc:
        raise IndexCorrupt(f"{path} is not a kenning snapshot ({exc})") from None


def read_info(path: Path) -> PackInfo:
    """The header of the pack at `path`, read without touching its database."""
    with _open(path) as tar:
        member = tar.next()
        if member is None or member.name != HEADER or not member.isfile() or member.size > HEADER_MAX:
            raise IndexCorrupt(f"{path} is not a kenning snapshot: it does not start with {HEADER}")
        fh = tar.extractfile(member)
        assert fh is not None
        return _parse_info(fh.read(), str(path))


def unpack_db(path: Path, dest: Path) -> PackInfo:
    """Copy the pack's database to `dest` (made 0600), checking its digest, size and schema; IndexCorrupt or
    IndexMismatch, with `dest` removed, when any of them is not what it must be."""
    info = read_info(path)
    if info.schema != schema.SCHEMA_VERSION:
        raise IndexMismatch(
            f"{path} holds an index of schema {info.schema}; this kenning reads schema {schema.SCHEMA_VERSION}",
            hint="export it again with this kenning's version, or use the version that made it",
        )
    try:
        with _open(path) as tar:
            tar.next()
            member = tar.next()
            if (
                member is None
                or member.name != DATABASE
                or not member.isfile()
                or member.size != info.db_bytes
            ):
                raise IndexCorrupt(
                    f"{path} is damaged: its database is missing or not the size its header says"
                )
            fh = tar.extractfile(member)
            assert fh is not None
            _copy_checked(fh, dest, info, path)
        _check_schema(dest, path)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return info


def unpack_chain(path: Path, dest: Path) -> PackInfo:
    """`unpack_db`, for a delta too: the whole pack at the bottom of its chain is unpacked to `dest`, then each
    delta applied to it in turn (`base_chain`)."""
    from kenning.store.delta import apply_delta

    whole, *deltas = base_chain(path)
    try:
        unpack_db(whole, dest)
        for link in deltas:
            with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
                delta = Path(tmp) / DATABASE
                unpack_db(link, delta)
                apply_delta(dest, delta)
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return read_info(path)


def base_chain(path: Path) -> list[Path]:
    """The packs reading the one at `path` takes, the whole one first and `path` last (just `path` for a
    whole pack); IndexCorrupt naming the missing one when a delta's base is not beside it."""
    chain = [path]
    info = read_info(path)
    while info.delta:
        base = _find_base(path.parent, info)
        if base is None:
            raise IndexCorrupt(
                f"{chain[-1]} is a delta of commit {info.base_commit[:12]}'s snapshot, which is not beside it",
                hint="keep the snapshot it was made against in the same folder (`snapshot prune` keeps it)",
            )
        if base in chain:
            raise IndexCorrupt(f"{path} is damaged: its chain of deltas loops at {base}")
        chain.append(base)
        info = read_info(base)
    return chain[::-1]


def _find_base(folder: Path, info: PackInfo) -> Path | None:
    """The pack in `folder` a delta applies to (by its database's digest), None when it is not there."""
    for other in sorted(folder.glob(f"*{PACK_SUFFIX}")):
        try:
            found = read_info(other)
        except (IndexCorrupt, IndexMismatch):
            continue
        if found.db_sha256 == info.base_sha256 and found.commit == info.base_commit:
            return other
    return None


def _copy_checked(fh: IO[bytes], dest: Path, info: PackInfo, label: Path) -> None:
    digest = hashlib.sha256()
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as out:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    if digest.hexdigest() != info.db_sha256:
        raise IndexCorrupt(
            f"{label} is damaged: its database's checksum is not the one its header records",
            hint="fetch or export the snapshot again",
        )


def _objects(conn: sqlite3.Connection) -> set[tuple[str, str, str]]:
    rows = conn.execute(
        "SELECT type, name, coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    )
    return {(t, n, " ".join(s.split())) for t, n, s in rows}


def _check_schema(db: Path, label: Path) -> None:
    """The database's tables, indexes, triggers and views are exactly those this kenning's migrations make."""
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.db"
        conn = sqlite3.connect(empty)
        try:
            schema.migrate(conn, empty)
            want = _objects(conn)
        finally:
            conn.close()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        got = _objects(conn)
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its database cannot be read ({exc})") from None
    finally:
        conn.close()
    extra = sorted(n for _, n, _ in got - want)
    missing = sorted(n for _, n, _ in want - got)
    if extra or missing:
        raise IndexCorrupt(
            f"{label} holds a database whose schema is not this kenning's "
            f"({'unexpected ' + ', '.join(extra) if extra else 'missing ' + ', '.join(missing)})",
            hint="use only snapshots exported by `kenning snapshot export`",
        )
