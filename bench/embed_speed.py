"""The semantic pass's cost per passage, before and after, side by side: CPU seconds, tokens read, vectors moved.

    python bench/embed_speed.py [--sets scifact,cisi,cosqa,rich,celery-faq,cs-knex,cs-goldmark]
                                [--sample 240] [--rounds 3] [--before 2d800b5] [--candidates before,after,...]
                                [--out bench/history/DATE-semantic-pass.md]

For each set (the quality bench's names, materialised as it does), the passages an index run would embed
(`Store.missing_embeddings` of a fresh lexical-only index: one per distinct text) are sampled by hash, and every
candidate embeds the same sample as the semantic pass does (`kenning.engine.index.embed_batch`: prose and markup in
windows, code from its start only, in commit batches of 64). CPU seconds are `resource.getrusage` of this
process and its children (the embedder's thread pool included), over rounds that alternate the candidates' order;
figures are medians. Model loading is outside the timed part.

Candidates: `before` is the MiniLM embedder of the `--before` revision (its module read from git, its model built
into the cache under its own key), `after` today's default, and variants of today's (`after-read256`: code read
at 256 tokens as before, the graph change alone). Vectors are compared with `before`'s, passage by passage
(cosine of the first window). Tokens per passage by kind are counted with MiniLM's tokenizer, untruncated.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "quality"), str(HERE)]

from kenning.config import Config  # noqa: E402
from kenning.embed import Embedder  # noqa: E402
from kenning.embed.hashing import HashEmbedder  # noqa: E402
from kenning.embed.minilm import MiniLMEmbedder, windows  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.engine.index import EMBED_COMMIT_BATCH, embed_batch  # noqa: E402
from kenning.types import embed_text  # noqa: E402
from sets import resolve  # noqa: E402

ROOT = HERE.parent
WORK = HERE / ".work"
DEFAULT_SETS = "scifact,cisi,cosqa,rich,celery-faq,cs-knex,cs-goldmark"
#: main before the faster semantic pass (its MiniLM module is read from here for `before`)
BEFORE = "2d800b5"

Passage = tuple[bytes, str, str, bool]  # (text hash, heading, text, is code): what the semantic pass embeds


def passages(name: str) -> list[Passage]:
    """The passages a fresh index of the set embeds, from a lexical-only index kept under bench/.work."""
    s = resolve(name, WORK)
    home = WORK / "embed_speed" / name
    engine = Engine(s.corpus, config=Config(index_dir=str(home)), embedder=HashEmbedder(dim=8))
    engine.index(semantic=False)
    db = engine._connect(readonly=True)
    try:
        return db.missing_embeddings()
    finally:
        db.close()


def sample(rows: list[Passage], n: int) -> list[Passage]:
    return sorted(rows, key=lambda r: hashlib.sha256(r[0]).digest())[:n]


def module_at(rev: str) -> types.ModuleType:
    """kenning.embed.minilm as it was at `rev`, as a module of its own (it imports today's kenning around it)."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/kenning/embed/minilm.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType(f"minilm_at_{rev}")
    module.__file__ = f"{rev}:src/kenning/embed/minilm.py"
    sys.modules[module.__name__] = module
    exec(compile(src, module.__file__, "exec"), module.__dict__)
    return module


def candidates(before: str) -> dict[str, Callable[[], Embedder]]:
    def old() -> Embedder:
        embedder: Embedder = module_at(before).MiniLMEmbedder()
        return embedder

    return {
        "before": old,
        "after": MiniLMEmbedder,
        "after-read256": lambda: MiniLMEmbedder(read_tokens=256),
    }


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def semantic_pass(embedder: Embedder, rows: list[Passage]) -> list[np.ndarray]:
    """What engine/index.py's semantic pass hands the embedder: shortest first, in commit batches."""
    ordered = sorted(rows, key=lambda r: len(r[1]) + len(r[2]))
    out: list[np.ndarray] = []
    for i in range(0, len(ordered), EMBED_COMMIT_BATCH):
        out += embed_batch(embedder, ordered[i : i + EMBED_COMMIT_BATCH])
    back = {r[0]: v for r, v in zip(ordered, out, strict=True)}
    return [back[r[0]] for r in rows]


def token_stats(rows: list[Passage], embedder: MiniLMEmbedder) -> dict[str, dict[str, float]]:
    """Tokens per passage by kind: the text's own, and what the semantic pass runs (windows, truncation)."""
    embedder.load()
    tok = embedder._untruncated()
    out: dict[str, dict[str, float]] = {}
    for kind, code in (("code", True), ("prose", False)):
        sel = [r for r in rows if r[3] == code]
        if not sel:
            continue
        encs = tok.encode_batch([embed_text(h, t) for _, h, t, _ in sel])
        lengths = np.array([len(e.ids) for e in encs])
        if code:
            run = np.minimum(lengths, embedder.read_tokens)
            runs = np.ones_like(lengths)
        else:
            cut = []
            for (_, heading, _, _), enc in zip(sel, encs, strict=True):
                lead = (
                    len(tok.encode(heading).ids) - 2 if heading and len(enc.ids) > embedder.max_tokens else 0
                )
                cut.append(windows(enc.ids, embedder.max_tokens, lead))
            run = np.array([sum(map(len, c)) for c in cut])
            runs = np.array([len(c) for c in cut])
        out[kind] = {
            "passages": len(sel),
            "median": float(np.median(lengths)),
            "mean": float(lengths.mean()),
            "over128": float((lengths > 128).mean()),
            "over256": float((lengths > 256).mean()),
            "run": float(run.mean()),
            "runs": float(runs.mean()),
        }
    return out


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown CPU",
    )
    return (
        f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sets", default=DEFAULT_SETS)
    p.add_argument("--sample", type=int, default=240, help="passages per set")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--before", default=BEFORE, help="the revision whose MiniLM is `before`")
    p.add_argument("--candidates", default="before,after", help="names from: before, after, after-read256")
    p.add_argument("--out", type=Path, help="also write the Markdown report here")
    args = p.parse_args(argv)
    makers = candidates(args.before)
    names = args.candidates.split(",")
    unknown = [n for n in names if n not in makers]
    if unknown:
        raise SystemExit(f"unknown candidates {unknown}: use {', '.join(makers)}")
    loads = {}
    embedders: dict[str, Embedder] = {}
    for name in names:
        t = time.perf_counter()
        embedders[name] = makers[name]()
        embedders[name].load()
        loads[name] = time.perf_counter() - t
    started = time.strftime("%Y-%m-%d %H:%M")
    load_before = os.getloadavg()[0]
    lines = [
        f"Measured {started} by `python bench/embed_speed.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
        f" on {machine()}; `before` is {args.before}'s MiniLM.",
        "",
        "| set | passages | kind: tokens p50 / mean / >128 / >256 (run per passage) | "
        + " | ".join(f"{n} CPU ms/passage" for n in names)
        + " | "
        + " | ".join(f"{n} / before" for n in names if n != "before")
        + " | cosine to before: min / p1 / median (code; prose) |",
        "|---|---|---|" + "---|" * len(names) + "---|" * (len(names) - ("before" in names)) + "---|",
    ]
    totals: dict[str, list[float]] = {n: [] for n in names}
    count = 0
    for set_name in args.sets.split(","):
        rows = sample(passages(set_name), args.sample)
        stats = token_stats(rows, MiniLMEmbedder())
        for e in embedders.values():  # warm: the first run of a session allocates its buffers
            semantic_pass(e, rows[:8])
        seconds: dict[str, list[float]] = {n: [] for n in names}
        vectors: dict[str, list[np.ndarray]] = {}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                t = cpu()
                vectors[name] = semantic_pass(embedders[name], rows)
                seconds[name].append(cpu() - t)
        med = {n: statistics.median(seconds[n]) / len(rows) for n in names}
        for n in names:
            totals[n].append(statistics.median(seconds[n]))
        count += len(rows)
        kinds = "; ".join(
            f"{k}: {v['median']:.0f} / {v['mean']:.0f} / {v['over128']:.0%} / {v['over256']:.0%} "
            f"({v['run']:.0f} in {v['runs']:.2f})"
            for k, v in stats.items()
        )
        agree = []
        if "before" in vectors:
            for n in names:
                if n == "before":
                    continue
                per_kind = []
                for code in (True, False):
                    cos = [
                        float(np.atleast_2d(a)[0] @ np.atleast_2d(b)[0])
                        for a, b, row in zip(vectors["before"], vectors[n], rows, strict=True)
                        if row[3] == code
                    ]
                    if cos:
                        per_kind.append(
                            f"{min(cos):.4f} / {np.percentile(cos, 1):.4f} / {statistics.median(cos):.4f}"
                        )
                agree.append(f"{n}: " + "; ".join(per_kind))
        ratios = [f"{med['before'] / med[n]:.2f}x" for n in names if n != "before" and "before" in med]
        lines.append(
            f"| {set_name} | {len(rows)} | {kinds} | "
            + " | ".join(f"{med[n] * 1000:.2f}" for n in names)
            + " | "
            + " | ".join(ratios)
            + f" | {'<br>'.join(agree)} |"
        )
        print(lines[-1], flush=True)
    overall = {n: sum(totals[n]) / count for n in names}
    lines.append(
        f"| **all** | {count} | | "
        + " | ".join(f"**{overall[n] * 1000:.2f}**" for n in names)
        + " | "
        + " | ".join(f"**{overall['before'] / overall[n]:.2f}x**" for n in names if n != "before")
        + " | |"
    )
    lines += [
        "",
        "Model load (build included when the cache had no entry): "
        + ", ".join(f"{n} {loads[n]:.1f} s" for n in names)
        + f". Load average at the start {load_before:.1f}, at the end {os.getloadavg()[0]:.1f}.",
    ]
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report + "\n")


if __name__ == "__main__":
    main()
