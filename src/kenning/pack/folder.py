"""Packs as files in a folder: writing one (whole, or a delta of an earlier one beside it), reading one with the
packs it stands on, and keeping a folder of them small.

A delta (format 2, `kenning.pack.delta`) holds only what differs from an earlier pack, which its header names by
commit and database digest and which must lie beside it; reading it reads the whole chain.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from dataclasses import asdict
from pathlib import Path

from kenning.errors import IndexCorrupt, IndexError_, IndexMismatch, UsageError
from kenning.pack.archive import inspect, read_info, unpack_db, write_archive
from kenning.pack.check import db_uri
from kenning.pack.delta import apply_delta, write_delta
from kenning.pack.info import DATABASE, DELTA_FORMAT, PACK_SUFFIX, PackInfo
from kenning.walk.changes import sha256_file

__all__ = ["base_chain", "prune", "unpack_chain", "write_pack"]


def write_pack(db_path: Path, info: PackInfo, out: Path, *, base: Path | None = None) -> PackInfo:
    """Pack the database at `db_path` into `out` (written whole, then renamed into place): the header's
    digest and size are the copy's, filled in here. With `base` (a pack of an earlier commit), only what
    differs from it is packed: a delta (kenning.pack.delta), which needs that pack beside it to be read."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".kpack-") as tmp:
        copy = Path(tmp) / DATABASE
        conn = sqlite3.connect(db_uri(db_path), uri=True)
        try:
            conn.execute("VACUUM INTO ?", (str(copy),))
        finally:
            conn.close()
        if base is not None:
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
        info = PackInfo(**{**asdict(info), "db_sha256": sha256_file(copy), "db_bytes": copy.stat().st_size})
        staging = Path(tmp) / "pack"
        write_archive(copy, info, staging)
        staging.replace(out)
    return info


def unpack_chain(path: Path, dest: Path) -> PackInfo:
    """`unpack_db`, for a delta too: the whole pack at the bottom of its chain is unpacked to `dest`, then each
    delta applied to it in turn (`base_chain`). The disk it takes is what the headers declare, checked against
    the free space at `dest` before a byte is written."""
    chain = base_chain(path)
    declared = [inspect(link).db_bytes for link in chain]  # every member checked before any is written
    need = sum(declared) + max(declared[1:], default=0)  # the database, and one delta beside it at a time
    free = shutil.disk_usage(dest.parent).free
    if need > free:
        raise UsageError(
            f"snapshot {path} needs {need / 1e6:.1f} MB to unpack, and {free / 1e6:.1f} MB is free at {dest.parent}",
            hint="free some disk space, or unset snapshot_source to index locally",
        )
    whole, *deltas = chain
    try:
        unpack_db(whole, dest)
        for link in deltas:
            with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
                delta = Path(tmp) / DATABASE
                unpack_db(link, delta)
                apply_delta(dest, delta, str(link))
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


def prune(folder: Path, keep: int) -> list[Path]:
    """Delete all but the `keep` newest snapshots (by commit time) of a folder of them, keeping also the packs
    those deltas are read against; what was deleted."""
    if keep < 1:
        raise UsageError(f"--keep {keep} would delete every snapshot", hint="keep at least 1")
    if not folder.is_dir():
        raise UsageError(
            f"{folder} is not a folder of snapshots", hint="name the folder the .kpack files are in"
        )
    dated = []
    for file in folder.glob(f"*{PACK_SUFFIX}"):
        try:
            dated.append(((read_info(file).committed, file.stat().st_mtime), file))
        except IndexError_:
            continue  # not ours to judge: a damaged file is left for its owner
    dated.sort(reverse=True)
    needed: set[Path] = set()
    for _, file in dated[:keep]:  # a kept delta keeps the packs it is read against
        try:
            needed.update(base_chain(file))
        except IndexError_:
            needed.add(file)  # its base is gone already: it is kept, and says so when read
    gone = [file for _, file in dated if file not in needed]
    for file in gone:
        file.unlink()
    return gone
