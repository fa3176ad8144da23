// The kenning daemon's status page: roots and their freshness, rebuild jobs with live progress, and a search box.
//
// Rules kept throughout:
// - Everything shown comes from the daemon's JSON and reaches the DOM as text (textContent, setAttribute),
//   never as HTML, so a file name or a passage cannot inject markup.
// - The token is never seen here: opening /?token=... once traded it for an HttpOnly cookie, which every
//   same-origin fetch carries.
// - Polls are chained setTimeouts, not setInterval, so a slow daemon never gets overlapping requests.
"use strict";

const STATUS_EVERY_MS = 2000;
const JOB_EVERY_MS = 400;
const ACTIVE = new Set(["queued", "running"]);

const $ = (id) => document.getElementById(id);

/** A new element: props become attributes (or text/class/listeners), children are nodes or plain strings. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  node.append(...children); // strings are appended as text nodes, never parsed
  return node;
}

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** fetch + JSON, same-origin cookie included; a non-2xx answer throws HttpError with the daemon's message. */
async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store", ...options });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null; // an empty or non-JSON body: the status code is all we have
  }
  if (!response.ok) {
    const message = body && typeof body.error === "string" ? body.error : response.statusText;
    throw new HttpError(response.status, `${response.status}: ${message}`);
  }
  return body;
}

// ---- formatting --------------------------------------------------------------------------------------------

function bytes(n) {
  if (typeof n !== "number") return "?";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i += 1;
  }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function ago(epochSeconds) {
  if (typeof epochSeconds !== "number") return "never";
  const s = Date.now() / 1000 - epochSeconds;
  if (s < 5) return "just now";
  return `${duration(s)} ago`;
}

function percent(fraction) {
  if (typeof fraction !== "number") return "?";
  // floor, not round: 99.96% must not read as a complete index
  return `${Math.floor(fraction * 1000 + 1e-6) / 10}%`;
}

function count(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "?";
}

// ---- the daemon line ---------------------------------------------------------------------------------------

function showDaemon(status) {
  const memory = status.memory || {};
  const models = (status.models || []).join(", ") || "none loaded yet";
  $("daemon").textContent =
    `kenning ${status.version || "?"} · pid ${status.pid} · up ${duration(status.uptime || 0)} · ` +
    `memory ${bytes(memory.rss_bytes)} (peak ${bytes(memory.peak_rss_bytes)}) · models: ${models}` +
    (status.watch ? "" : " · watching off");
}

function showProblem(text) {
  const node = $("problem");
  node.textContent = text || "";
  node.hidden = !text;
}

// ---- roots -------------------------------------------------------------------------------------------------

const views = new Map(); // root path -> RootView
const finishedJobs = new Set(); // job ids seen in a final state: a late /status answer must not revive them

class RootView {
  constructor(root) {
    this.root = root;
    this.jobId = null;
    this.timer = null; // the pending job poll, while following a job
    this.posting = false;
    this.active = false;
    this.fields = {};
    const list = el("dl");
    const field = (label, key) => {
      const dd = el("dd", { "data-testid": key });
      list.append(el("dt", { text: label }), dd);
      this.fields[key] = dd;
    };
    field("Coverage", "coverage");
    field("Files", "files");
    field("Passages", "passages");
    field("Last indexed", "last-indexed");
    field("State", "state");
    field("Watcher", "watcher");
    field("Last error", "last-error");

    this.progress = el("progress", { "data-testid": "progress", "aria-label": `Rebuild progress of ${root}` });
    this.progress.hidden = true;
    this.jobText = el("span", { class: "job-text", "data-testid": "job-text" });
    this.jobState = el("strong", { class: "job-state", "data-testid": "job-state", role: "status" });
    this.note = el("span", { class: "note", "data-testid": "job-note" });
    this.rebuildButton = el("button", {
      type: "button",
      "data-testid": "rebuild",
      "aria-label": `Rebuild the index of ${root}`,
      text: "Rebuild",
      onclick: () => this.rebuild(),
    });
    this.cancelButton = el("button", {
      type: "button",
      "data-testid": "cancel",
      "aria-label": `Cancel the rebuild of ${root}`,
      text: "Cancel",
      onclick: () => this.cancel(),
    });
    this.cancelButton.hidden = true;

    this.node = el(
      "article",
      { class: "root", "data-testid": "root", "data-root": root },
      el("h3", { class: "root-path", "data-testid": "root-path", text: root }),
      list,
      el(
        "div",
        { class: "job", "data-testid": "job" },
        el("span", { class: "job-label", text: "Last job: " }),
        this.jobState,
        " ",
        this.jobText,
        this.progress,
      ),
      el("div", { class: "actions" }, this.rebuildButton, " ", this.cancelButton, " ", this.note),
    );
    this.showJob(null);
  }

  update(info) {
    const f = this.fields;
    if (info.indexed === false) {
      f.coverage.textContent = "not indexed";
    } else {
      f.coverage.textContent = `${percent(info.coverage)} embedded` + (info.model ? ` (model ${info.model})` : "");
    }
    f.files.textContent = count(info.files);
    f.passages.textContent = `${count(info.passages)} (${count(info.embedded)} embedded)`;
    f["last-indexed"].textContent = ago(info.last_indexed);
    if (typeof info.last_indexed === "number") {
      f["last-indexed"].title = new Date(info.last_indexed * 1000).toLocaleString();
    }
    const queue = info.queue || 0;
    f.state.textContent =
      `${info.state || "?"}; ${queue === 0 ? "nothing" : count(queue) + (queue === 1 ? " path" : " paths")} ` +
      `waiting to be re-indexed; ${count(info.refreshes || 0)} refreshes` +
      (info.last_refresh ? `, last ${ago(info.last_refresh)}` : "");
    f.watcher.replaceChildren(...watcherText(info.watcher));
    const error = info.last_error || info.error || "";
    f["last-error"].textContent = error || "none";
    f["last-error"].classList.toggle("error", Boolean(error));

    const job = info.job;
    // the job poll is the better source while we follow a job; /status only starts or resumes following
    if (job && !finishedJobs.has(job.id) && ACTIVE.has(job.state)) {
      this.follow(job);
    } else if (job && this.timer === null && !(finishedJobs.has(job.id) && ACTIVE.has(job.state))) {
      this.showJob(job);
    }
  }

  showJob(job) {
    this.active = Boolean(job && ACTIVE.has(job.state));
    this.node.dataset.jobId = job ? job.id : "";
    this.node.dataset.jobState = job ? job.state : "";
    if (!job) {
      this.jobState.textContent = "none";
      this.jobText.textContent = "";
      this.progress.hidden = true;
    } else {
      this.jobState.textContent = job.state;
      this.progress.hidden = false;
      if (job.total > 0) {
        this.progress.max = job.total;
        this.progress.value = Math.min(job.done, job.total);
      } else if (this.active) {
        this.progress.removeAttribute("value"); // no total yet: an indeterminate bar
      } else {
        this.progress.hidden = true;
      }
      this.jobText.textContent = jobText(job);
    }
    this.cancelButton.hidden = !this.active;
    this.cancelButton.disabled = Boolean(job && job.cancelling);
    this.rebuildButton.disabled = this.active || this.posting;
  }

  /** Poll the job until it ends; called again for the job already followed, it does nothing. */
  follow(job) {
    if (this.timer !== null && this.jobId === job.id) return; // the poll already shows newer numbers
    clearTimeout(this.timer);
    this.jobId = job.id;
    this.showJob(job);
    const id = job.id;
    const tick = async () => {
      let latest;
      try {
        latest = await api(`/api/jobs/${encodeURIComponent(id)}`);
        if (this.jobId !== id) return; // another job took over while this answer was on its way
      } catch (error) {
        if (this.jobId !== id) return;
        if (error instanceof HttpError && error.status === 404) {
          this.timer = null; // the daemon restarted and forgot it: /status tells what is true now
          this.note.textContent = `The job ${id} is gone (${error.message}).`;
          return;
        }
        this.note.textContent = `Cannot follow the job: ${error.message}. Retrying…`;
        this.timer = setTimeout(tick, STATUS_EVERY_MS);
        return;
      }
      this.note.textContent = "";
      this.showJob(latest);
      if (ACTIVE.has(latest.state)) {
        this.timer = setTimeout(tick, JOB_EVERY_MS);
      } else {
        finishedJobs.add(latest.id);
        this.timer = null;
        refreshStatus(); // show the new coverage and counts now, not up to 2 s later
      }
    };
    this.timer = setTimeout(tick, JOB_EVERY_MS);
  }

  async rebuild() {
    // disabled before the request leaves, so a double click sends one request; the daemon refuses to start
    // a second job on a root anyway and answers with the running one
    this.posting = true;
    this.rebuildButton.disabled = true;
    this.note.textContent = "";
    try {
      const answer = await api("/api/rebuild", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ root: this.root }),
      });
      if (!answer.started) this.note.textContent = `A rebuild (${answer.job.id}) was already running: following it.`;
      this.posting = false;
      this.follow(answer.job);
    } catch (error) {
      this.posting = false;
      this.note.textContent = `Rebuild refused: ${error.message}`;
      this.rebuildButton.disabled = this.active;
    }
  }

  async cancel() {
    if (!this.jobId) return;
    this.cancelButton.disabled = true;
    try {
      const job = await api(`/api/jobs/${encodeURIComponent(this.jobId)}/cancel`, { method: "POST" });
      this.note.textContent = "Cancelling…";
      this.showJob(job);
      this.follow(job);
    } catch (error) {
      this.cancelButton.disabled = false;
      this.note.textContent = `Cancel refused: ${error.message}`;
    }
  }
}

function jobText(job) {
  if (ACTIVE.has(job.state)) {
    const what = job.state === "queued" ? "waiting for the index's writer" : job.phase || "starting";
    const numbers = job.total > 0 ? ` ${count(job.done)}/${count(job.total)}` : "";
    return `${job.kind} ${job.id}: ${what}${numbers}${job.cancelling ? " (cancelling…)" : ""}`;
  }
  const took = job.finished && job.started ? ` in ${duration(job.finished - job.started)}` : "";
  const ended = job.finished ? `, ended ${ago(job.finished)}` : "";
  if (job.state === "succeeded") {
    const s = job.summary || {};
    return (
      `${job.kind} ${job.id}: ${count(s.files)} files, ${count(s.passages)} passages, ` +
      `${percent(s.coverage)} embedded${took}${ended}`
    );
  }
  if (job.state === "failed") return `${job.kind} ${job.id} failed${ended}: ${job.error || "no reason given"}`;
  return `${job.kind} ${job.id} ${job.state}${ended}`;
}

function watcherText(watcher) {
  if (!watcher) return ["not watching"];
  const parts = [
    `${watcher.state}; ${count(watcher.events || 0)} events in ${count(watcher.batches || 0)} batches` +
      (watcher.last_event ? `, last ${ago(watcher.last_event)}` : ""),
  ];
  if (watcher.error) {
    const retry = typeof watcher.retry_in === "number" ? `, retrying in ${duration(watcher.retry_in)}` : "";
    const times = watcher.errors ? ` (${count(watcher.errors)} errors)` : "";
    parts.push(" ", el("span", { class: "error", text: `error: ${watcher.error}${times}${retry}` }));
  }
  return parts;
}

function showRoots(roots) {
  const seen = new Set();
  const container = $("roots");
  for (const info of roots) {
    seen.add(info.root);
    let view = views.get(info.root);
    if (!view) {
      view = new RootView(info.root);
      views.set(info.root, view);
    }
    container.append(view.node); // appending an existing node moves it: the daemon's order wins
    view.update(info);
  }
  for (const [root, view] of views) {
    if (!seen.has(root)) {
      clearTimeout(view.timer);
      view.node.remove();
      views.delete(root);
    }
  }
  $("no-roots").hidden = roots.length > 0;
  showRootChoice(roots.map((r) => r.root));
}

function showRootChoice(roots) {
  const select = $("search-root");
  const current = [...select.options].map((o) => o.value);
  if (current.join("\n") !== roots.join("\n")) {
    const chosen = select.value;
    select.replaceChildren(...roots.map((root) => el("option", { value: root, text: root })));
    if (roots.includes(chosen)) select.value = chosen;
  }
  $("search-root-field").hidden = roots.length < 2;
}

// ---- status polling ----------------------------------------------------------------------------------------

let statusTimer = null;

async function refreshStatus() {
  clearTimeout(statusTimer);
  try {
    const status = await api("/status");
    showProblem("");
    showDaemon(status);
    showRoots(status.roots || []);
  } catch (error) {
    if (error instanceof HttpError && error.status === 401) {
      showProblem(
        "The daemon refused this page (no valid token). Open the address `kenning daemon status` prints, " +
          "with its ?token=, again.",
      );
    } else if (error instanceof HttpError) {
      showProblem(`The daemon's status failed (${error.message}). Retrying every few seconds…`);
    } else {
      showProblem(`The daemon does not answer (${error.message}). Retrying every few seconds…`);
    }
  }
  statusTimer = setTimeout(refreshStatus, STATUS_EVERY_MS);
}

// ---- search ------------------------------------------------------------------------------------------------

let searchSeq = 0; // answers can arrive out of order: only the newest search's answer is shown

async function search(event) {
  event.preventDefault();
  const query = $("search-input").value.trim();
  const root = $("search-root").value;
  const info = $("search-info");
  if (!query) return;
  if (!root) {
    info.textContent = "No root is attached to search.";
    return;
  }
  const seq = ++searchSeq;
  info.textContent = "Searching…";
  $("search-button").disabled = true;
  try {
    const params = new URLSearchParams({ root, q: query, k: "10" });
    const answer = await api(`/api/search?${params}`);
    if (seq !== searchSeq) return;
    showHits(answer);
  } catch (error) {
    if (seq !== searchSeq) return;
    $("hits").replaceChildren();
    info.textContent = `Search failed: ${error.message}`;
  } finally {
    if (seq === searchSeq) $("search-button").disabled = false;
  }
}

function showHits(answer) {
  const hits = answer.hits || [];
  const notes = answer.notes || [];
  const coverage = typeof answer.coverage === "number" ? `, index ${percent(answer.coverage)} embedded` : "";
  $("search-info").textContent =
    `${hits.length} ${hits.length === 1 ? "hit" : "hits"} in ${answer.seconds} s${coverage}` +
    (notes.length ? `. ${notes.join(" ")}` : "");
  $("hits").replaceChildren(...hits.map(hitNode));
}

function hitNode(hit) {
  const where = `${hit.path}:${hit.start_line}-${hit.end_line}`;
  const head = el(
    "p",
    { class: "hit-head" },
    el("code", { class: "loc", "data-testid": "hit-loc", text: where }),
    " ",
    el("span", { class: "score", text: `score ${Number(hit.score).toFixed(4)}` }),
    " ",
    el("span", { class: "by", text: `matched by ${hit.matched_by}` }),
  );
  if (hit.stale) {
    head.append(
      " ",
      el("mark", {
        class: "stale",
        "data-testid": "stale",
        title: "the file changed since it was indexed: this passage may be out of date",
        text: "stale",
      }),
    );
  }
  const context = [hit.symbol ? `${hit.symbol.kind} ${hit.symbol.name}` : "", hit.heading || ""].filter(Boolean);
  if (context.length) head.append(" ", el("span", { class: "heading", text: context.join(" · ") }));
  const item = el("li", { class: "hit", "data-testid": "hit", "data-path": hit.path }, head);
  if (typeof hit.text === "string" && hit.text !== "") {
    const first = hit.text_start_line ?? hit.start_line;
    item.append(el("pre", { "aria-label": `preview from line ${first}`, text: hit.text }));
  }
  return item;
}

// ---- start -------------------------------------------------------------------------------------------------

$("search").addEventListener("submit", search);
refreshStatus();
