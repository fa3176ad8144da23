"""What semble 0.7.0's MCP `search` tool answers, for bench/agent_tokens.py: for each query, the JSON text its tool
returns (`json.dumps(format_results(query, index.search(query, top_k, max_snippet_lines), ...))`) at its defaults
(top_k 5, 10 lines a snippet) and, as an agent's second call, at top_k 20, with the files each ranks.

Runs in semble's own virtual environment, offline, as semble_peer.py does; writes one JSON line per query:
{"query_id", "answers": [{"text", "files"}, ...]}.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from common import parser, read_queries
from semble_peer import mirror

CALLS = ((5, 10), (20, 10))  # (top_k, max_snippet_lines) of each call


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--scratch", required=True, type=Path)
    args = p.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["XDG_CACHE_HOME"] = str(args.scratch / "xdg-cache")
    shutil.rmtree(args.scratch / "xdg-cache", ignore_errors=True)
    from semble import SembleIndex
    from semble.types import ContentType
    from semble.utils import format_results

    root = args.scratch / "corpus"
    mirror(args.corpus, root)
    index = SembleIndex.from_path(
        root, model_path=args.model, content=(ContentType.CODE, ContentType.DOCS, ContentType.CONFIG)
    )
    rows = []
    for qid, text in read_queries(args.queries):
        answers = []
        for top_k, lines in CALLS:
            results = index.search(text, top_k=top_k, max_snippet_lines=lines)
            body = json.dumps(format_results(text, results, lines, index.sources))
            files = [
                r.chunk.file_path.removesuffix(".md")
                if r.chunk.file_path.endswith(".txt.md")
                else r.chunk.file_path
                for r in results
            ]
            answers.append({"text": body, "files": files})
        rows.append(json.dumps({"query_id": qid, "answers": answers}))
    args.out.write_text("\n".join(rows) + "\n")
    args.stats.write_text("{}")


if __name__ == "__main__":
    main()
