"""Plain BM25 (bm25s, Lucene variant, English stop words, Snowball stemmer) over whole files or line windows.

Runs in its own virtual environment (bm25s, PyStemmer); see common.py for the arguments and output.
"""

from __future__ import annotations

import time

import bm25s
import Stemmer
from common import Recorder, parser, read_queries, units


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    rec = Recorder(args)
    stemmer = Stemmer.Stemmer("english")
    rec.start()
    found = list(units(args.corpus, args.unit))
    tokens = bm25s.tokenize([text for _, text in found], stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    rec.indexed()
    rec.files = len({u.path for u, _ in found})
    rec.units = len(found)
    k = min(args.depth, len(found))
    for qid, text in read_queries(args.queries):
        t = time.perf_counter()
        q = bm25s.tokenize([text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
        ranked: list[str] = []
        if q and q[0]:
            ids, scores = retriever.retrieve(q, k=k, show_progress=False, n_threads=1)
            ranked = [found[int(i)][0].item() for i, s in zip(ids[0], scores[0], strict=True) if s > 0]
        rec.add(qid, ranked, t)
    rec.write(peer="bm25s", version=bm25s.__version__)


if __name__ == "__main__":
    main()
