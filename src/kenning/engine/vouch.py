"""What a snapshot's database must say before it becomes this root's index (issue 32): a file selection this root
can use, metadata this kenning can read, and passages that are what git's blobs at the snapshot's commit say.

A pack's digest proves only that nobody changed it on the way; whoever made it chose what it says. So, in its
temporary place, before anything else is touched:

- its file selection has only known keys of the right types, compiles, and names ignore files that exist inside
  the root (a stored selection that fails would fail every later command; one naming a file outside the root
  would have the walk read it);
- the metadata later runs parse without a guard is well formed, and the base it records is the header's commit;
- every file it holds is in the commit's tree with the blob id git has there, and each file's passages are
  chunked again from that blob (with the pack's chunking settings) and compared, row for row, with the pack's.
  A file whose passages say something its blob does not is a forgery: the pack is refused. A file whose
  passages are made of its blob's text but cut otherwise (a chunker or grammar of another version) is taken out
  of the database before it is moved into place, so the index run that follows the import reads it again here.
  Either way no passage a blob does not vouch for is ever served. A file the root's own index already holds at
  the same blob with the same rows (cut with the same settings) is vouched for by it, so moving to a newer
  snapshot cuts only what changed.

Vectors cannot be checked without embedding every passage again, which is what a snapshot saves: a pack's
vectors are trusted as far as their dimensions (`kenning.pack.check`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Generator
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kenning import walk
from kenning.engine.base_commit import AT_COMMIT, BASE, BASE_FILES, OVERLAY
from kenning.engine.index import REMOVED_SINCE_PRUNE, index_settings
from kenning.engine.pool import Job, Settings, prepare_all, workers_for
from kenning.engine.scope import WALK_SKIPPED, WALK_SKIPPED_PATHS
from kenning.errors import IndexCorrupt, UsageError
from kenning.pack.check import db_uri
from kenning.store.sqlite.schema import SCHEMA_VERSION
from kenning.types import Selection
from kenning.walk.changes import git_output
from kenning.walk.commit import REGULAR_MODES, BlobReader

if TYPE_CHECKING:
    from kenning.engine import Engine
    from kenning.pack import PackInfo

__all__ = ["check_meta", "check_selection", "vouch_passages"]

_TUPLES = ("globs", "iglobs", "types", "types_not", "ignore_files")
_FLAGS = ("hidden", "no_ignore", "follow")
# what must equal this kenning's for the pack's passages to be cut again here exactly as they were cut there
_VERSIONS = ("chunker", "terms", "redact")
_PASSAGE = "start_line, end_line, heading, text, parts, ehash, sym_kind, sym_name, sym_scope, sym_signature, sym_doc, grp"


def check_selection(raw: Any, root: Path, label: str) -> Selection:
    """The pack's file selection as a Selection this root can use; IndexCorrupt naming what is wrong."""
    known = {f.name for f in fields(Selection)}

    def bad(what: str) -> IndexCorrupt:
        return IndexCorrupt(
            f"{label} is damaged: its file selection {what}",
            hint="export the snapshot again with this kenning, or index locally",
        )

    if not isinstance(raw, dict):
        raise bad("is not an object")
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise bad(f"has unknown keys ({', '.join(unknown)[:200]})")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _TUPLES:
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise bad(f"has a malformed {key!r} (a list of strings is expected)")
            values[key] = tuple(value)
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise bad(f"has a malformed {key!r} (true or false is expected)")
            values[key] = value
        elif key == "max_filesize":
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise bad("has a malformed 'max_filesize' (a number of bytes or null is expected)")
            values[key] = value
    selection = Selection(**values)
    top = os.path.realpath(root)
    for name in selection.ignore_files:
        where = os.path.realpath(os.path.join(top, name))
        if os.path.isabs(name) or not where.startswith(top + os.sep):
            raise IndexCorrupt(
                f"{label} names ignore file {name!r}, outside {root}: a snapshot's selection may only name "
                "files inside the root",
                hint="use only snapshots exported by `kenning snapshot export`",
            )
    try:
        walk.check_selection(root, selection)
    except UsageError as exc:
        raise IndexCorrupt(
            f"{label} was exported with a file selection this root cannot use: {exc.message}",
            hint="add the file it names, or export the snapshot again without it, or index locally",
        ) from None
    return selection


def check_meta(db: Path, info: PackInfo, label: str) -> None:
    """IndexCorrupt unless the metadata that later runs read without a guard is well formed and the base it
    records is the header's commit."""
    conn = sqlite3.connect(db_uri(db), uri=True)
    try:
        meta = {str(k): v for k, v in conn.execute("SELECT key, value FROM meta")}
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its metadata cannot be read ({exc})") from None
    finally:
        conn.close()

    def parsed(key: str) -> Any:
        try:
            return json.loads(meta[key])
        except (TypeError, ValueError, RecursionError):
            return None

    base = parsed(BASE)
    if not isinstance(base, dict) or base.get("commit") != info.commit:
        raise IndexCorrupt(f"{label} is damaged: its database is not of the commit its header names")

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def count(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    checks: dict[str, Callable[[Any], bool]] = {
        BASE_FILES: lambda v: isinstance(v, dict) and all(isinstance(b, str) for b in v.values()),
        WALK_SKIPPED_PATHS: lambda v: isinstance(v, list) and all(isinstance(p, str) for p in v),
        WALK_SKIPPED: count,
        REMOVED_SINCE_PRUNE: count,
        OVERLAY: count,
        "last_indexed": number,
    }
    for key, good in checks.items():
        if key in meta and not (isinstance(meta[key], str) and good(parsed(key))):
            raise IndexCorrupt(f"{label} is damaged: its metadata's {key!r} is malformed")
    if meta.get(AT_COMMIT, "") not in ("", info.commit) or meta.get("settings") != info.settings:
        raise IndexCorrupt(f"{label} is damaged: its metadata does not agree with its header")


def _settings(text: str) -> dict[str, str]:
    return dict(part.partition("=")[::2] for part in text.split(";") if "=" in part)


def _chunking(info: PackInfo, engine: Engine) -> Settings | None:
    """The settings the pack's passages were cut with, when this kenning cuts the same way; else None."""
    theirs, ours = _settings(info.settings), _settings(index_settings(engine.config))
    if any(theirs.get(key) != ours.get(key) for key in _VERSIONS):
        return None
    try:
        return Settings(int(theirs["max"]), int(theirs["overlap"]), theirs["symbols"] == "True")
    except (KeyError, ValueError):
        return None


def _commit_blobs(root: Path, commit: str, label: str) -> dict[str, tuple[str, int]]:
    """{path under the root: (blob id, size)} of the regular files of `commit`."""
    try:
        listing = git_output(root, "ls-tree", "-r", "-z", "-l", commit, "--", ".")
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        raise IndexCorrupt(
            f"git cannot list commit {commit[:12]} of {label} under {root}, so its passages cannot be checked",
            hint="fetch that commit (a complete clone), or index locally",
        ) from None
    out: dict[str, tuple[str, int]] = {}
    for record in listing.split("\0"):
        meta, _, rel = record.partition("\t")
        parts = meta.split()
        if len(parts) == 4 and parts[1] == "blob" and parts[0] in REGULAR_MODES and parts[3].isdigit():
            out[rel] = (parts[2], int(parts[3]))
    return out


def vouch_passages(engine: Engine, db: Path, info: PackInfo, label: str) -> int:
    """Check the passages of the database at `db` (a pack's, unpacked in its temporary place) against the blobs
    of its commit: IndexCorrupt when one says what its blob does not; files cut otherwise than this kenning
    cuts are taken out of `db`, to be read again by the next index run. How many were taken out."""
    tree = _commit_blobs(engine.root, info.commit, label)
    cut = _chunking(info, engine)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        reuse = cut is not None and _attach_known(conn, engine.db_path, info.settings)
        return _vouch(conn, engine, tree, cut, info, label, reuse)
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"{label} is damaged: its passages cannot be read ({exc})") from None
    finally:
        conn.close()


def _attach_known(conn: sqlite3.Connection, old: Path, settings: str) -> bool:
    """Attach the root's own index as `known` when its passages were cut as the pack's were (same settings, this
    schema): a file it holds at the same blob, with the same rows, is vouched for without being cut again. Its
    rows were cut here, or vouched for by the import that brought them."""
    if not old.is_file():
        return False
    try:
        # immutable: no -wal or -shm made beside an index a refused import must leave as it was (the writer
        # lock is held, so nothing writes it meanwhile)
        conn.execute("ATTACH DATABASE ? AS known", (db_uri(old) + "&immutable=1",))
    except sqlite3.DatabaseError:
        return False
    try:
        same = conn.execute("SELECT value FROM known.meta WHERE key = 'settings'").fetchone()
        version = conn.execute("SELECT max(version) FROM known.migrations").fetchone()
        if same and same[0] == settings and version and version[0] == SCHEMA_VERSION:
            return True
    except sqlite3.DatabaseError:
        pass  # an index that cannot be read vouches for nothing
    conn.execute("DETACH DATABASE known")
    return False


def _rows(
    conn: sqlite3.Connection, db: str, file_id: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A file's passages in order, and its definitions as (passage's index, kind, name, scope), sorted."""
    stored = conn.execute(
        f"SELECT {_PASSAGE} FROM {db}.passages WHERE file_id = ? ORDER BY id", (file_id,)
    ).fetchall()
    defined = conn.execute(
        f"SELECT p.rank, d.kind, d.name, d.scope FROM {db}.definitions d JOIN (SELECT id, "
        f"row_number() OVER (ORDER BY id) - 1 AS rank FROM {db}.passages WHERE file_id = ?) p "
        "ON p.id = d.passage_id",
        (file_id,),
    ).fetchall()
    # sorted by repr: a forged row may hold a blob where text belongs, and bytes and str do not compare
    return [tuple(r) for r in stored], sorted((tuple(d) for d in defined), key=repr)


def _known(conn: sqlite3.Connection, job: tuple[int, str, str | None, str, str]) -> bool:
    """Whether the root's own index holds this file at the same blob with the very rows the pack has."""
    file_id, path, sha, blob, kind = job
    try:
        row = conn.execute(
            "SELECT id FROM known.files WHERE path = ? AND blob_id = ? AND sha256 IS ? AND kind IS ? "
            "AND skip_reason IS NULL",
            (path, blob, sha, kind),
        ).fetchone()
        return row is not None and _rows(conn, "known", row[0]) == _rows(conn, "main", file_id)
    except sqlite3.DatabaseError:
        return False  # the root's index cannot say: the file is cut again


def _vouch(
    conn: sqlite3.Connection,
    engine: Engine,
    tree: dict[str, tuple[str, int]],
    cut: Settings | None,
    info: PackInfo,
    label: str,
    reuse: bool,
) -> int:
    orphans = conn.execute(
        "SELECT (SELECT count(*) FROM passages WHERE file_id NOT IN (SELECT id FROM files)) + "
        "(SELECT count(*) FROM definitions WHERE passage_id NOT IN (SELECT id FROM passages))"
    ).fetchone()[0]
    if orphans:
        raise IndexCorrupt(f"{label} is damaged: it holds {orphans} passages or definitions of no file")
    rows = conn.execute(
        "SELECT id, path, sha256, blob_id, kind, skip_reason FROM files ORDER BY path"
    ).fetchall()
    jobs: list[tuple[int, str, str | None, str, str]] = []  # (id, path, sha256, blob, kind) of indexed files
    for file_id, path, sha, blob, kind, skip in rows:
        known = tree.get(path) if isinstance(path, str) else None
        if known is None or blob != known[0]:
            said = (
                f"holds {str(path)[:200]!r}, which commit {info.commit[:12]} does not have"
                if known is None
                else f"says {path!r} is blob {str(blob)[:12]}, while commit {info.commit[:12]} has {known[0][:12]}"
            )
            raise IndexCorrupt(
                f"{label} is forged or damaged: it {said}",
                hint="use only snapshots exported by `kenning snapshot export`",
            )
        if skip is None:
            jobs.append((file_id, path, sha, blob, str(kind)))
        elif conn.execute("SELECT 1 FROM passages WHERE file_id = ? LIMIT 1", (file_id,)).fetchone():
            raise IndexCorrupt(
                f"{label} is damaged: it holds passages of {path!r}, a file it says it skipped"
            )
    if reuse:  # files the root's own index already holds as the pack does need no cutting again
        jobs = [job for job in jobs if not _known(conn, job)]
    again: list[tuple[int, str, str, list[str]]] = []  # files not cut as here: (id, path, blob, their texts)
    reader = BlobReader(engine.root)
    results = _prepared(jobs, tree, reader, cut, engine)
    try:
        for (file_id, path, sha, blob, kind), got in zip(jobs, results, strict=True):
            stored, defined = _rows(conn, "main", file_id)
            if (
                got is not None
                and got.sha == sha
                and got.skip is None
                and [tuple(r) for r in got.rows] == stored
                and sorted(got.defined, key=repr) == defined
                and walk.kind_of(path) is not None
                and str(walk.kind_of(path)[0]) == kind  # type: ignore[index]
            ):
                continue
            again.append((file_id, path, blob, [r[3] for r in stored]))
        for _, path, blob, texts in again:
            text = walk.screen(reader.read(blob))
            if any(not isinstance(t, str) or not isinstance(text, str) or t not in text for t in texts):
                raise IndexCorrupt(
                    f"{label} is forged: its passages of {path} say what that file does not say at commit "
                    f"{info.commit[:12]}",
                    hint="use only snapshots from a source you trust, exported by `kenning snapshot export`",
                )
    finally:
        results.close()
        reader.close()
    if again:
        conn.execute("BEGIN")
        for file_id, *_ in again:
            conn.execute(
                "DELETE FROM definitions WHERE passage_id IN (SELECT id FROM passages WHERE file_id = ?)",
                (file_id,),
            )
            conn.execute(
                "DELETE FROM passages WHERE file_id = ?", (file_id,)
            )  # its trigger takes the FTS rows
            conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
        conn.execute("COMMIT")
    if reuse:
        conn.execute("DETACH DATABASE known")
    return len(again)


def _prepared(
    jobs: list[tuple[int, str, str | None, str, str]],
    tree: dict[str, tuple[str, int]],
    reader: BlobReader,
    cut: Settings | None,
    engine: Engine,
) -> Generator[Any, None, None]:
    """Each indexed file's passages cut again from its blob, in order (None for each when the pack was cut by
    another chunker, whose passages cannot be reproduced here)."""
    if cut is None:
        yield from (None for _ in jobs)
        return
    kinds = [walk.kind_of(path) for _, path, *_ in jobs]
    work = [
        (path, kind, blob)
        for (_, path, _, blob, _), kind in zip(jobs, kinds, strict=True)
        if kind is not None
    ]
    size = sum(tree[path][1] for path, _, _ in work)
    results = prepare_all(
        (Job("", kind[0], kind[1], None, tree[path][1], reader.read(blob)) for path, kind, blob in work),
        cut,
        workers_for(size, engine.config.chunk_workers),
    )
    try:
        for kind in kinds:
            yield None if kind is None else next(results)
    finally:
        results.close()
