"""The snapshot file (`.kpack`) itself: one SQLite database in a tar archive, written and read.

A pack is a tar archive of exactly two members, in this order: `kpack.json`, what the snapshot is
(`kenning.pack.info`), then `index.db`, a compacted copy of the index's database (`VACUUM INTO`, consistent even
while a writer works). The vector snapshot beside the database is not shipped: the reader writes its own from
the database's vectors, so no file of a pack is ever handed to native code other than SQLite's.

Reading one trusts nothing in it: members are read by name and never extracted by the archive's own paths, the
database's digest is checked while it is copied out, and its schema must be this kenning's own, object for object
(a trigger a pack brought along would run on the reader's next write). Nothing in a pack is executed or
unpickled.
"""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import tarfile
import tempfile
import time
from pathlib import Path
from typing import IO

from kenning.errors import IndexCorrupt, IndexMismatch
from kenning.pack.info import DATABASE, HEADER, HEADER_MAX, PackInfo, parse_info
from kenning.store.layout import PRIVATE_FILE
from kenning.store.sqlite import schema

__all__ = ["read_info", "unpack_db", "write_archive"]


def write_archive(db: Path, info: PackInfo, dest: Path) -> None:
    """Write at `dest` (made 0600) the pack of the database file `db` under the header `info`, whose digest and
    size are `db`'s."""
    header = info.to_json()
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE), "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
            member = tarfile.TarInfo(HEADER)
            member.size, member.mtime, member.mode = len(header), int(time.time()), 0o600
            tar.addfile(member, io.BytesIO(header))
            member = tarfile.TarInfo(DATABASE)
            member.size, member.mtime, member.mode = info.db_bytes, int(time.time()), 0o600
            with db.open("rb") as fh:
                tar.addfile(member, fh)
        raw.flush()
        os.fsync(raw.fileno())


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
        return parse_info(fh.read(), str(path))


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
