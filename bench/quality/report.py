"""The side-by-side run's report: one table per set, plus issue 4's targets, between `<!-- quality:start/end -->`
markers; and the rows it gives BENCHMARKS.md's quality table (bench/results.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

START, END = "<!-- quality:start -->", "<!-- quality:end -->"
ORDER = ("scifact", "cosqa", "cranfield", "cisi", "medline", "rich", "celery-faq")
# BM25 (bm25s, stemmed) on these dev splits as the eval README gives them; issue 4's floors for three sets
README_BM25 = {"cranfield": 0.374, "cisi": 0.386, "medline": 0.696}
FLOORS = {"scifact": 0.70, "cosqa": 0.40, **README_BM25}


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "no index"
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def row_order(name: str) -> tuple[int, str]:
    if name.startswith("kenning"):
        mode = next((i for i, m in enumerate(("lexical", "semantic", "hybrid")) if f" {m}" in name), 3)
        return (0 if "[" not in name else 1, f"{mode}{name}")
    peers = ("semble (bm25", "semble hybrid", "ripgrep", "bm25s")
    return (2 + next((i for i, p in enumerate(peers) if name.startswith(p)), 9), name)


def set_table(name: str, data: dict[str, Any]) -> str:
    systems: dict[str, Any] = data["systems"]
    kinds = sorted({k for s in systems.values() for k in s.get("kinds", {})})
    head = "| system | nDCG@10 | Recall@10 | MRR@10 | index time | query p50 |"
    rule = "|---|---|---|---|---|---|"
    if kinds:
        head += f" nDCG@10 {' / '.join(kinds)} |"
        rule += "---|"
    lines = [
        f"### {name}",
        "",
        f"{data['queries']} queries, {data['files']} files, judged by {data['judged']}; measured {data['measured']} "
        f"by `{data['command']}`{' (quick: subsampled)' if data.get('quick') else ''}"
        + (f", kenning at {data['kenning_source']}" if data.get("kenning_source") else "")
        + ".",
        "",
        head,
        rule,
    ]
    cached = []
    for sys_name in sorted(systems, key=row_order):
        s = systems[sys_name]
        if "error" in s:
            lines.append(f"| {sys_name} | failed: {s['error']} | | | | |" + (" |" if kinds else ""))
            continue
        idx = fmt_seconds(s.get("index_seconds"))
        if s.get("index_cached"):
            idx += "*"
            cached.append(s.get("index_built", "?"))
        p50 = "" if s.get("query_p50_ms") is None else f"{s['query_p50_ms']:.1f} ms"
        cells = [f"{s['nDCG@10']:.4f}", f"{s['Recall@10']:.4f}", f"{s['MRR@10']:.4f}", idx, p50]
        if kinds:
            cells.append(" / ".join(f"{s.get('kinds', {}).get(k, 0.0):.4f}" for k in kinds))
        lines.append(f"| {sys_name} | " + " | ".join(cells) + " |")
    older: dict[tuple[str, str], list[str]] = {}
    for n, s in systems.items():
        if s.get("measured") not in (data["measured"], None):
            older.setdefault((s["measured"], s.get("command", "?")), []).append(n)
    if older:
        kept = "; ".join(f"{', '.join(ns)}: {when} by `{cmd}`" for (when, cmd), ns in sorted(older.items()))
        lines += [
            "",
            f"Rows from other runs (the figures of one run are side by side; across runs, less so): {kept}.",
        ]
    if cached:
        lines += [
            "",
            f"\\* the index of an earlier row or run, reused; the time is of its build ({', '.join(sorted(set(cached)))}).",
        ]
    return "\n".join(lines) + "\n"


def targets(results: dict[str, Any]) -> str:
    lines = [
        "| set | kenning hybrid | better arm | best semble | bm25s | floor | hybrid > arms | > semble | > bm25s | ≥ floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in _sets(results):
        sy = results[name]["systems"]

        def nd(key: str, systems: dict[str, Any] = sy) -> float | None:
            v = systems.get(key, {}).get("nDCG@10")
            return float(v) if v is not None else None

        hybrid = nd("kenning hybrid")
        if hybrid is None:
            continue
        arms = [v for v in (nd("kenning lexical"), nd("kenning semantic")) if v is not None]
        sembles = [v for k in sy if k.startswith("semble") and (v := nd(k)) is not None]
        bm25 = nd("bm25s")
        floor = FLOORS.get(name)

        def mark(ok: bool | None) -> str:
            return "n/a" if ok is None else ("yes" if ok else "**no**")

        lines.append(
            "| "
            + " | ".join(
                [
                    name,
                    f"{hybrid:.4f}",
                    f"{max(arms):.4f}" if arms else "",
                    f"{max(sembles):.4f}" if sembles else "",
                    f"{bm25:.4f}" if bm25 is not None else "",
                    f"{floor:.3f}" if floor else "",
                    mark(hybrid > max(arms) if arms else None),
                    mark(hybrid > max(sembles) if sembles else None),
                    mark(hybrid > bm25 if bm25 is not None else None),
                    mark(hybrid >= floor if floor else None),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def _sets(results: dict[str, Any]) -> list[str]:
    return sorted(results, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def render(results: dict[str, Any], machine: str) -> str:
    parts = [
        START,
        "## Side by side with the peers (issue 4: `python bench/quality/run.py`)",
        "",
        f"Machine: {machine}. Every system gets the same corpus and queries and returns up to 100 candidates per "
        "query; `../shared/eval/score.py` scores the run files (documents max-pooled over passages; sets judged by "
        "line span are scored by span, so every system there ranks passages, not files). Index time is the full "
        "build (kenning: both passes with the default model); query p50 is the warm in-process latency per query "
        "(ripgrep: one `rg` process per query, no index).",
        "",
        "Systems: **kenning** through `kenning.Engine` with default settings, in each mode, plus named "
        "configurations (`[name]`); **semble** 0.7.0 in its own venv through its Python API, all content types, "
        "BM25-plus-ranking (`alpha=0`, a placeholder model) and hybrid (`alpha` auto, a static model distilled from "
        "kenning's MiniLM here, not semble's own potion model, which cannot be downloaded); semble reads no `.txt`, "
        "so it is handed `.txt` files renamed `.txt.md`; **ripgrep** ranks files (or 1,000-character line windows "
        "on span-judged sets) by how many distinct query words match (`rg --json -i -F`, English stop words "
        "dropped); **bm25s** 0.3.16, stemmed, stop words, over the same files or windows.",
        "",
        "### Targets of issue 4 (nDCG@10)",
        "",
        targets(results),
    ]
    for name in _sets(results):
        parts.append(set_table(name, results[name]))
    parts.append(END)
    return "\n".join(parts) + "\n"


def write_block(path: Path, block: str, start: str = START, end: str = END) -> None:
    """Replace the block between the `start` and `end` markers in `path` (the quality block unless named), or
    append it, leaving everything else as it is. Its heading is inside the markers, so that bench/run.py, which
    rewrites the rest of the file, carries it over."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end) + r"\n?", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)


def result_rows(results: dict[str, Any]) -> list[dict[str, str]]:
    """BENCHMARKS.md's quality rows for these sets: kenning hybrid's nDCG@10 (default settings), against issue 4's
    floor and the best peer of the same results (a run of kenning alone keeps the peer its row named before, with
    that peer's date)."""
    from results import load, row

    before = {r["key"]: r.get("target", "") for r in load("quality")["rows"]}

    rows = []
    for name in _sets(results):
        data = results[name]
        systems = data["systems"]
        hybrid = systems.get("kenning hybrid", {}).get("nDCG@10")
        if hybrid is None or data.get("quick"):
            continue
        peers = [
            (s["nDCG@10"], n) for n, s in systems.items() if not n.startswith("kenning") and "nDCG@10" in s
        ]
        floor = FLOORS.get(name)
        targets = [f"≥ {floor:.2f}" if floor == round(floor, 2) else f"≥ {floor:.3f}"] if floor else []
        if peers:
            value, peer = max(peers)
            when = systems[peer].get("measured", data["measured"])[:10]
            targets.append(f"> best peer, {peer} {value:.4f} ({when})")
        else:
            targets += [t for t in before.get(f"set:{name}", "").split("; ") if t.startswith("> best peer")]
        rows.append(
            row(
                f"set:{name}",
                f"{name} ({data['queries']} queries, by {data['judged']}), nDCG@10, hybrid",
                f"{hybrid:.4f}",
                target="; ".join(targets),
                command=systems["kenning hybrid"].get("command", data["command"]),
                date=systems["kenning hybrid"].get("measured", data["measured"])[:10],
            )
        )
    return rows
