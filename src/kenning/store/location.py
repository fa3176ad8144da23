"""Where one root's index lives, and how the Engine opens it: a folder of SQLite files beside the root (or under
`index_dir`), or a schema on a PostgreSQL server (`store = "postgresql://..."`).

The Engine asks its `Location` what it used to read off the disk: whether an index exists, its manifest, a
store for a model, whether this process may write it, its size, and how to delete it. Each backend answers in
its own terms; nothing above this module names a backend.

On a server the manifest (the root it was built from, its model, its file selection) is a row of the index's
own `meta` table, so every machine that opens the index reads the one its writer stored. One index holds one
model: a rebuild with another model replaces it (a second index name keeps both).
"""

from __future__ import annotations

import json
import os
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kenning.errors import IndexCorrupt, IndexError_, IndexMissing
from kenning.store.layout import (
    KEPT_BY_DROP,
    REBUILD_HINT,
    Manifest,
    index_home,
    parse_manifest,
    private_dir,
    read_manifest,
    write_manifest,
)
from kenning.store.lock import FileWriterLock, WriterLock

if TYPE_CHECKING:
    from kenning.config import Config
    from kenning.store.base import Store

__all__ = ["Location", "ServerLocation", "SqliteLocation", "open_location"]

MANIFEST_KEY = "manifest"


class Location(ABC):
    """One root's index, wherever it is kept."""

    #: a server index a team shares: a search reads it as it is and never writes it (only `kenning index` does)
    shared: bool = False
    writer: WriterLock

    @abstractmethod
    def describe(self) -> str:
        """Where the index is, for people: a folder, or the server's URL without its password and the schema."""

    @property
    def kind(self) -> str:
        """The backend's name (`kenning status` shows it)."""
        return "sqlite"

    @abstractmethod
    def read_manifest(self) -> Manifest | None:
        """The stored manifest, None when there is none; IndexCorrupt/IndexMismatch when it is unreadable."""

    @abstractmethod
    def write_manifest(self, manifest: Manifest) -> None: ...

    @abstractmethod
    def has_index(self, slug: str) -> bool:
        """Whether a store for this model's slug has been made (it may still be empty)."""

    @abstractmethod
    def connect(self, slug: str, identity: str, *, readonly: bool = False, immutable: bool = False) -> Store:
        """A store on this model's index. A writer (not `readonly`) holds `writer` and may migrate it."""

    @abstractmethod
    def open_reader(self, slug: str, identity: str) -> Store:
        """A reader's store, with the backend's fallbacks (see `SqliteLocation.open_reader`)."""

    def generation(self, slug: str) -> Any:
        """What changes when the index is deleted and made again under an open reader; None where a reader's
        connection follows that by itself (a server)."""
        return None

    @abstractmethod
    def writable(self, slug: str) -> bool:
        """Whether this process may write the index (a search refreshes only an index it may write)."""

    @abstractmethod
    def size_bytes(self, slug: str) -> int: ...

    @abstractmethod
    def other_models(self, slug: str) -> list[str]: ...

    @abstractmethod
    def prepare(self, slug: str, *, rebuild: bool, repair_manifest: bool) -> None:
        """Before a writer's run (holding the lock): delete this model's index when rebuilding, remove a
        manifest that cannot be read when repairing, and make what a store needs to be opened."""

    @abstractmethod
    def drop(self) -> bool:
        """Delete the whole index (holding the lock); False when there was none."""

    def close(self) -> None:  # noqa: B027 - a location holds nothing to release, unless it says otherwise
        """Release what the location holds open."""


class SqliteLocation(Location):
    """`<root>/.kenning/` (or under `index_dir`): a manifest, a writer lock file, a folder per model."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.writer = FileWriterLock(home)

    def describe(self) -> str:
        return str(self.home)

    def directory(self, slug: str) -> Path:
        return self.home / slug

    def db_path(self, slug: str) -> Path:
        return self.home / slug / "index.db"

    def read_manifest(self) -> Manifest | None:
        return read_manifest(self.home)

    def write_manifest(self, manifest: Manifest) -> None:
        write_manifest(self.home, manifest)

    def has_index(self, slug: str) -> bool:
        # exists, not is_file: a folder in its place is a damaged index to report, not a missing one
        return self.db_path(slug).exists()

    def connect(self, slug: str, identity: str, *, readonly: bool = False, immutable: bool = False) -> Store:
        from kenning.store.sqlite import SqliteStore

        return SqliteStore(self.db_path(slug), identity=identity, readonly=readonly, immutable=immutable)

    def open_reader(self, slug: str, identity: str) -> Store:
        try:
            return self.connect(slug, identity, readonly=True)
        except IndexMissing:
            if self.writer.active():
                raise  # a first run is creating it
            try:  # the run may have committed between the two looks
                return self.connect(slug, identity, readonly=True)
            except IndexMissing:
                pass
        except IndexError_ as exc:
            if type(exc) is not IndexError_ or os.access(self.directory(slug), os.W_OK):
                raise
            # a folder this user cannot write (another user's index, a read-only mount): SQLite cannot make the
            # file it shares with writers there, so it reads the database as a file nobody changes meanwhile
            return self.connect(slug, identity, readonly=True, immutable=True)
        # a database without its schema that nobody is writing: a first run that died, or a damaged file
        raise IndexCorrupt(
            f"the index at {self.directory(slug)} is damaged: its database holds no index, and no kenning "
            "process is writing it",
            hint=REBUILD_HINT,
        )

    def generation(self, slug: str) -> tuple[int, int] | None:
        # device and inode only: every commit changes the database's mtime, a rebuild or drop its inode
        try:
            st = self.db_path(slug).stat()
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def writable(self, slug: str) -> bool:
        lock = self.home / "writer.lock"
        return all(
            os.access(p, os.W_OK)
            for p in (self.home, self.directory(slug), self.db_path(slug), *([lock] if lock.exists() else []))
        )

    def size_bytes(self, slug: str) -> int:
        folder = self.directory(slug)
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) if folder.is_dir() else 0

    def other_models(self, slug: str) -> list[str]:
        if not self.home.exists():
            return []
        return sorted(
            p.name for p in self.home.iterdir() if p.is_dir() and p.name != slug and (p / "index.db").exists()
        )

    def prepare(self, slug: str, *, rebuild: bool, repair_manifest: bool) -> None:
        if repair_manifest:
            manifest_path = self.home / "kenning.json"
            if manifest_path.is_dir():
                shutil.rmtree(manifest_path)  # a folder in its place: nothing could write the manifest
        if rebuild and self.directory(slug).exists():
            shutil.rmtree(self.directory(slug))
        private_dir(self.directory(slug))

    def drop(self) -> bool:
        """The folder stays, with its lock (and .gitignore): a writer queued behind this one waits on that lock
        file, and deleting it would fail that writer, or let it lock a deleted file while another process
        locks a new one under the same name."""
        existed = False
        for child in self.home.iterdir():
            if child.name in KEPT_BY_DROP:
                continue
            existed = True
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        return existed


class ServerLocation(Location):
    """A schema on a PostgreSQL server, named from the index name (see `kenning.store.postgres.schema_name`)."""

    shared = True

    def __init__(self, url: str, name: str) -> None:
        from kenning.store.postgres import AdvisoryLock, schema_name
        from kenning.store.postgres.connect import driver

        driver()  # the `postgres` extra, or the pip command that installs it
        self.url = url
        self.name = name
        self.schema = schema_name(name)
        self.writer = AdvisoryLock(url, self.schema)

    @property
    def kind(self) -> str:
        return "postgres"

    def describe(self) -> str:
        from kenning.store.postgres import describe

        return f"{describe(self.url)} (index {self.name!r}, schema {self.schema})"

    def _raw(self, *, readonly: bool = True) -> Any:
        from kenning.store.postgres.connect import connect

        return connect(self.url, purpose="manifest", readonly=readonly)

    def read_manifest(self) -> Manifest | None:
        import psycopg

        from kenning.store.postgres import schema as pg_schema
        from kenning.store.postgres.connect import server_error

        conn = self._raw()
        try:
            if not pg_schema.exists(conn, self.schema):
                return None
            row = conn.execute(
                f"SELECT value FROM {pg_schema.quoted(self.schema)}.meta WHERE key = %s", (MANIFEST_KEY,)
            ).fetchone()
        except psycopg.Error as exc:
            raise server_error(exc, self.url) from exc
        finally:
            conn.close()
        return None if row is None else _manifest(str(row[0]), self.describe())

    def write_manifest(self, manifest: Manifest) -> None:
        import psycopg

        from kenning.store.postgres import schema as pg_schema
        from kenning.store.postgres.connect import server_error

        conn = self._raw(readonly=False)
        try:
            pg_schema.migrate(conn, self.schema, self.describe())
            conn.execute(
                f"INSERT INTO {pg_schema.quoted(self.schema)}.meta VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (MANIFEST_KEY, json.dumps(manifest.to_json())),
            )
        except psycopg.Error as exc:
            raise server_error(exc, self.url) from exc
        finally:
            conn.close()

    def has_index(self, slug: str) -> bool:
        return True  # the manifest is in the index's own schema: if it was read, the index is there

    def connect(self, slug: str, identity: str, *, readonly: bool = False, immutable: bool = False) -> Store:
        from kenning.store.postgres import PostgresStore

        return PostgresStore(self.url, self.schema, identity=identity, readonly=readonly)

    def open_reader(self, slug: str, identity: str) -> Store:
        return self.connect(slug, identity, readonly=True)

    def writable(self, slug: str) -> bool:
        return False  # a search never writes a shared index: only `kenning index` does

    def size_bytes(self, slug: str) -> int:
        import psycopg

        from kenning.store.postgres.connect import server_error

        conn = self._raw()
        try:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'S')",
                (self.schema,),
            ).fetchone()
        except psycopg.Error as exc:  # the server gone between connecting and asking: a line, not a traceback
            raise server_error(exc, self.url) from exc
        finally:
            conn.close()
        return int(row[0]) if row else 0

    def other_models(self, slug: str) -> list[str]:
        return []

    def prepare(self, slug: str, *, rebuild: bool, repair_manifest: bool) -> None:
        if rebuild or repair_manifest:
            self.drop()

    def drop(self) -> bool:
        import psycopg

        from kenning.store.postgres import schema as pg_schema
        from kenning.store.postgres.connect import server_error

        conn = self._raw(readonly=False)
        try:
            existed = (
                conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)).fetchone()
                is not None
            )
            if existed:
                conn.execute(f"DROP SCHEMA {pg_schema.quoted(self.schema)} CASCADE")
        except psycopg.Error as exc:
            raise server_error(exc, self.url) from exc
        finally:
            conn.close()
        return existed


def _manifest(raw: str, where: str) -> Manifest:
    label = f"the manifest of the index at {where}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise IndexCorrupt(f"{label} is damaged ({exc})", hint=REBUILD_HINT) from exc
    return parse_manifest(data, label)


def open_location(root: Path, config: Config) -> Location:
    """The location of `root`'s index under these settings: the configured server's, else the local folder. A
    `snapshot_source` on PostgreSQL names a server too: a team's index there is its commit's snapshot, searched
    where it is with this machine's edits on top (kenning.engine.overlay), never copied."""
    source = config.snapshot_source or ""
    url = config.store or (source if source.startswith(("postgresql:", "postgres:")) else None)
    if url:
        from kenning.store.postgres import check_store, index_name

        return ServerLocation(check_store(url), index_name(root.name, config.store_name))
    return SqliteLocation(index_home(root, config.index_dir))
