"""Train the static model's refinement: a weight per token and a projection, fitted to MiniLM's own vectors.

    python bench/train_static.py [--per-repo 450] [--headings 150] [--steps 300]
                                 [--out src/kenning/embed/static_minilm.npz]
    python bench/train_static.py --evaluate scifact,cosqa,... [--report FILE]

Tokenlearn's idea, on kenning's own ground: passages of public repositories (code and prose, as kenning cuts
them) are embedded by the default model (MiniLM, the teacher), and the static model (the raw token vectors
distilled from MiniLM, `kenning.embed.static`) learns to place each passage where the teacher does. What is
learned is small enough to ship in the package: a weight per vocabulary token (which tokens matter, a learned
SIF) and a 384 x 256 projection of the raw token vectors (PCA's place, fitted to the teacher instead of to the
vocabulary). The target is the teacher's vector centred and reduced by PCA to 256 dimensions; the loss is one
minus the cosine between the static and the target vector; Adam over the whole set, a held-aside 5% to keep the
best step. Headings are added as short texts, so that query-like texts are seen too.

The repositories (`REPOS`, each pinned by commit) are read from local mirrors as `bench/gitsets.py` does
(`$KENNING_MIRRORS/<owner>+<name>/repo`, else a clone). None is a development or held-out set of kenning's, nor
one of the repositories issue 35 keeps apart to judge kenning. Passages are one per distinct text, sampled by
hash, up to --per-repo per repository. The teacher's vectors are cached under bench/.work/static-train/.

`--evaluate` measures the shipped model instead, on the quality bench's sets (bench/quality/run.py's harness
and cache): nDCG@10 of kenning's semantic and hybrid modes with `static` (the refined table) and
`static:plain` (distillation alone) as the embedder, the lexical mode beside them, the static embedder's
passages per second on each set's passages (one thread), and the time to distil the table in an empty cache.

Needs scipy (sparse products), for training only: `pip install scipy`. Nothing here runs at search time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gitsets  # noqa: E402
from kenning.config import Config  # noqa: E402
from kenning.embed.hashing import HashEmbedder  # noqa: E402
from kenning.embed.minilm import MiniLMEmbedder  # noqa: E402
from kenning.embed.static import DIM, REFINEMENT, StaticEmbedder, special_ids, zipf_weights  # noqa: E402
from kenning.engine import Engine  # noqa: E402
from kenning.types import embed_text  # noqa: E402

WORK = HERE / ".work" / "static-train"
#: (repository, commit, language): mirrored public repositories, none in kenning's sets or issue 35's list
REPOS = (
    ("psf/black", "8947c48ef2077c3a301b03c1e814dc2e3f78436e", "python"),
    ("scrapy/scrapy", "11079cb1c85b9e75a39a7269943c69d1a975d485", "python"),
    ("python-poetry/poetry", "f46702336862f30050d5c641d5ed6f7568ded793", "python"),
    ("tox-dev/tox", "ccb12fc2e1bb9df0da860be4af175e9b97949fbc", "python"),
    ("httpie/cli", "5b604c37c6c67e18e7c3e9aee6c88a8c22b98345", "python"),
    ("Textualize/textual", "1d99508b928a771b51e1a527319c6b87dcff9e05", "python"),
    ("Delgan/loguru", "2a17be730e111cf874d0bf967c4c5da15b7e4670", "python"),
    ("mkdocs/mkdocs", "2862536793b3c67d9d83c33e0dd6d50a791928f8", "python"),
    ("paramiko/paramiko", "8697158113a3eab25ed1d1d541ebe2cad10169a7", "python"),
    ("python-jsonschema/jsonschema", "b37f7be6dc7966a1f1a67557976041ffe0826cb3", "python"),
    ("rust-lang/mdBook", "641d06abe7d10d981ed61dd2711a30e4119666cd", "rust"),
    ("casey/just", "4f41f609278edb6f1024e3dd7a9912946e1e7bc3", "rust"),
    ("sharkdp/bat", "2ba8db9c14e5794572f5ea338c2b90404c9769cb", "rust"),
    ("ratatui/ratatui", "527e1df9296e4b6d56dc665788ce558558b480c6", "rust"),
    ("go-gorm/gorm", "1d6ce99528060be18a42be09aca8d39efcb47f28", "go"),
    ("caddyserver/caddy", "0cf03d32f7d99cf160d5375e8a40fbe3d910d515", "go"),
    ("hashicorp/raft", "1837036daf50bd973bcb0f3fc536b2d451cebf5d", "go"),
    ("junegunn/fzf", "956562daaa82ddf55ea8f7aeab56883377b742c6", "go"),
    ("prettier/prettier", "4f84a934201322ca87750e2b9b25baf296da6560", "javascript"),
    ("vitejs/vite", "a98c8d95d552c6fa98ab66fb810f5b39ad5abf49", "typescript"),
    ("sveltejs/svelte", "15720b16a5ef33e3e1f4301c77b94ec375070e73", "javascript"),
    ("square/okhttp", "1682d9bac8c03dffde2969b0b74d47649d0dbb52", "kotlin"),
    ("mockito/mockito", "ee8a330da0218f32d5964acdeaa3ac39e2c6ce14", "java"),
    ("jekyll/jekyll", "202df571314ba1d18e9fccd81d12aaad4a703c38", "ruby"),
    ("sidekiq/sidekiq", "1bb4aa06e5aa178a114a5e855f9f3d5c24f6c61b", "ruby"),
    ("puma/puma", "ff2e2126ee2f0f97e21c57ce1967afde1b6f05a1", "ruby"),
    ("composer/composer", "eba7baa59eb1b59246cf9800b0120fe78915b6ac", "php"),
    ("symfony/console", "6b099f3306f7c9c2d2786ed736d0026b2903205f", "php"),
    ("libuv/libuv", "6179e7af87413396d5853a1c3722c8b5749336c8", "c"),
    ("lua/lua", "53b41d0cddd80bf33fdc631bdd32e3ba53842b89", "c"),
    ("nlohmann/json", "199dea11b17c533721b26249e2dcaee6ca1d51d3", "c++"),
    ("catchorg/Catch2", "a6ee7e20cd4011129816df7992c1a9db2ef4b58f", "c++"),
    ("jqlang/jq", "579e6f76cffd7643ba4002a2c3618a5ea710589a", "c"),
)
#: tokens the teacher reads of a training text (with [CLS] and [SEP]): the static model is shown the same ones
TEACHER_TOKENS = 256


def texts_of(repo: str, commit: str, language: str, per_repo: int, headings: int) -> list[str]:
    """Passages of one repository at its commit as kenning cuts them (one per distinct text, sampled by hash),
    then up to `headings` of their distinct headings as short texts."""
    name = repo.replace("/", "+")
    folder = WORK / name
    corpus = folder / "corpus"
    marker = folder / "pin.json"
    pin = {"repo": repo, "commit": commit}
    if not corpus.is_dir() or not marker.is_file() or json.loads(marker.read_text()) != pin:
        corpus.mkdir(parents=True, exist_ok=True)
        source = gitsets.Source("train", name, repo, commit, language, "train")
        n = gitsets.extract(source, corpus)
        marker.write_text(json.dumps(pin))
        print(f"[train] {repo}@{commit[:10]}: {n} files", file=sys.stderr)
    engine = Engine(corpus, config=Config(index_dir=str(folder / "index")), embedder=HashEmbedder(dim=8))
    engine.index(semantic=False)
    db = engine._connect(readonly=True)
    try:
        rows = db.missing_embeddings()
    finally:
        db.close()
    rows.sort(key=lambda r: hashlib.sha256(r[0]).digest())
    picked = [embed_text(h, t) for _, h, t, _ in rows[:per_repo]]
    heads = sorted({h.split(" > ")[-1].strip() for _, h, _, _ in rows if h.strip()})
    heads.sort(key=lambda h: hashlib.sha256(h.encode()).digest())
    return picked + heads[:headings]


def teacher(texts: list[str]) -> np.ndarray:
    """MiniLM's vectors of the texts (first TEACHER_TOKENS tokens), cached by the texts and the model."""
    embedder = MiniLMEmbedder()
    key = hashlib.sha256(("\0".join(texts) + embedder.identity).encode()).hexdigest()[:16]
    path = WORK / f"teacher-{key}.npy"
    if path.is_file():
        return np.load(path)
    embedder.load()
    t = time.perf_counter()
    out = np.zeros((len(texts), embedder.dim), np.float32)
    for i in range(0, len(texts), 256):
        out[i : i + 256] = embedder.embed_batch(texts[i : i + 256])
        print(
            f"\r[teacher] {i + 256}/{len(texts)} in {time.perf_counter() - t:.0f}s", end="", file=sys.stderr
        )
    print(file=sys.stderr)
    np.save(path, out)
    return out


def token_matrix(texts: list[str], tokenizer_json: str, size: int):  # type: ignore[no-untyped-def]
    """(texts x vocabulary) sparse matrix of token shares: the mean-pooling operator."""
    from scipy import sparse
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer_json)
    tok.enable_truncation(TEACHER_TOKENS - 2)
    tok.no_padding()
    rows, cols = [], []
    for i, enc in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        rows += [i] * len(enc.ids)
        cols += enc.ids
    counts = sparse.csr_matrix(
        (np.ones(len(rows), np.float32), (np.array(rows), np.array(cols))), shape=(len(texts), size)
    )
    counts.sum_duplicates()
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    return sparse.diags(1.0 / np.maximum(lengths, 1)).astype(np.float32) @ counts


def fit(
    shares, raw: np.ndarray, zero: np.ndarray, targets: np.ndarray, steps: int, lr: float, seed: int = 0
) -> tuple[dict[str, np.ndarray], list[tuple[int, float, float]]]:  # type: ignore[no-untyped-def]
    """Adam on (token weights, projection) for the cosine to the targets; the step best on a held-aside 5%."""
    n = shares.shape[0]
    rng = np.random.default_rng(seed)
    held = rng.random(n) < 0.05
    keep = np.ones(len(raw), bool)
    keep[zero] = False
    mean = raw[keep].mean(axis=0)
    centred = raw - mean
    centred[zero] = 0.0
    # start from plain distillation: PCA of the token vectors and the Zipf SIF weights
    _, _, vt = np.linalg.svd(centred[keep], full_matrices=False)
    params = {"weights": zipf_weights(len(raw)), "projection": vt[:DIM].T.astype(np.float32).copy()}
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in params.items()}
    target = targets / np.linalg.norm(targets, axis=1, keepdims=True)
    train_rows, held_rows = np.flatnonzero(~held), np.flatnonzero(held)
    a_train, a_held = shares[train_rows], shares[held_rows]
    best: tuple[float, dict[str, np.ndarray]] = (-1.0, {k: v.copy() for k, v in params.items()})
    history = []

    def forward(a, p):  # type: ignore[no-untyped-def]
        x = a @ (centred * p["weights"][:, None])
        u = x @ p["projection"]
        norm = np.linalg.norm(u, axis=1, keepdims=True)
        norm[norm == 0] = 1.0
        return x, u, norm

    for step in range(steps + 1):
        x, u, norm = forward(a_train, params)
        unit = u / norm
        t = target[train_rows]
        cos = (unit * t).sum(1)
        _, uh, nh = forward(a_held, params)
        held_cos = float(((uh / nh) * target[held_rows]).sum(1).mean())
        if held_cos > best[0]:
            best = (held_cos, {k: v.copy() for k, v in params.items()})
        if step % 25 == 0:
            history.append((step, float(cos.mean()), held_cos))
            print(
                f"[fit] step {step}: train cosine {cos.mean():.4f}, held-aside {held_cos:.4f}",
                file=sys.stderr,
            )
        if step == steps:
            break
        grad_u = -(t - cos[:, None] * unit) / norm / len(train_rows)
        grads = {"projection": x.T @ grad_u}
        grad_x = grad_u @ params["projection"].T
        grads["weights"] = np.asarray((a_train.T @ grad_x) * centred).sum(1).astype(np.float32)
        for k, g in grads.items():
            m, v = moments[k]
            m *= 0.9
            m += 0.1 * g
            v *= 0.999
            v += 0.001 * g * g
            m_hat = m / (1 - 0.9 ** (step + 1))
            v_hat = v / (1 - 0.999 ** (step + 1))
            params[k] -= (lr * m_hat / (np.sqrt(v_hat) + 1e-8)).astype(np.float32)
    out = best[1]
    out["mean"] = mean.astype(np.float32)
    return out, history


def evaluate(names: list[str], report: Path | None) -> None:
    """nDCG@10 with the static models as kenning's embedder, their speed, and the distillation's time."""
    import os
    import resource
    import tempfile

    sys.path.insert(0, str(HERE / "quality"))
    from kenning_run import KConfig, run_config

    from run import scored
    from sets import resolve

    def cpu() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return own.ru_utime + own.ru_stime

    with tempfile.TemporaryDirectory() as empty:
        fresh = StaticEmbedder(Path(empty))
        wall, used = time.perf_counter(), cpu()
        fresh.load()
        prepared = (time.perf_counter() - wall, cpu() - used)
    cache = Path(os.environ.get("KENNING_BENCH_CACHE", Path.home() / ".cache" / "kenning-bench"))
    runs = HERE / ".work" / "quality" / "static" / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    configs = [
        KConfig("static", index={"model": "static"}, modes=("lexical", "semantic", "hybrid")),
        KConfig("static-plain", index={"model": "static:plain"}, modes=("semantic", "hybrid")),
    ]
    lines = [
        "| set | lexical | static semantic | static hybrid | plain semantic | plain hybrid | static passages/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        s = resolve(name, HERE / ".work")
        got: dict[str, float] = {}
        for cfg in configs:
            for system, info in run_config(s, cfg, cache, runs).items():
                got[system] = scored(s, Path(info["run"]))["nDCG@10"]
        rows = passages_of(s.corpus)
        embedder = StaticEmbedder()
        embedder.load()
        t = time.perf_counter()
        used = cpu()
        for i in range(0, len(rows), 512):
            embedder.embed_batch(rows[i : i + 512])
        rate = len(rows) / max(cpu() - used, 1e-9)
        lines.append(
            f"| {name} | {got['kenning lexical [static]']:.4f} | {got['kenning semantic [static]']:.4f} | "
            f"{got['kenning hybrid [static]']:.4f} | {got['kenning semantic [static-plain]']:.4f} | "
            f"{got['kenning hybrid [static-plain]']:.4f} | {rate:,.0f} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        f"Distilling the table in an empty cache: {prepared[0]:.1f} s wall, {prepared[1]:.1f} s CPU "
        f"(load average {os.getloadavg()[0]:.1f}). Passages/s: CPU seconds of one thread embedding each set's "
        f"passages in batches of 512 (time.perf_counter {time.perf_counter() - t:.1f} s for the last set).",
    ]
    text = "\n".join(lines)
    print(text)
    if report:
        report.write_text(text + "\n")


def passages_of(corpus: Path) -> list[str]:
    """The texts kenning embeds for a corpus (a lexical-only index of it under bench/.work/static-train)."""
    key = hashlib.sha256(str(corpus).encode()).hexdigest()[:10]
    engine = Engine(corpus, config=Config(index_dir=str(WORK / "eval" / key)), embedder=HashEmbedder(dim=8))
    engine.index(semantic=False)
    db = engine._connect(readonly=True)
    try:
        return [embed_text(h, t) for _, h, t, _ in db.missing_embeddings()]
    finally:
        db.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--evaluate", help="measure the shipped model on these sets instead of training")
    p.add_argument("--report", type=Path, help="with --evaluate: also write the Markdown table here")
    p.add_argument("--per-repo", type=int, default=450, help="passages per repository")
    p.add_argument("--headings", type=int, default=150, help="headings per repository, as short texts")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", type=Path, default=REFINEMENT)
    args = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.evaluate:
        evaluate(args.evaluate.split(","), args.report)
        return
    t0 = time.perf_counter()
    texts: list[str] = []
    for repo, commit, language in REPOS:
        got = texts_of(repo, commit, language, args.per_repo, args.headings)
        print(f"[train] {repo}: {len(got)} texts", file=sys.stderr)
        texts += got
    targets = teacher(texts)
    static = StaticEmbedder(variant="plain")
    static.load()
    entry = static.model_dir()
    spec = (entry / "tokenizer.json").read_text(encoding="utf-8")
    raw = np.load(entry / "tokens.npy").astype(np.float32)
    zero = special_ids(spec)
    shares = token_matrix(texts, spec, len(raw))
    # the target space: the teacher's vectors centred and reduced to DIM by their own PCA
    centre = targets.mean(axis=0)
    _, _, vt = np.linalg.svd(targets - centre, full_matrices=False)
    reduced = (targets - centre) @ vt[:DIM].T
    t1 = time.perf_counter()
    params, history = fit(shares, raw, zero, reduced, args.steps, args.lr)
    params["weights"] = params["weights"].astype(np.float16)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("wb") as f:
        np.savez_compressed(f, **params)
    print(
        f"{args.out}: {args.out.stat().st_size / 1024:.0f} KB from {len(texts)} texts of {len(REPOS)} repositories; "
        f"fit {time.perf_counter() - t1:.0f}s, all {time.perf_counter() - t0:.0f}s; "
        f"held-aside cosine {history[0][2]:.4f} -> {max(h[2] for h in history):.4f}"
    )


if __name__ == "__main__":
    main()
