"""ripgrep as an agent uses it: search the query's words, rank by how many distinct words match, then by matches.

One `rg --json -i -F -e WORD ...` per query over the corpus (no index). With `--unit file` files are ranked; with
`--unit window` the line windows of common.py that hold matches are. Ties: more matching occurrences first, then
path order. Needs the `rg` binary (Debian's ripgrep); standard library otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from common import Recorder, Unit, parser, read_queries, terms, windows


def search(rg: str, corpus: Path, words: list[str]) -> dict[str, dict[int, list[str]]]:
    """path -> line number -> the query words matched on that line."""
    cmd = [rg, "--json", "-i", "-F", "--no-messages"]
    for w in words:
        cmd += ["-e", w]
    out = subprocess.run([*cmd, "."], cwd=corpus, capture_output=True, text=True, check=False).stdout
    hits: dict[str, dict[int, list[str]]] = defaultdict(dict)
    wanted = set(words)
    for line in out.splitlines():
        msg = json.loads(line)
        if msg["type"] != "match":
            continue
        data = msg["data"]
        path = data["path"].get("text")
        if path is None:
            continue
        found = [s["match"].get("text", "").lower() for s in data["submatches"]]
        hits[path.removeprefix("./")][data["line_number"]] = [w for w in found if w in wanted]
    return hits


def rank(corpus: Path, hits: dict[str, dict[int, list[str]]], unit: str) -> list[Unit]:
    scored: list[tuple[int, int, str, int, Unit]] = []
    for path, lines in hits.items():
        if unit == "file":
            words = [w for ws in lines.values() for w in ws]
            scored.append((-len(set(words)), -len(words), path, 0, Unit(path, 0, 0)))
            continue
        text = (corpus / path).read_text(encoding="utf-8", errors="replace").splitlines()
        for a, b in windows(text):
            words = [w for n, ws in lines.items() if a <= n <= b for w in ws]
            if words:
                scored.append((-len(set(words)), -len(words), path, a, Unit(path, a, b)))
    return [u for *_, u in sorted(scored, key=lambda s: s[:4])]


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    rg = shutil.which("rg")
    if rg is None:
        raise SystemExit("rg_peer: ripgrep (rg) is not installed: apt-get install ripgrep")
    rec = Recorder(args)
    for qid, text in read_queries(args.queries):
        t = time.perf_counter()
        words = terms(text)
        ranked = (
            [u.item() for u in rank(args.corpus, search(rg, args.corpus, words), args.unit)] if words else []
        )
        rec.add(qid, ranked, t)
    version = subprocess.run([rg, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    rec.write(peer="ripgrep", version=version)


if __name__ == "__main__":
    main()
