"""WEB PAGE TEST: the daemon's status page in a real headless Chromium.

Debian's `chromium` (/usr/bin/chromium) driven by Playwright's Python API, against a real `kenning serve` in a
temp HOME and XDG_RUNTIME_DIR, with the deterministic hash embedder. Skipped when chromium is missing, except
where CI is set: there a missing browser fails (`.ci/run` installs it).

Covers: the token (401 without it, for plain requests and for the browser; the cookie hand-over), the roots and
their coverage, a search showing `path:start-end` hits with escaped text, a rebuild followed to its end with a
progress bar that moves, a double click and two concurrent requests starting one job, cancelling a job, and a
clean exit on SIGTERM. A screenshot lands in /tmp/kenning-web.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from embed_server import Behaviour, embedding_server
from kenning.daemon.paths import runtime_dir

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = "/tmp/kenning-web.png"
FILES = (
    300  # a rebuild is held mid-way by the embedding server (`Behaviour.hold_after`), however fast it runs
)
NEEDLE = "quetzalcoatl"  # a word only the files written for the search checks contain
HOSTILE = "x<i>tag<b>.txt"  # markup in a file name and its text must show as text


def _need_chromium() -> None:
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must install Debian's chromium ({CHROMIUM} is missing; .ci/run installs it)")
    pytest.skip(f"{CHROMIUM} is missing: `apt-get install chromium` to run the web page test")


def _make_tree(root: Path) -> None:
    for i in range(FILES):
        folder = root / f"pkg{i % 30:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        if i % 2:
            body = "".join(
                f'def step_{i}_{j}(x):\n    """Scale value {j} in module {i}."""\n    return x * {j} + {i}\n\n\n'
                for j in range(12)
            )
            (folder / f"mod{i:04d}.py").write_text(body)
        else:
            body = "".join(
                f"Note {i}, part {j}: the uploader retries failed transfers with backoff.\n"
                "Cached tokens expire after an hour.\n\n"
                for j in range(12)
            )
            (folder / f"note{i:04d}.txt").write_text(body)
    (root / "docs").mkdir()
    (root / "docs" / "feathers.md").write_text(
        f"# Feathered serpent\n\nThe {NEEDLE} appears in the retry scheduler's comments.\n"
    )
    (root / "docs" / HOSTILE).write_text(
        f'{NEEDLE} markup: <img src=x onerror="window.__pwned = 1"> <b>bold</b> & <script>x()</script>\n'
    )


@dataclass
class Served:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path
    #: the embedding server the daemon's model is: a test holds a rebuild's semantic pass there
    embedder: Behaviour

    def request(self, path: str, *, data: Any = None, token: bool = True) -> tuple[int, Any]:
        """A plain HTTP request (no browser); returns (status, JSON body)."""
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = None if data is None else json.dumps(data).encode()
        req = urllib.request.Request(self.url + path, data=body, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as response:
                return response.status, _body(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _body(exc.read())


def _body(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(
            "utf-8", "replace"
        )  # a 500 from the framework is plain text: keep it for the message


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    _need_chromium()
    base = Path(tempfile.mkdtemp(prefix="kw", dir="/tmp"))  # short: the daemon's AF_UNIX socket lives here
    proc: subprocess.Popen[bytes] | None = None
    behaviour = Behaviour()
    stack = contextlib.ExitStack()
    try:
        embed_url = stack.enter_context(embedding_server(behaviour))
        home, runtime, root = base / "home", base / "run", base / "tree"
        (home / ".config" / "kenning").mkdir(parents=True)
        # the hash embedder's vectors from a server, one request at a time, so a test can stop a run between two
        (home / ".config" / "kenning" / "config.toml").write_text(
            f'allow_remote = true\n[embedders.gpu]\nprovider = "openai"\nurl = "{embed_url}"\ndim = 64\n'
            "concurrency = 1\n"
        )
        runtime.mkdir(mode=0o700)
        _make_tree(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KENNING_", "XDG_"))}
        env.update(HOME=str(home), XDG_RUNTIME_DIR=str(runtime), KENNING_MODEL="gpu")
        indexed = subprocess.run(
            [sys.executable, "-m", "kenning", "index", str(root)],
            env={**env, "KENNING_MODE": "direct"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert indexed.returncode == 0, indexed.stderr
        log = base / "serve.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kenning", "serve", str(root), "--listen", "127.0.0.1:0"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        info_file = Path(runtime_dir(env, create=False)) / "daemon.json"
        token_file = home / ".local" / "state" / "kenning" / "daemon" / "token"
        deadline = time.monotonic() + 30
        served: Served | None = None
        while served is None:
            assert proc.poll() is None, f"kenning serve exited with {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"kenning serve did not answer in 30 s:\n{log.read_text()}"
            if info_file.exists() and token_file.exists():
                port = json.loads(info_file.read_text())["port"]
                candidate = Served(
                    f"http://127.0.0.1:{port}", token_file.read_text().strip(), root, proc, log, behaviour
                )
                try:
                    if candidate.request("/status")[0] == 200:
                        served = candidate
                except OSError:
                    pass  # written before the server listens: not answering yet
            if served is None:
                time.sleep(0.05)
        yield served
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        stack.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, served: Served) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(20_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _open(page: Page, served: Served) -> None:
    response = page.goto(f"{served.url}/?token={served.token}")
    assert response is not None and response.status == 200
    assert page.url == f"{served.url}/", "the token must leave the address bar"
    page.locator(f'[data-testid="root"][data-root="{served.root}"]').wait_for()


def _root(page: Page, served: Served) -> Locator:
    return page.locator(f'[data-testid="root"][data-root="{served.root}"]')


def test_without_the_token_nothing_is_served(served: Served, browser: Browser) -> None:
    for path in ("/", "/status", "/static/app.js", "/api/search?root=x&q=y"):
        status, body = served.request(path, token=False)
        assert status == 401, path
        assert "token" in body["error"]
    assert served.request("/api/rebuild", data={"root": str(served.root)}, token=False)[0] == 401
    assert served.request("/?token=not-the-token", token=False)[0] == 401

    context = browser.new_context()
    try:
        page = context.new_page()
        response = page.goto(f"{served.url}/")
        assert response is not None and response.status == 401
        assert page.locator('[data-testid="root"]').count() == 0
        text = page.locator("body").inner_text()
        assert "missing or wrong token" in text
        assert str(served.root) not in text
        response = page.goto(f"{served.url}/?token=not-the-token")
        assert response is not None and response.status == 401
        assert context.cookies() == [], "a wrong token must not earn a cookie"
    finally:
        context.close()


def test_page_shows_roots_and_searches(page: Page, served: Served) -> None:
    _open(page, served)
    cookies = page.context.cookies()
    assert [(c["name"], c["httpOnly"], c["sameSite"]) for c in cookies] == [("kenning_token", True, "Strict")]
    assert served.token not in page.evaluate("document.cookie + JSON.stringify(localStorage)")

    status = served.request("/status")[1]
    root = _root(page, served)
    assert root.get_by_test_id("root-path").inner_text() == str(served.root)
    assert root.get_by_test_id("coverage").inner_text().startswith("100% embedded")
    assert root.get_by_test_id("files").inner_text() == f"{status['roots'][0]['files']:,}"
    assert re.search(r"ago|just now", root.get_by_test_id("last-indexed").inner_text())
    assert f"pid {status['pid']}" in page.get_by_test_id("daemon").inner_text()
    assert root.get_by_test_id("rebuild").is_enabled()
    assert page.locator("#search-root-field").is_hidden()  # one root: no root selector

    page.get_by_test_id("search-input").fill(f"{NEEDLE} retry")
    page.get_by_test_id("search-button").click()
    hits = page.get_by_test_id("hit")
    hits.first.wait_for()
    shown = hits.get_by_test_id("hit-loc").all_inner_texts()
    assert shown and all(re.fullmatch(r".+:\d+-\d+", s) for s in shown), shown
    query = urllib.parse.urlencode({"root": str(served.root), "q": f"{NEEDLE} retry", "k": 10})
    api = served.request(f"/api/search?{query}")[1]
    assert shown == [f"{h['path']}:{h['start_line']}-{h['end_line']}" for h in api["hits"]]
    assert any(s.startswith("docs/feathers.md:") for s in shown)
    first = hits.first
    assert re.search(r"score \d+\.\d{4}", first.inner_text())
    assert re.search(r"matched by (lexical|semantic|both)", first.inner_text())
    assert NEEDLE in first.locator("pre").inner_text()
    assert first.get_by_test_id("stale").count() == 0

    # markup in a file's name and text arrives as text: nothing is parsed, nothing runs
    hostile = page.locator(f'[data-testid="hit"][data-path="docs/{HOSTILE}"]')
    assert hostile.get_by_test_id("hit-loc").inner_text().startswith(f"docs/{HOSTILE}:")
    assert "<img src=x" in hostile.locator("pre").inner_text()
    assert page.locator("#hits img, #hits b, #hits i, #hits script").count() == 0
    assert page.evaluate("window.__pwned") is None
    page.screenshot(path=SCREENSHOT, full_page=True)  # the rebuild test replaces it with one showing a job


# Records what the root's job area showed, on every change, so the test sees the states and the progress bar's
# values even when they change between two of its own looks.
WATCH_JOB = """root => {
  window.__seen = [];
  const bar = root.querySelector('[data-testid="progress"]');
  const record = () => window.__seen.push({
    job: root.dataset.jobId,
    state: root.querySelector('[data-testid="job-state"]').textContent,
    value: bar.hasAttribute("value") ? bar.value : null,
    max: bar.max,
  });
  new MutationObserver(record).observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def test_rebuild_shows_progress_to_the_end_and_a_double_click_starts_one_job(
    page: Page, served: Served
) -> None:
    _open(page, served)
    root = _root(page, served)
    root.element_handle().evaluate(WATCH_JOB)
    posts: list[Any] = []
    page.on("response", lambda r: posts.append(r) if r.url.endswith("/api/rebuild") else None)

    # the rebuild's semantic pass is held after its first batch (two requests of 32 texts), so the page sees a
    # job part way through however fast this machine runs it; released once the bar shows it
    served.embedder.hold_after(2)
    started = time.monotonic()
    root.get_by_test_id("rebuild").dblclick()
    page.wait_for_function(
        "el => el.dataset.jobState === 'running' || el.dataset.jobState === 'queued'",
        arg=root.element_handle(),
    )
    job_id = root.get_attribute("data-job-id")
    assert job_id
    assert root.get_by_test_id("rebuild").is_disabled()
    assert root.get_by_test_id("cancel").is_visible()
    # the daemon's own guard, whatever the page does: asking again returns the job already running
    status, again = served.request("/api/rebuild", data={"root": str(served.root)})
    assert (status, again["started"], again["job"]["id"]) == (200, False, job_id)

    page.wait_for_function(
        "id => window.__seen.some(s => s.job === id && s.state === 'running' && s.value > 0 && s.value < s.max)",
        arg=job_id,
        timeout=60_000,
    )
    served.embedder.release()
    root.get_by_test_id("job-state").filter(has_text="succeeded").wait_for(timeout=30_000)
    took = time.monotonic() - started

    answers = [r.json() for r in posts]
    assert answers and {a["job"]["id"] for a in answers} == {job_id}
    assert [a["started"] for a in answers].count(True) == 1
    final = served.request(f"/api/jobs/{job_id}")[1]
    assert final["state"] == "succeeded" and final["summary"]["files"] == FILES + 2

    seen = [s for s in page.evaluate("window.__seen") if s["job"] == job_id]
    states = [s["state"] for s in seen]
    assert "running" in states and states[-1] == "succeeded", states
    running = [(s["value"], s["max"]) for s in seen if s["state"] == "running" and s["value"] is not None]
    advancing = {v for v, m in running if 0 < v < m}
    assert advancing, f"no progress seen between 0 and the total in {took:.1f} s: {running}"
    assert seen[-1]["value"] == seen[-1]["max"] > 0

    # the end: counts and coverage shown again, the buttons back to idle
    assert root.get_by_test_id("coverage").inner_text().startswith("100% embedded")
    page.wait_for_function(
        "([el, n]) => el.querySelector('[data-testid=\"files\"]').textContent === n",
        arg=[root.element_handle(), f"{FILES + 2:,}"],
    )
    assert "files" in root.get_by_test_id("job-text").inner_text()
    assert root.get_by_test_id("rebuild").is_enabled()
    assert root.get_by_test_id("cancel").is_hidden()

    page.get_by_test_id("search-input").fill("uploader retries backoff")
    page.get_by_test_id("search-button").click()
    page.get_by_test_id("hit").first.wait_for()
    page.screenshot(path=SCREENSHOT, full_page=True)


def test_two_requests_at_once_start_one_job_and_the_page_can_cancel_it(page: Page, served: Served) -> None:
    _open(page, served)
    served.embedder.hold_after(
        0
    )  # the job waits at its first embedding request until the page has cancelled it
    # two rebuild requests in flight together from the page's origin (two tabs, say): one job
    answers = page.evaluate(
        """root => Promise.all([1, 2].map(() => fetch("/api/rebuild", {
            method: "POST", credentials: "same-origin",
            headers: {"Content-Type": "application/json"}, body: JSON.stringify({root}),
        }).then(r => r.json())))""",
        str(served.root),
    )
    assert len({a["job"]["id"] for a in answers}) == 1, answers
    assert sorted(a["started"] for a in answers) == [False, True]
    job_id = answers[0]["job"]["id"]

    page.reload()  # the page picks up a job it did not start from /status
    root = _root(page, served)
    cancel = root.get_by_test_id("cancel")
    page.wait_for_function("([el, id]) => el.dataset.jobId === id", arg=[root.element_handle(), job_id])
    job = served.request(f"/api/jobs/{job_id}")[1]
    assert job["state"] in ("queued", "running"), f"the job ended before the page could cancel it: {job}"
    cancel.wait_for(state="visible")
    cancel.click()
    deadline = time.monotonic() + 30
    # the daemon has the click once the job is stopping, or already stopped: a job still in its lexical pass
    # checks for a cancel between files and can end between two polls, never seen "cancelling" (a CI run failed
    # so, its job "cancelled" in phase lexical)
    while (
        not (seen := served.request(f"/api/jobs/{job_id}")[1])["cancelling"] and seen["state"] != "cancelled"
    ):
        # the job as the daemon last saw it: ended by itself (its held request let go) or never asked to stop
        assert time.monotonic() < deadline, f"the daemon never heard the page's cancel: {seen}"
        time.sleep(0.05)
    served.embedder.release()
    root.get_by_test_id("job-state").filter(has_text="cancelled").wait_for(timeout=30_000)
    assert served.request(f"/api/jobs/{job_id}")[1]["state"] == "cancelled"
    assert root.get_by_test_id("rebuild").is_enabled()
    assert cancel.is_hidden()


def test_daemon_exits_cleanly_on_sigterm(served: Served) -> None:
    served.proc.send_signal(signal.SIGTERM)
    try:
        code = served.proc.wait(10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"kenning serve ignored SIGTERM for 10 s:\n{served.log.read_text()}")
    assert code == 0, served.log.read_text()
