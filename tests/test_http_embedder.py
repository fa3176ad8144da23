"""The OpenAI-compatible embedder against a real HTTP server on loopback: batching, requests kept in flight by
the index run, retries with backoff, kept connections, and one clear error for each way an endpoint fails."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import make_tree, run_cli
from embed_server import Behaviour, embedding_server
from kenning.config import Config
from kenning.embed import create_embedder
from kenning.embed.hashing import HashEmbedder
from kenning.embed.http import OpenAIEmbedder
from kenning.engine import Engine
from kenning.errors import ConfigError, EmbedderError


def embedder(url: str, **options: object) -> OpenAIEmbedder:
    settings: dict[str, object] = {"dim": 64, "backoff": 0.01, "config_name": "gpu", **options}
    return OpenAIEmbedder("test-model", url=url, **settings)  # type: ignore[arg-type]


def texts(n: int) -> list[str]:
    return [f"passage {i} about retry number {i % 7} and backoff {i * 13}" for i in range(n)]


def test_batches_of_batch_size_come_back_in_order() -> None:
    behaviour = Behaviour()
    with embedding_server(behaviour) as url:
        got = embedder(url, batch_size=8).embed_batch(texts(50))
    assert [s.inputs for s in behaviour.seen] == [8] * 6 + [2]
    # the server answers each batch's rows in reverse: the rows must still line up with the texts
    np.testing.assert_allclose(got, HashEmbedder().embed_batch(texts(50)), atol=1e-6)


@pytest.mark.parametrize("refuse_base64", [False, True], ids=["base64", "lists"])
def test_vectors_come_as_base64_or_as_lists_from_a_server_that_refuses_it(refuse_base64: bool) -> None:
    behaviour = Behaviour(refuse_base64=refuse_base64)
    with embedding_server(behaviour) as url:
        e = embedder(url, batch_size=4)
        got = np.concatenate([e.embed_batch(texts(8)), e.embed_batch(texts(3))])
    np.testing.assert_allclose(got, HashEmbedder().embed_batch(texts(8) + texts(3)), atol=1e-6)
    asked = [s.encoding for s in behaviour.seen]
    # refused once, at the first request: every later one asks for lists at once
    assert asked == (["base64", "float", "float", "float"] if refuse_base64 else ["base64"] * 3)


def test_one_connection_is_kept_across_requests() -> None:
    behaviour = Behaviour()
    with embedding_server(behaviour) as url:
        e = embedder(url, batch_size=4)
        for _ in range(3):
            e.embed_batch(texts(8))
    assert len(behaviour.seen) == 6
    assert len({s.port for s in behaviour.seen}) == 1


def test_busy_and_failing_answers_are_retried() -> None:
    behaviour = Behaviour(script=[429, 503, "drop", 502])
    with embedding_server(behaviour) as url:
        e = embedder(url, batch_size=16)
        e.embed_batch(texts(4))  # a first answer: from now on a lost connection is worth another try
        got = e.embed_batch(texts(16))
    np.testing.assert_allclose(got, HashEmbedder().embed_batch(texts(16)), atol=1e-6)
    # 429, 503, a dropped connection (reopened at once), 502, then the answer; and the second call's one request
    assert len(behaviour.seen) == 5 + 1


def test_retries_end_with_one_clear_error() -> None:
    behaviour = Behaviour(script=[503] * 10)
    with embedding_server(behaviour) as url, pytest.raises(EmbedderError) as caught:
        embedder(url, retries=2).embed_batch(texts(3))
    assert len(behaviour.seen) == 3
    assert "failed after 3 attempts: HTTP 503" in str(caught.value)
    assert "[embedders.gpu]" in str(caught.value)


def test_refused_credentials_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_KEY", "s3cret-key")
    behaviour = Behaviour(script=[401])
    with embedding_server(behaviour) as url, pytest.raises(EmbedderError) as caught:
        embedder(url, api_key_env="GPU_KEY").embed_batch(texts(3))
    assert len(behaviour.seen) == 1 and behaviour.seen[0].authorization == "Bearer s3cret-key"
    assert "HTTP 401" in str(caught.value) and "$GPU_KEY" in str(caught.value)
    assert "s3cret-key" not in str(caught.value)


def test_wrong_dimension_names_the_setting_to_change() -> None:
    with embedding_server(Behaviour(dim=12)) as url, pytest.raises(EmbedderError) as caught:
        embedder(url, dim=8).embed_batch(texts(2))
    assert "returns 12-dimensional vectors" in str(caught.value)
    assert "set dim = 12 in [embedders.gpu]" in str(caught.value)


def test_unreachable_endpoint_fails_at_once_without_retrying() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(EmbedderError) as caught:
        # were a refused first contact retried, the first wait alone would take 5 s
        embedder(f"http://127.0.0.1:{port}", backoff=10.0).embed_batch(texts(2))
    assert time.monotonic() - started < 5
    assert "cannot reach the embedding endpoint" in str(caught.value)


def test_password_in_the_url_is_never_shown() -> None:
    e = embedder("https://user:hunter2@embed.example:8443/v1")
    assert e.url == "https://embed.example:8443/v1/embeddings"
    assert "hunter2" not in e.url


@pytest.mark.parametrize(
    "options",
    [{"concurrency": 0}, {"batch_size": 0}, {"retries": -1}, {"timeout": 0}, {"url": "ftp://x/"}],
)
def test_unusable_settings_are_refused(options: dict[str, object]) -> None:
    settings = {"url": "http://127.0.0.1:9", **options}
    with pytest.raises(ConfigError):
        embedder(**settings)  # type: ignore[arg-type]


def remote_config(url: str, index_dir: Path, **table: object) -> Config:
    tables = {"gpu": {"provider": "openai", "model": "test-model", "url": url, "dim": 64, **table}}
    return Config(model="gpu", allow_remote=True, embedders=tables, index_dir=str(index_dir))


def test_index_run_keeps_several_batches_in_flight(tmp_path: Path) -> None:
    """The index run hands a server `concurrency` batches at once: the server holds the first three requests
    until all three are in flight, which never happens if they are sent one after another."""
    files = {
        f"notes/n{i:03}.md": f"# Note {i}\n\nUploads retry {i} times with backoff {i * 3}.\n"
        for i in range(200)
    }
    root = make_tree(tmp_path / "ws", files)
    behaviour = Behaviour(gather=3)
    with embedding_server(behaviour) as url:
        config = remote_config(url, tmp_path / "idx", concurrency=3, batch_size=64)
        engine = Engine(root, config=config, embedder=create_embedder("gpu", config))
        try:
            report = engine.index()
            [result] = engine.search("uploads retry 17 times", mode="semantic", limit=3)
        finally:
            engine.close()
    assert not behaviour.gathered_in_vain and behaviour.most_in_flight >= 3
    assert report.embedded == 200
    assert result.coverage == 1.0 and result.hits[0].path == "notes/n017.md"


def user_config(home: Path, url: str) -> dict[str, str]:
    """The environment of a CLI run whose user config opts in to the server as model `gpu`."""
    folder = home / "xdg" / "kenning"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(
        f'allow_remote = true\n[embedders.gpu]\nprovider = "openai"\nurl = "{url}"\ndim = 64\nbackoff = 0.01\n'
    )
    return {"XDG_CONFIG_HOME": str(home / "xdg"), "KENNING_MODEL": "gpu"}


def test_index_through_the_cli_with_a_server(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path / "ws", {"a.md": "# Retries\n\nFailed uploads are retried.\n", "b.md": "Unrelated.\n"}
    )
    behaviour = Behaviour(script=[503])
    with embedding_server(behaviour) as url:
        env = user_config(tmp_path, url)
        # the first contact is answered (a 503): a server that answers is busy, not absent, and is retried
        indexed = run_cli("index", str(root), cwd=tmp_path, env=env)
        found = run_cli("search", "--semantic", "failed uploads retried", str(root), cwd=tmp_path, env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert found.returncode == 0 and found.stdout.startswith("a.md:"), found.stdout + found.stderr


def test_cli_says_in_one_line_what_is_wrong_with_the_endpoint(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws", {"a.md": "# Retries\n\nFailed uploads are retried.\n"})
    with embedding_server(Behaviour(dim=32)) as url:
        env = user_config(tmp_path, url)
        out = run_cli("index", str(root), cwd=tmp_path, env=env)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "set dim = 32 in [embedders.gpu]" in out.stderr


def test_a_request_too_large_names_batch_size_and_is_not_retried() -> None:
    behaviour = Behaviour(script=[413])
    with embedding_server(behaviour) as url, pytest.raises(EmbedderError) as caught:
        embedder(url, batch_size=8).embed_batch(texts(8))
    assert len(behaviour.seen) == 1
    assert "HTTP 413" in str(caught.value) and "lower `batch_size` in [embedders.gpu]" in str(caught.value)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0.5", 0.5), (None, None), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)
def test_retry_after_is_read_as_seconds_or_as_a_date(header: str | None, seconds: float | None) -> None:
    from kenning.embed.http import _retry_after

    assert _retry_after(header) == seconds


def test_a_first_request_that_times_out_names_timeout_not_url() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(EmbedderError) as caught:
            embedder(url, timeout=0.3).embed_batch(texts(2))
    assert "did not answer within 0.3 s" in str(caught.value)
    assert "raise `timeout`" in str(caught.value)
