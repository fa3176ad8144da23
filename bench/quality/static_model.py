"""The static model semble's hybrid mode is run with: kenning's own (`kenning.embed.static`), the best static model
kenning can build here, exported in model2vec's folder format.

kenning distils MiniLM's vocabulary through its own ONNX graph of the same weights (each token through the
encoder, model2vec-style) and refines the table with the small trained file it ships (`bench/train_static.py`);
`export_model2vec` writes that table as `model.safetensors`, `tokenizer.json` and `config.json`, which model2vec's
`StaticModel.from_pretrained` reads (`peers/semble_model.py --from`, in semble's environment). Nothing is
downloaded. The folder is written again when kenning's static model changes (its identity is in config.json).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kenning.embed.static import StaticEmbedder, export_model2vec


def distill(out: Path) -> Path:
    """kenning's static model as a model2vec folder in `out` (kept while it is the current one); returns `out`."""
    embedder = StaticEmbedder()
    config = out / "config.json"
    try:
        if json.loads(config.read_text()).get("kenning") == embedder.identity:
            return out
    except (OSError, ValueError):
        pass
    embedder.load()
    return export_model2vec(embedder, out)


if __name__ == "__main__":
    print(distill(Path(sys.argv[1])))
