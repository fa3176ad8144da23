"""Write a Model2Vec model folder for semble: kenning's static model, token vectors, or a tiny random placeholder.

    python semble_model.py --out DIR (--from KENNING_EXPORT | --tokenizer tokenizer.json (--vectors vectors.npy |
                                      --random DIM))

Runs in semble's virtual environment (model2vec, tokenizers, numpy). `--from` takes the folder kenning exports
its static model to (`kenning.embed.static.export_model2vec`, via ../static_model.py): model2vec loads it with
`StaticModel.from_pretrained` and saves it again, so a folder semble cannot read fails here, not inside semble.
The others build `StaticModel(vectors=..., tokenizer=...)` and `save_pretrained`. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from model2vec import StaticModel
from tokenizers import Tokenizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokenizer", type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--from", dest="source", type=Path, help="a model2vec folder kenning exported")
    p.add_argument("--vectors", type=Path)
    p.add_argument("--random", type=int, default=0, help="dimensions of a random placeholder model")
    args = p.parse_args()
    if args.source:
        model = StaticModel.from_pretrained(args.source)
        model.save_pretrained(args.out)
        print(f"{args.out}: kenning's static model from {args.source}")
        return
    if not args.tokenizer:
        p.error("--tokenizer is needed unless --from is given")
    tokenizer = Tokenizer.from_file(str(args.tokenizer))
    if args.vectors:
        vectors = np.load(args.vectors).astype(np.float32)
    else:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((tokenizer.get_vocab_size(), args.random or 8)).astype(np.float32)
    model = StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True)
    model.save_pretrained(args.out)
    print(f"{args.out}: {vectors.shape[0]} tokens x {vectors.shape[1]} dims")


if __name__ == "__main__":
    main()
