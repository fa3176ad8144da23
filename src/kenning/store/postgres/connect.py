"""Connecting to the PostgreSQL server: the driver behind the `postgres` extra, the store URL and its masked
form, the schema an index lives in, and a server failure as a kenning error.

The URL is libpq's (`postgresql://user@host:port/database?sslmode=...`): credentials come from it or from
libpq's own sources (`PG*` variables, `~/.pgpass`, a service file), and TLS settings pass through as its query
parameters. No message, log line or status ever shows a password: `masked` takes it out of every text that
could hold one.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from kenning.config import masked_store
from kenning.errors import (
    IndexBusy,
    IndexCorrupt,
    IndexError_,
    IndexMissing,
    Interrupted,
    KenningError,
    UsageError,
)

if TYPE_CHECKING:
    import psycopg

INSTALL = "pip install 'kenning[postgres]'"
SCHEMES = ("postgresql", "postgres")
_SCHEMA_PREFIX = "kenning_"
_NAME = re.compile(r"[^a-z0-9_]+")
DEFAULT_CONNECT_TIMEOUT = 10


def is_server_store(store: str | None) -> bool:
    """Whether a `store` setting names a PostgreSQL server (anything else is refused by `check_store`)."""
    return bool(store) and urlsplit(str(store)).scheme in SCHEMES


def check_store(store: str) -> str:
    """The setting as given, once it is a URL this kenning can open; UsageError naming the forms it takes."""
    if not is_server_store(store):
        raise UsageError(
            f"store={masked(store)!r} is not a PostgreSQL URL",
            hint="use postgresql://[user@]host[:port]/database (or leave `store` unset for the local index)",
        )
    return store


def driver() -> tuple[ModuleType, Callable[..., Any]]:
    """(psycopg, pgvector's register_vector): IndexError_ with the pip command when the extra is missing."""
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise IndexError_(
            f"a PostgreSQL store needs the `postgres` extra, which is not installed ({exc.name} is missing)",
            hint=f"run `{INSTALL}`",
        ) from None
    return psycopg, register_vector


def masked(text: str, url: str | None = None) -> str:
    """`text` with every password in it replaced by ***: the URL's (user:password@, password=...) and, when
    `url` is given, that URL's password wherever it appears (a driver may quote it back)."""
    out = masked_store(text)
    if url:
        secret = urlsplit(url).password
        if secret:
            out = out.replace(secret, "***")
        for key, value in parse_qsl(urlsplit(url).query):
            if key.lower() == "password" and value:
                out = out.replace(value, "***")
    return out


def describe(url: str) -> str:
    """The URL as shown to people: no password, and of its query parameters only host, port and TLS ones."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user = quote(parts.username or "", safe="")
        host = netloc.rsplit("@", 1)[1]
        netloc = f"{user}:***@{host}"
    kept = [(k, v) for k, v in parse_qsl(parts.query) if k.startswith("ssl") or k in ("host", "port")]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(kept, safe="/"), ""))


def index_name(root_name: str, given: str | None = None) -> str:
    """The name of a root's index on the server: `given` (the `store_name` setting) or the root folder's name,
    so that CI's /builds/x/repo and a reader's /home/me/repo find the same index."""
    name = (given or root_name or "root").strip()
    if not name:
        raise UsageError("store_name is empty", hint="name the index, or leave store_name unset")
    return name


def schema_name(name: str) -> str:
    """The PostgreSQL schema an index of this name lives in: `kenning_` and the name lower-cased, each run of
    other characters than a-z, 0-9 and _ made one _, shortened with a hash to PostgreSQL's 63 bytes."""
    slug = _NAME.sub("_", name.lower()).strip("_") or "root"
    if slug == name and len(slug) <= 55:
        return _SCHEMA_PREFIX + slug
    # another spelling of the same slug ("My-Repo", "my_repo") must not share an index
    return f"{_SCHEMA_PREFIX}{slug[:45]}_{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def lock_key(schema: str) -> int:
    """The advisory-lock key of an index: a signed 64-bit number from its schema's name."""
    return int.from_bytes(hashlib.blake2b(schema.encode(), digest_size=8).digest(), "big", signed=True)


def connect(url: str, *, purpose: str, readonly: bool = False) -> psycopg.Connection[Any]:
    """An autocommit connection (the store begins its transactions itself), its failure a kenning error."""
    pg, _ = driver()
    options: dict[str, Any] = {"autocommit": True, "application_name": f"kenning {purpose}"[:63]}
    parts = urlsplit(url)
    if "connect_timeout" not in parts.query:
        options["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT
    try:
        conn = pg.connect(url, **options)
    except pg.ProgrammingError as exc:  # refused before connecting: a misspelt parameter (`sslmod=`)
        raise UsageError(
            f"the store URL {describe(url)} is not valid: {masked(str(exc).strip(), url)}",
            hint="fix it in `store`, $KENNING_STORE or --store",
        ) from None
    except pg.Error as exc:
        raise server_error(exc, url) from None
    try:
        if readonly:
            conn.execute("SET default_transaction_read_only = on")
        conn.execute("SET statement_timeout = 0")
    except pg.Error as exc:
        conn.close()
        raise server_error(exc, url) from None
    return cast("psycopg.Connection[Any]", conn)


def server_error(exc: Exception, url: str) -> KenningError:
    """The kenning error a server failure means, its text masked; a bug (a bad statement) is re-raised."""
    import psycopg
    from psycopg import errors as e

    where = describe(url)
    text = masked(" ".join(str(exc).split()), url)
    if isinstance(exc, e.InsufficientPrivilege):
        return IndexError_(
            f"the PostgreSQL server at {where} refused kenning ({text})",
            hint="a reader needs SELECT on the index's schema; `kenning index` needs to create and write it",
        )
    if isinstance(exc, e.QueryCanceled):
        # no statement of kenning's has a timeout (statement_timeout 0, lock waits end in LockNotAvailable): a
        # cancel came from the server's side (pg_cancel_backend, an administrator, a shutdown)
        return Interrupted(
            f"the PostgreSQL server at {where} cancelled kenning's statement ({text})",
            hint="finished work is kept; run the command again, and ask the server's administrator if it recurs",
        )
    if isinstance(exc, e.LockNotAvailable | e.DeadlockDetected | e.SerializationFailure):
        return IndexBusy(
            f"the index at {where} stayed locked by another connection ({text})",
            hint="try again when the other kenning process is done",
        )
    if isinstance(exc, e.UndefinedTable | e.UndefinedColumn | e.UndefinedObject | e.InvalidSchemaName):
        return IndexCorrupt(
            f"the index at {where} is damaged ({text})",
            hint="run `kenning index --rebuild` to build it again, or `kenning index --drop` to delete it",
        )
    if isinstance(exc, e.InvalidCatalogName):
        return IndexMissing(
            f"the PostgreSQL server at {where} has no such database ({text})",
            hint="create the database (createdb), or fix the URL in `store`",
        )
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return IndexError_(
            f"cannot reach the PostgreSQL server at {where} ({text})",
            hint="check the URL in `store` (or $KENNING_STORE, --store), that the server runs, and its credentials",
        )
    if isinstance(exc, psycopg.ProgrammingError | psycopg.DataError) and not isinstance(
        exc, e.InsufficientPrivilege
    ):
        raise exc  # a bad statement: the bug it is
    return IndexError_(f"the PostgreSQL server at {where} failed ({text})", hint="see the server's log")


class Connected:
    """The state the parts of the PostgreSQL store share, and its transactions."""

    url: str
    schema: str
    where: str
    conn: psycopg.Connection[Any]
    #: passages added in the open transaction and not yet sent (see `PostgresStore.add_passage_values`)
    _pending: list[Any]
    #: the vector snapshot's marker was set in the open transaction (once per transaction is enough)
    _behind: bool = False

    def _flush(self) -> None:
        """Send what is pending: before any read, and at the commit."""

    def _status(self) -> tuple[Any, Any]:
        from psycopg.pq import TransactionStatus

        return self.conn.info.transaction_status, TransactionStatus

    @contextmanager
    def _atomic(self, *, read_only: bool = False) -> Iterator[None]:
        """The block in the caller's transaction, or in one of its own when there is none."""
        status, kinds = self._status()
        if status != kinds.IDLE:
            yield
            return
        self.conn.execute("BEGIN READ ONLY" if read_only else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.conn.execute("ROLLBACK")
            raise
        finally:
            self._behind = False
        self.conn.execute("COMMIT")


# what may run while passages wait to be sent: more of them, the files they belong to, and a rollback (which
# drops them); anything else sends them first
_KEEPS_PENDING = frozenset({"add_passage_values", "_write_file", "touch_file", "rollback"})
_S = TypeVar("_S", bound=Connected)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def guarded(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Raise what a server failure inside `method` means as a kenning error (see `server_error`)."""

    sends_pending = method.__name__ not in _KEEPS_PENDING

    def guarded(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        import psycopg

        try:
            if sends_pending and self._pending:
                self._flush()  # a read, a delete, a commit sees every passage added before it
            return method(self, *args, **kwargs)
        except psycopg.Error as exc:
            raise server_error(exc, self.url) from exc

    functools.update_wrapper(guarded, method)
    return guarded
