"""Index once, search everywhere (issue 22): a commit's index, built by CI, shipped as a file, with the
working tree's edits laid on top where it is searched.

CI runs `kenning snapshot export --commit HEAD -o X.kpack .`: the index is brought to that commit's files
(read from git's objects, `Engine.index(commit=...)`) and packed (`kenning.pack`). A machine that has no
index of a root yet, and a `snapshot_source`, starts from the newest snapshot whose commit is an ancestor of
HEAD (the merge-base side of the history, so the overlay is small): the pack's database becomes the local
index, and an ordinary index run then brings in every file that differs from that commit (committed since,
staged, unstaged, untracked, deleted). Files whose blob git vouches for are recognised by blob id and never
read; only the differing files are chunked and embedded here. The result is the index a full local run would
build (same files, same passages, same vectors), which `tests/test_snapshot.py` checks hit for hit.

Vectors the local index already made survive an import: those of passages the snapshot lacks are carried
over, so moving to a newer snapshot does not embed the local edits again.

On PostgreSQL the commit's index is simply there for every reader; packing is for the SQLite store.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kenning.engine.base_commit import BASE, base_of
from kenning.engine.index import IndexReport, Progress, publish
from kenning.engine.vouch import check_meta, check_selection, vouch_passages
from kenning.errors import IndexError_, IndexMismatch, KenningError, UsageError
from kenning.pack import PACK_SUFFIX, PackInfo, base_chain, read_info, unpack_chain, write_pack
from kenning.pack.check import check_database, db_uri
from kenning.pack.fetch import download, is_url
from kenning.store.layout import Manifest
from kenning.store.sqlite import SqliteStore
from kenning.store.sqlite.schema import SCHEMA_VERSION
from kenning.version import version
from kenning.walk.changes import git_output
from kenning.walk.commit import resolve_commit

if TYPE_CHECKING:
    from kenning.engine import Engine

__all__ = ["Candidate", "export", "find_snapshot", "import_snapshot", "seed"]

URL_HISTORY = 50  # commits of HEAD's first-parent history a {commit} URL is tried for, newest first
DOWNLOADS = "downloads"  # in the index home: where a snapshot fetched from a URL waits for its import
STAGING = ".import-"  # in the index home: the temporary folder a pack is unpacked and checked in
STALE_DOWNLOAD = 3600.0  # seconds without a write after which a file in DOWNLOADS is a dead download's


@dataclass(frozen=True)
class Candidate:
    """A snapshot a source offers: its header, and where it is (a local file, maybe downloaded)."""

    info: PackInfo
    path: Path
    where: str  # as the user would name it: the file, or the URL it came from


# -- exporting ----------------------------------------------------------------------------------------------
def export(
    engine: Engine,
    out: Path,
    *,
    commit: str | None = None,
    progress: Progress | None = None,
    against: Path | None = None,
) -> PackInfo:
    """Pack the index of `engine`'s root as the snapshot of a commit: with `commit`, the index is first
    brought to that commit's files (which costs only the blobs it does not hold yet). With `against`, a pack of an
    earlier commit, only what differs from it is packed (a delta, read with that pack beside it)."""
    if engine.location.shared:
        raise UsageError(
            "an index on PostgreSQL needs no export: every reader configured with the same store searches it",
            hint="leave out --store to export the local SQLite index",
        )
    if out.suffix != PACK_SUFFIX:
        raise UsageError(f"{out} does not end in {PACK_SUFFIX}", hint=f"name the output file *{PACK_SUFFIX}")
    if against is not None and against.resolve().parent != out.resolve().parent:
        # checked before any indexing: a typo must not cost a run
        raise UsageError(
            f"the delta's base {against} must be in the folder the delta is written to ({out.parent})",
            hint="a delta is read with its base beside it: export both into one folder",
        )
    if commit is not None:
        report = engine.index(commit=commit, progress=progress)
        if report.interrupted:
            raise KenningError("the index run was interrupted: nothing exported", hint="run the export again")
    with engine.writer.hold(wait=30.0, operation="export"):
        db = engine._connect(readonly=True)
        try:
            base = base_of(db.get_meta)
            counts = db.counts()
            settings = db.get_meta("settings") or ""
        finally:
            db.close()
        manifest = engine.manifest
        again = f"run `kenning snapshot export --commit HEAD -o {out} {engine.root}`"
        if base is None or manifest is None:
            raise UsageError(
                f"the index of {engine.root} was built from the working tree, not from a commit", hint=again
            )
        if not base.exact:
            raise UsageError(
                f"the index of {engine.root} no longer holds exactly commit {base.commit[:12]}'s files "
                "(files of the working tree were indexed into it since)",
                hint=again,
            )
        if commit is not None and resolve_commit(engine.root, commit).sha != base.commit:
            raise UsageError(
                f"another run changed the index of {engine.root} while {commit} was exported",
                hint="run the export again when it has finished",
            )
        if not manifest.lexical_only and counts["embedded"] < counts["passages"]:
            raise UsageError(
                f"only {counts['embedded']} of {counts['passages']} passages have a vector: a snapshot ships "
                "full quality or says it is lexical-only",
                hint=f"run `kenning index --commit {base.commit[:12]} {engine.root}` to finish the vectors",
            )
        info = PackInfo(
            commit=base.commit,
            committed=base.committed,
            subject=base.subject,
            model=engine.model_name,
            identity=engine.embedder.identity,
            remote=engine.embedder.remote,
            lexical_only=manifest.lexical_only,
            selection=manifest.to_json()["selection"],
            settings=settings,
            files=counts["files"],
            passages=counts["passages"],
            embedded=counts["embedded"],
            created=time.time(),
            schema=SCHEMA_VERSION,
            db_sha256="",  # filled in by write_pack, from the copy it packs
            db_bytes=0,
            kenning=version(),
        )
        return write_pack(engine.db_path, info, out, base=against)


# -- finding one --------------------------------------------------------------------------------------------
def find_snapshot(engine: Engine, source: str) -> tuple[Candidate | None, list[str]]:
    """The snapshot `source` offers for this root: the newest whose commit is an ancestor of HEAD (or HEAD
    itself). Notes say what was passed over and why."""
    notes: list[str] = []
    if source.startswith(("postgresql:", "postgres:")):
        raise UsageError(
            "a team's index on PostgreSQL is not imported: it is searched where it is, with your edits on top",
            hint="set snapshot_source (or store) to that URL in your config and search; import takes .kpack files",
        )
    if is_url(source):
        return _from_url(engine, source, notes), notes
    path = Path(os.path.expanduser(source)).resolve()  # a relative one is the command line's: the cwd's
    if path.is_dir():
        found: list[Candidate] = []
        for file in sorted(path.glob(f"*{PACK_SUFFIX}")):
            try:
                found.append(Candidate(read_info(file), file, str(file)))
            except IndexError_ as exc:
                notes.append(f"passed over {file.name}: {exc.message}")
    elif path.is_file():
        found = [Candidate(read_info(path), path, str(path))]
    else:
        raise UsageError(
            f"snapshot source {path} does not exist",
            hint="point snapshot_source at a .kpack file, a folder of them, or an http(s) URL",
        )
    usable = [c for c in found if _complete(c, notes) and _usable(engine, c, notes)]
    usable.sort(key=lambda c: (c.info.committed, c.info.created), reverse=True)
    return (usable[0] if usable else None), notes


def _complete(cand: Candidate, notes: list[str]) -> bool:
    """A whole pack, or a delta whose bases are all beside it."""
    try:
        base_chain(cand.path)
    except IndexError_ as exc:
        notes.append(f"passed over {cand.where}: {exc.message}")
        return False
    return True


def _usable(engine: Engine, cand: Candidate, notes: list[str]) -> bool:
    sha = cand.info.commit
    try:
        git_output(engine.root, "merge-base", "--is-ancestor", sha, "HEAD")
    except subprocess.CalledProcessError as exc:
        why = (
            "is not an ancestor of HEAD"
            if exc.returncode == 1
            else f"is not in the git history here (fetch it; is {engine.root} a clone of its repository?)"
        )
        notes.append(f"passed over {cand.where}: commit {sha[:12]} {why}")
        return False
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
        notes.append(f"passed over {cand.where}: git cannot say whether {sha[:12]} is an ancestor of HEAD")
        return False
    return True


def _from_url(engine: Engine, source: str, notes: list[str]) -> Candidate | None:
    if "{commit}" not in source:
        urls = [source]
    else:
        try:
            history = git_output(
                engine.root, "rev-list", "--first-parent", f"-n{URL_HISTORY}", "HEAD"
            ).split()
        except (OSError, subprocess.SubprocessError, UnicodeDecodeError):
            raise UsageError(
                f"{engine.root} has no git history to look up snapshots by commit",
                hint="run it in a git clone, or point snapshot_source at one snapshot",
            ) from None
        urls = [source.replace("{commit}", sha) for sha in history]
    downloads = engine.home / DOWNLOADS
    _sweep(downloads)
    limit = engine.config.snapshot_timeout
    end = time.monotonic() + limit
    try:
        for url in urls:
            # one deadline for the whole look-up: each URL gets what is left of it
            left = max(end - time.monotonic(), 1e-3) if limit else 0.0
            target = download(url, downloads, deadline=left)
            if target is None:
                continue
            kept = False
            try:
                with _named(target, url):
                    cand = Candidate(read_info(target), target, url)
                if cand.info.delta:
                    notes.append(
                        f"passed over {url}: a delta, which needs its base beside it (serve whole packs)"
                    )
                elif _usable(engine, cand, notes):
                    kept = True
                    return cand
            finally:
                if not kept:
                    target.unlink(missing_ok=True)
        notes.append(f"no snapshot at {source} for the last {len(urls)} commits of HEAD")
        return None
    finally:
        _tidy(downloads)


def _sweep(downloads: Path) -> None:
    """Remove what a download killed before its end left (a live one writes at least every URL_TIMEOUT)."""
    if not downloads.is_dir():
        return
    old = time.time() - STALE_DOWNLOAD
    for leftover in downloads.glob(f"*{PACK_SUFFIX}"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < old:
                leftover.unlink()


def _tidy(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty: a download waiting for its import stays


# -- importing ----------------------------------------------------------------------------------------------
def import_snapshot(engine: Engine, cand: Candidate, *, progress: Progress | None = None) -> IndexReport:
    """Make `cand` the base of this root's index, then index the working tree's differences on top.

    The pack is unpacked and checked whole in a temporary folder of the index home (`kenning.pack.check`, then
    `kenning.engine.vouch`) before anything else is written: a pack refused at any step leaves the index the
    root had byte for byte, and no file behind. A pack fetched from a URL is removed either way."""
    try:
        with _named(cand.path, cand.where):
            where, again = _import(engine, cand)
    finally:
        if cand.path.parent == engine.home / DOWNLOADS:
            cand.path.unlink(missing_ok=True)  # fetched for this import: in the index now, or refused
            _tidy(cand.path.parent)
    report = engine.index(progress=progress)  # the overlay: the working tree's differences
    report.snapshot = where
    if again:
        report.notes.append(
            f"{again} file(s) of the snapshot were cut into passages otherwise than this kenning cuts them "
            "(another version's chunker or grammars), and were read again here"
        )
    return report


def _import(engine: Engine, cand: Candidate) -> tuple[str, int]:
    """Check the pack in a temporary folder, then move it into place as the index; (where it came from, how many
    of its files were taken out to be read again)."""
    info = cand.info
    if engine.location.shared:
        raise UsageError(
            "a snapshot is imported into the local SQLite index, not into a PostgreSQL store",
            hint="leave out --store (and unset KENNING_STORE) to import it",
        )
    _same_model(engine, info, cand.where)
    with engine.writer.hold(wait=30.0, operation="import"), _staging(engine.home) as staging:
        incoming = staging / "index.db"
        info = unpack_chain(cand.path, incoming)  # read again: the file may have changed since it was found
        _same_model(engine, info, cand.where)
        check_database(incoming, cand.where, identity=engine.embedder.identity, dim=engine.embedder.dim)
        selection = check_selection(info.selection, engine.root, cand.where)
        check_meta(incoming, info, cand.where)
        again = vouch_passages(engine, incoming, info, cand.where)
        # checked: from here on the index is replaced
        engine.close()
        engine.location.prepare(
            engine.embedder.slug, rebuild=False, repair_manifest=engine.manifest_error is not None
        )
        _carry_vectors(engine.db_path, incoming, engine.embedder.identity)
        for old in engine.directory.iterdir():
            if old.name.startswith(("index.db-", "vectors-", "lexicon-")) or old.name == "index.db":
                old.unlink()
        os.replace(incoming, engine.db_path)
        created = engine.manifest.created if engine.manifest else time.time()
        engine.location.write_manifest(
            Manifest(str(engine.root), engine.model_name, selection, created, lexical_only=info.lexical_only)
        )
        engine.reload_manifest()
        db = engine._connect()
        try:
            base = json.loads(db.get_meta(BASE) or "{}")
            record = {**base, "source": cand.where, "imported": time.time(), "remote": info.remote}
            db.set_meta(BASE, json.dumps(record))
            publish(engine.directory, db, engine.embedder.dim)
        finally:
            db.close()
    return cand.where, again


@contextlib.contextmanager
def _named(path: Path, where: str) -> Iterator[None]:
    """Errors about a downloaded pack name the URL it came from, not the temporary file it waits in."""
    try:
        yield
    except KenningError as exc:
        if where == str(path) or str(path) not in exc.message:
            raise
        raise type(exc)(exc.message.replace(str(path), where), hint=exc.hint) from None


def _same_model(engine: Engine, info: PackInfo, where: str) -> None:
    if info.identity != engine.embedder.identity:
        raise IndexMismatch(
            f"snapshot {where} was made with model {info.model!r} ({info.identity}); this index uses "
            f"{engine.model_name!r} ({engine.embedder.identity}): vectors of one model mean nothing to another",
            hint=f"search with that model (--model {info.model}, or model = {info.model!r} in your config)",
        )


@contextlib.contextmanager
def _staging(home: Path) -> Iterator[Path]:
    """A temporary folder in the index home (so its database is renamed into place, not copied), removed
    whatever happens; those of an import killed before its end are removed first (the writer lock is held)."""
    for leftover in home.glob(f"{STAGING}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(dir=home, prefix=STAGING))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _carry_vectors(old: Path, new: Path, identity: str) -> None:
    """Copy into the incoming database the vectors the old index made for passages the snapshot lacks (this
    machine's edits), so they are not embedded again."""
    if not old.exists():
        return
    try:  # the old index is brought to this kenning's schema first: its vectors' encoding may differ
        SqliteStore(old, identity=identity).close()
    except IndexError_:
        return  # an old index that cannot be opened has nothing to give
    conn = sqlite3.connect(new)
    try:
        conn.execute("ATTACH DATABASE ? AS old", (db_uri(old),))
    except sqlite3.DatabaseError:
        conn.close()
        return  # an old index that cannot be read has nothing to give
    try:
        conn.execute("BEGIN")
        conn.execute(
            "INSERT OR IGNORE INTO main.embeddings(ehash, vec) SELECT e.ehash, e.vec FROM old.embeddings e "
            "WHERE e.ehash NOT IN (SELECT ehash FROM main.embeddings) "
            "AND e.ehash IN (SELECT ehash FROM old.passages)"
        )
        conn.execute("COMMIT")
    except sqlite3.DatabaseError:
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def seed(engine: Engine, *, progress: Progress | None = None) -> tuple[IndexReport | None, list[str]]:
    """Start a root that has no index from its configured snapshot source, if it offers one."""
    source = engine.config.snapshot_source
    if not source or engine.location.shared or engine.exists():
        return None, []
    cand, notes = find_snapshot(engine, source)
    if cand is None:
        return None, notes
    return import_snapshot(engine, cand, progress=progress), notes
