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
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from kenning.errors import IndexCorrupt, IndexMismatch
from kenning.pack.check import check_schema
from kenning.pack.info import DATABASE, HEADER, HEADER_MAX, PackInfo, parse_info
from kenning.store.layout import PRIVATE_FILE
from kenning.store.sqlite import schema

__all__ = ["inspect", "read_info", "unpack_db", "write_archive"]

READ_MAX = 4 << 20  # the most tarfile may read at once: a header, or one block of the database


def write_archive(db: Path, info: PackInfo, dest: Path) -> None:
    """Write at `dest` the pack of the database file `db` under the header `info`, whose digest and size are
    `db`'s. Its mode is the umask's, as for any file a build writes: a pack is made to be shared (a CI folder
    its readers fetch from), and what it holds is the text of a commit's files, which the repository's readers
    have. The index it is imported into is private all the same."""
    header = info.to_json()
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT, 0o666), "wb") as raw:
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


class _Bounded:
    """The pack file as tarfile reads it, refusing any one read larger than READ_MAX: tarfile reads an extended
    (pax) header or a GNU long name whole into memory, whatever size its header claims."""

    def __init__(self, fh: IO[bytes], label: Path) -> None:
        self.fh, self.label = fh, label

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or size > READ_MAX:
            raise IndexCorrupt(
                f"{self.label} is not a kenning snapshot: a tar header of it claims {size} bytes"
            )
        return self.fh.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.fh.seek(offset, whence)

    def tell(self) -> int:
        return self.fh.tell()


@contextmanager
def _reading(path: Path) -> Iterator[tuple[tarfile.TarFile, int]]:
    """The pack at `path` as a tar archive, and the file's size; every way a file can fail to be one (missing,
    truncated, not a tar archive, a header tarfile cannot parse) is IndexCorrupt, one line."""
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            with tarfile.open(fileobj=_Bounded(fh, path), mode="r:") as tar:  # type: ignore[call-overload]
                yield tar, size
    except FileNotFoundError:
        raise IndexCorrupt(
            f"no snapshot at {path}", hint="check the path, or the configured snapshot_source"
        ) from None
    except IsADirectoryError:
        raise IndexCorrupt(f"{path} is a folder, not a snapshot") from None
    except (tarfile.TarError, OSError, EOFError, ValueError, UnicodeError, OverflowError) as exc:
        # ValueError and its kin: a number field tarfile cannot read; EOFError and ReadError: a file cut short
        raise IndexCorrupt(
            f"{path} is not a kenning snapshot, or is truncated ({exc.__class__.__name__}: {exc})",
            hint="fetch or export the snapshot again",
        ) from None


def _member(tar: tarfile.TarFile, size: int, name: str, path: Path, *, most: int) -> tarfile.TarInfo:
    """The next member, which must be the regular file `name` of at most `most` bytes lying whole inside the
    archive: a sparse member (GNU or pax) would expand to bytes the archive does not hold, and a member whose
    data runs past the end of the file is a truncated or lying pack. Refused before any byte is written."""
    member = tar.next()
    if member is None or member.name != name:
        raise IndexCorrupt(f"{path} is not a kenning snapshot: it does not hold {name} where one must be")
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or member.issparse():
        raise IndexCorrupt(
            f"{path} is not a kenning snapshot: its {name} is not a plain file "
            f"({'a sparse member' if member.issparse() or member.type == tarfile.GNUTYPE_SPARSE else 'type ' + repr(member.type)})",
            hint="use only snapshots exported by `kenning snapshot export`",
        )
    if member.size > most:
        raise IndexCorrupt(f"{path} is damaged: its {name} is {member.size} bytes, over {most}")
    if member.offset_data + member.size > size:
        raise IndexCorrupt(
            f"{path} is truncated or lying: its {name} claims {member.size} bytes, which the file "
            f"({size} bytes) does not hold",
            hint="fetch or export the snapshot again",
        )
    return member


def read_info(path: Path) -> PackInfo:
    """The header of the pack at `path`, read without touching its database."""
    with _reading(path) as (tar, size):
        member = _member(tar, size, HEADER, path, most=HEADER_MAX)
        fh = tar.extractfile(member)
        assert fh is not None
        raw = fh.read()
    return parse_info(raw, str(path))


def inspect(path: Path) -> PackInfo:
    """The header of the pack at `path`, with its database member checked as `unpack_db` will find it (a plain
    file of the declared size lying whole in the archive), reading no byte of the database."""
    info = read_info(path)
    if info.schema != schema.SCHEMA_VERSION:
        raise IndexMismatch(
            f"{path} holds an index of schema {info.schema}; this kenning reads schema {schema.SCHEMA_VERSION}",
            hint="export it again with this kenning's version, or use the version that made it",
        )
    with _reading(path) as (tar, size):
        _database(tar, size, path, info)
    return info


def _database(tar: tarfile.TarFile, size: int, path: Path, info: PackInfo) -> tarfile.TarInfo:
    _member(tar, size, HEADER, path, most=HEADER_MAX)
    member = _member(tar, size, DATABASE, path, most=info.db_bytes)
    if member.size != info.db_bytes:
        raise IndexCorrupt(f"{path} is damaged: its database is not the size its header says")
    return member


def unpack_db(path: Path, dest: Path) -> PackInfo:
    """Copy the pack's database to `dest` (made 0600), checking its digest, size and schema; IndexCorrupt or
    IndexMismatch, with `dest` removed, when any of them is not what it must be. What is written is at most the
    size the header declares, and only bytes the archive holds."""
    info = inspect(path)
    try:
        with _reading(path) as (tar, size):
            fh = tar.extractfile(_database(tar, size, path, info))
            assert fh is not None
            _copy_checked(fh, dest, info, path)
        check_schema(dest, str(path))
    except BaseException:
        dest.unlink(missing_ok=True)
        raise
    return info


def _copy_checked(fh: IO[bytes], dest: Path, info: PackInfo, label: Path) -> None:
    digest = hashlib.sha256()
    written = 0
    with open(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE), "wb") as out:
        for block in iter(lambda: fh.read(1 << 20), b""):
            written += len(block)
            if (
                written > info.db_bytes
            ):  # tarfile stops at the member's size; this says so where it is relied on
                raise IndexCorrupt(f"{label} is damaged: its database runs past the size its header says")
            digest.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    if written != info.db_bytes or digest.hexdigest() != info.db_sha256:
        raise IndexCorrupt(
            f"{label} is damaged: its database's checksum is not the one its header records",
            hint="fetch or export the snapshot again",
        )
