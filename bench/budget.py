"""Tokens an agent reads before the passage that answers, and how much it finds within a token budget.

    nice -n 10 python bench/budget.py [--sets scifact,cosqa,...] [--budgets 500,1000,2000,4000]
                                      [--systems kenning,today,ripgrep,semble-bm25] [--mode hybrid]
                                      [--max-queries N] [--out FILE]

On each development set, for every query, each system's answer is read as an agent reads it, first item first:
- `kenning B`: the MCP `text_search` answer at budget B (the real `search_answer`, 50 hits ranked, packed), each
  block costed as its structured JSON, which is what Claude Code, Codex and VS Code give their model;
- `kenning today`: the answer before budgets, k=10 with short previews, each hit costed as its JSON item then;
- `semble`: its ranked windows, each costed as its `path:start-end` line and text (run by
  bench/quality/peer_run.py in its own venv);
- `ripgrep + read`: `rg -l` over the query's words (the listing of matching files costs its tokens first), then
  whole files read in rg_peer's order (most distinct query words first).
Tokens are counted with o200k_base (kenning.render.tokens). Reported per system: tokens to the first relevant
item (mean and median over the queries that reach one; queries that never do are counted apart), recall of the
relevant documents (or judged spans) within 500 / 1,000 / 2,000 / 4,000 tokens, and nDCG@10 of what kenning's
answers list (../shared/eval/score.py) at the default budget against today's k=10 answer.

Indexes are the quality harness's cached ones (bench/quality/kenning_run.open_index, same cache key): a set whose
index is not cached is skipped unless --build. The results go to --out (bench/.work/budget/block.md by default),
between `<!-- budget:start -->` and `<!-- budget:end -->`, to be carried into a dated file of bench/history/.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE / "quality" / "peers"), str(HERE)]

from common import terms as rg_terms  # noqa: E402
from kenning_run import DEFAULT, kenning_revision, open_index  # noqa: E402
from rg_peer import rank as rg_rank  # noqa: E402
from rg_peer import search as rg_search  # noqa: E402

from eval import read_queries, score, subset  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.mcp import schemas  # noqa: E402
from kenning.mcp.answers import search_answer  # noqa: E402
from kenning.render.tokens import counter  # noqa: E402
from kenning.search import SearchRequest  # noqa: E402
from sets import DEV_SETS, EvalSet, fingerprint, resolve  # noqa: E402

WORK = HERE / ".work"  # where the quality harness builds the sets (their files' times are in the index's key)
LIMITS = (500, 1000, 2000, 4000)
START, END = "<!-- budget:start -->", "<!-- budget:end -->"
SPAN = re.compile(r"^(.*):(\d+)-(\d+)$")


@dataclass
class Stream:
    """One answer as an agent reads it: locations in order, with the tokens read up to and including each."""

    items: list[tuple[list[str], int]]  # (locations shown by the item, cumulative tokens)
    listed: list[str]  # the ranked locations, for nDCG@10: the lines shown
    passages: list[str] | None = None  # the same, each block named by its best hit's whole passage


def compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class Judge:
    """Which locations a query's judgements credit: a document (file), or a line span it overlaps."""

    def __init__(self, qrels: Path) -> None:
        self.relevant: dict[str, dict[str, int]] = {}
        for row in read_queries(qrels):
            rel: Any = row["relevant"]
            grades = {k: 1 for k in rel} if isinstance(rel, list) else {k: int(v) for k, v in rel.items()}
            self.relevant[str(row["query_id"])] = {k: g for k, g in grades.items() if g > 0}

    def hits(self, qid: str, location: str) -> set[str]:
        """The judged keys a shown location credits."""
        path, a, b = _split(location)
        found = set()
        for key in self.relevant.get(qid, {}):
            kp, ka, kb = _split(key)
            if kp == path and (ka is None or a is None or (a <= kb and ka <= b)):  # type: ignore[operator]
                found.add(key)
        return found


def _split(location: str) -> tuple[str, int | None, int | None]:
    m = SPAN.match(location)
    if m:
        return m.group(1).removeprefix("corpus/"), int(m.group(2)), int(m.group(3))
    return location.removeprefix("corpus/"), None, None


def measure(streams: dict[str, Stream], judge: Judge) -> dict[str, Any]:
    first: list[int] = []
    never = 0
    recall = {t: 0.0 for t in LIMITS}
    judged = 0
    for qid, stream in streams.items():
        wanted = judge.relevant.get(qid, {})
        if not wanted:
            continue
        judged += 1
        seen: set[str] = set()
        reached = None
        got = {t: 0 for t in LIMITS}
        for locations, tokens in stream.items:
            credit = set().union(*(judge.hits(qid, loc) for loc in locations)) if locations else set()
            if credit and reached is None:
                reached = tokens
            seen |= credit
            for t in LIMITS:
                if tokens <= t:
                    got[t] = len(seen)
        if reached is None:
            never += 1
        else:
            first.append(reached)
        for t in LIMITS:
            recall[t] += got[t] / len(wanted)
    return {
        "queries": judged,
        "first_mean": statistics.mean(first) if first else None,
        "first_median": statistics.median(first) if first else None,
        "never": never,
        **{f"recall@{t}": recall[t] / judged if judged else 0.0 for t in LIMITS},
    }


def kenning_streams(
    engine: Engine, queries: list[dict[str, str]], budgets: Sequence[int], mode: str
) -> dict[str, dict[str, Stream]]:
    """Per system ("kenning B", "kenning today"), per query id, the answer as a stream."""
    count = counter()
    out: dict[str, dict[str, Stream]] = {f"kenning {b}": {} for b in budgets}
    out["kenning today"] = {}
    for q in queries:
        request = SearchRequest((q["text"],), mode=mode, limit=50, refresh="off")  # type: ignore[arg-type]
        results = engine.search(request)
        for budget in budgets:
            answer = search_answer(
                [q["text"]],
                [(engine, results)],
                50,
                mode,
                "short",
                [],
                lambda e, p: p,
                False,
                budget,  # type: ignore[arg-type]
            )
            out[f"kenning {budget}"][q["query_id"]] = _answer_stream(answer.structured, count.count)
        # today's answer: its own search of depth 10 (the candidate depth follows the limit), no budget
        today = engine.search(SearchRequest((q["text"],), mode=mode, limit=10, refresh="off"))  # type: ignore[arg-type]
        answer = search_answer([q["text"]], [(engine, today)], 10, mode, "short", [], lambda e, p: p, False)  # type: ignore[arg-type]
        out["kenning today"][q["query_id"]] = _answer_stream(answer.structured, count.count)
    return out


def _answer_stream(structured: dict[str, Any], tokens: Any) -> Stream:
    hits = structured["hits"]
    head = tokens(compact({**structured, "hits": []}))
    items: list[tuple[list[str], int]] = []
    total = head
    listed: list[str] = []
    passages: list[str] = []
    for hit in hits:
        total += tokens(compact(hit)) + 1
        copies = [f"corpus/{a}" for a in hit.get("also_at", [])]
        where = [f"corpus/{hit['path']}:{hit['start_line']}-{hit['end_line']}", *copies]
        items.append((where, total))
        if "text_start_line" in hit and hit.get("text") is not None:
            # an answer without a budget names the whole passage and shows a preview of it from here
            first = hit["text_start_line"]
            listed.append(f"corpus/{hit['path']}:{first}-{first + hit['text'].count(chr(10))}")
        else:
            listed += where
        span = hit.get("passage", f"{hit['start_line']}-{hit['end_line']}")
        passages += [f"corpus/{hit['path']}:{span}", *copies]
    return Stream(items, listed, passages)


def rg_streams(corpus: Path, queries: list[dict[str, str]]) -> dict[str, Stream]:
    """`rg -l` over the query's words, then whole files read in rg_peer's order."""
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("ripgrep (rg) is not installed: apt-get install ripgrep")
    count = counter()
    sizes: dict[str, int] = {}
    out = {}
    for q in queries:
        words = rg_terms(q["text"])
        found = rg_search(rg, corpus, words) if words else {}
        order = [u.path for u in rg_rank(corpus, found, "file")]
        total = count.count("\n".join(sorted(found)))  # the listing an agent reads first
        items = []
        for path in order[:200]:  # past 200 files read, no agent goes on
            if path not in sizes:
                sizes[path] = count.count((corpus / path).read_text(encoding="utf-8", errors="replace"))
            total += sizes[path] + 1
            items.append(([f"corpus/{path}"], total))
        out[q["query_id"]] = Stream(items, [f"corpus/{p}" for p in order])
    return out


def semble_streams(key: str, s: EvalSet, cache: Path, runs: Path) -> dict[str, Stream]:
    """semble's ranked windows (via the quality harness's peer run), each read as its location and text."""
    from peer_run import run_peer

    run = run_peer(key, s, cache, runs)["run"]
    count = counter()
    texts: dict[str, list[str]] = {}
    out = {}
    for line in Path(run).read_text().splitlines():
        row = json.loads(line)
        total = 0
        items = []
        for loc in row["ranked"][:50]:
            path, a, b = _split(loc)
            if path not in texts:
                texts[path] = (s.corpus / path).read_text(encoding="utf-8", errors="replace").split("\n")
            text = "\n".join(texts[path][(a or 1) - 1 : b or len(texts[path])])
            total += count.count(f"{path}:{a}-{b}\n{text}") + 1
            items.append(([loc], total))
        out[str(row["query_id"])] = Stream(items, list(row["ranked"]))
    return out


def ndcg(s: EvalSet, streams: dict[str, Stream], runs: Path, name: str, *, passages: bool = False) -> float:
    """nDCG@10 of the locations an answer lists, in its order (../shared/eval/score.py): the lines shown, or
    with `passages` each block's whole passage (as today's answer names its hits); over the queries run."""
    run = runs / f"{name.replace(' ', '_').replace('+', '')}{'.passages' if passages else ''}.jsonl"
    with run.open("w") as fh:
        for qid, stream in streams.items():
            ranked = stream.passages if passages and stream.passages is not None else stream.listed
            fh.write(json.dumps({"query_id": qid, "ranked": ranked}) + "\n")
    qrels = subset(judged(s), set(streams), runs / f"{s.name}.qrels.jsonl")  # a subsample is scored on itself
    return score(qrels, run)["nDCG@10"]


def judged(s: EvalSet) -> Path:
    """The set's judgements: by line span where it has them (the issue 18 code sets), else its qrels."""
    return s.spans if s.spans is not None else s.qrels


def cached(s: EvalSet, cache: Path) -> bool:
    """Whether the quality harness has this set's default index (open_index's key, computed the same way)."""
    import hashlib

    settings = {"kenning": kenning_revision()}
    key_src = json.dumps({"corpus": fingerprint(s.corpus), **settings}, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:12]
    return (cache / "indexes" / f"{s.name}-default-{key}" / "bench-build.json").is_file()


def subsample(rows: list[dict[str, str]], n: int | None) -> list[dict[str, str]]:
    if not n or len(rows) <= n:
        return rows
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


def _first(m: dict[str, Any]) -> str:
    if m.get("first_mean") is None:
        return "-"
    return f"{m['first_mean']:,.0f} / {m['first_median']:,.0f}"


def render(results: dict[str, Any], machine: str, command: str) -> str:
    runs = dict.fromkeys(
        c for data in results.values() for c in (data.get("command", command), *data.get("merged", ()))
    )
    out = [
        START,
        f"Measured {time.strftime('%Y-%m-%d')} on {machine} (2 cores, shared with other work, under nice). "
        f"Commands: {'; '.join(f'`{c}`' for c in runs)}, then `{command}`. Tokens: {counter().name}. Each answer is read first item first, as its JSON "
        "(kenning) or its text (semble, ripgrep); *first relevant* is the tokens read up to and including the "
        "first item that holds a judged-relevant document or span (mean / median over the queries that reach "
        "one; *never* counts the others); *R@T* is the share of the judged documents (spans) read within T tokens; "
        "nDCG@10 scores the first ten locations the answer lists (a block's copies included), in its order: "
        "*shown* by the lines it shows, *by passage* by the whole passage each block's best hit is (how today's "
        "answer names its hits, and what the answer's `passage` field gives). Today's answer shows a preview of "
        "up to 10 lines of each passage it names: its *shown* column scores those lines. On span-judged sets "
        "a location counts when its lines overlap a judged span (celery-faq's answers, the code sets' spans).",
        "",
        f"At the default budget ({schemas.DEFAULT_BUDGET}) against today's k=10 answer, side by side (the "
        "target: nDCG@10 by the lines shown not below today's by the passages it names):",
        "",
        "| set | judged | nDCG@10 shown, budget | today, by passage | today, shown | first relevant mean / median, "
        "budget | today |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, data in results.items():
        b = data["systems"].get(f"kenning {schemas.DEFAULT_BUDGET}", {})
        t = data["systems"].get("kenning today", {})
        if not b or not t:
            continue
        out.append(
            f"| {name} | {data['judged']} | {b.get('ndcg@10', float('nan')):.4f} | "
            f"{t.get('ndcg@10 passages', float('nan')):.4f} | {t.get('ndcg@10', float('nan')):.4f} | "
            f"{_first(b)} | {_first(t)} |"
        )
    out.append("")
    for name, data in results.items():
        out.append(
            f"**{name}** ({data['queries']} queries{', subsampled' if data.get('subsampled') else ''}, "
            f"{data['judged']}, {data['mode']})"
        )
        out.append("")
        out.append(
            "| system | first relevant, mean | median | never | R@500 | R@1000 | R@2000 | R@4000 | nDCG@10 shown "
            "| by passage |"
        )
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for system, m in data["systems"].items():
            mean = "-" if m["first_mean"] is None else f"{m['first_mean']:,.0f}"
            median = "-" if m["first_median"] is None else f"{m['first_median']:,.0f}"
            out.append(
                f"| {system} | {mean} | {median} | {m['never']} | "
                + " | ".join(f"{m[f'recall@{t}']:.3f}" for t in LIMITS)
                + f" | {m.get('ndcg@10', float('nan')):.4f}"
                + (f" | {m['ndcg@10 passages']:.4f} |" if "ndcg@10 passages" in m else " | - |")
            )
        out.append("")
    out.append(END)
    return "\n".join(out)


def write_block(path: Path, block: str) -> None:
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n## Token budget\n\n" + block + "\n"
    path.write_text(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sets", default=",".join(DEV_SETS))
    parser.add_argument("--budgets", default="500,1000,2000,4000")
    parser.add_argument("--systems", default="kenning,today,ripgrep", help="also: semble-bm25, semble-hybrid")
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "lexical", "semantic"))
    parser.add_argument("--max-queries", type=int, help="every n-th query, to bound the run")
    parser.add_argument("--build", action="store_true", help="build an index that is not cached (slow)")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "kenning-bench"))
    parser.add_argument("--work", default=str(WORK), help="where the quality harness built the sets")
    parser.add_argument("--out", default=str(HERE / ".work" / "budget" / "block.md"))
    parser.add_argument("--results", default=str(HERE / ".work" / "budget" / "results.json"))
    parser.add_argument(
        "--merge", action="append", default=[], help="add another run's rows (a results file)"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the block from --results, run nothing"
    )
    args = parser.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    systems = args.systems.split(",")
    cache = Path(args.cache).expanduser()
    results_path = Path(args.results)
    runs = results_path.parent / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = json.loads(results_path.read_text()) if results_path.is_file() else {}
    command = "nice -n 10 python bench/budget.py" + "".join(f" {a}" for a in (argv or sys.argv[1:]))
    for other in args.merge:
        for name, data in json.loads(Path(other).read_text()).items():
            if name in results:
                results[name]["systems"].update(data["systems"])
                if data.get("command", other) not in results[name].setdefault("merged", []):
                    results[name]["merged"].append(data.get("command", other))
    for name in [] if args.report_only else args.sets.split(","):
        s = resolve(name, Path(args.work))
        if not cached(s, cache) and not args.build:
            print(f"[{name}] no cached index under {cache}: skipped (--build builds one)", file=sys.stderr)
            continue
        engine, _ = open_index(s, DEFAULT, cache, fresh=False)
        rows = s.query_rows()
        queries = subsample(rows, args.max_queries)
        judge = Judge(judged(s))
        streams: dict[str, dict[str, Stream]] = {}
        t = time.perf_counter()
        try:
            if "kenning" in systems or "today" in systems:
                streams.update(kenning_streams(engine, queries, budgets, args.mode))
        finally:
            engine.close()
        print(f"[{name}] kenning: {len(queries)} queries in {time.perf_counter() - t:.0f}s", file=sys.stderr)
        for key in (k for k in systems if k.startswith("semble")):
            ids = {q["query_id"] for q in queries}
            found = semble_streams(key, s, cache, runs)
            streams[key.replace("semble-", "semble ")] = {q: v for q, v in found.items() if q in ids}
        if "ripgrep" in systems:
            streams["ripgrep + read files"] = rg_streams(s.corpus, queries)
        measured = {system: measure(by_query, judge) for system, by_query in streams.items()}
        for system, by_query in streams.items():
            measured[system]["ndcg@10"] = ndcg(s, by_query, runs, f"{name}.{system}")
            if system.startswith("kenning"):
                by_passage = ndcg(s, by_query, runs, f"{name}.{system}", passages=True)
                measured[system]["ndcg@10 passages"] = by_passage
        # a run of some systems keeps the others' rows (semble runs apart, see --merge)
        measured = {**results.get(name, {}).get("systems", {}), **measured}
        default = measured.get(f"kenning {schemas.DEFAULT_BUDGET}", {})
        today = measured.get("kenning today", {})
        results[name] = {
            "queries": len(queries),
            "subsampled": len(queries) < len(rows),
            "judged": "line span" if s.judged_by_span else "document",
            "mode": args.mode,
            "command": command,
            "ndcg_budget": default.get("ndcg@10 passages", float("nan")),
            "ndcg_today": today.get("ndcg@10 passages", float("nan")),
            "ndcg_budget_shown": default.get("ndcg@10", float("nan")),
            "systems": measured,
        }
        results_path.write_text(json.dumps(results, indent=2))
        print(render({name: results[name]}, platform.node(), command), file=sys.stderr)
    results_path.write_text(json.dumps(results, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_block(Path(args.out), render(results, f"{platform.machine()} Linux", command))


if __name__ == "__main__":
    main()
