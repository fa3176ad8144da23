"""Write each asked set's source.json: the pin of the mined set of the same repository, which it shares.

python bench/sets/asked/make_sources.py
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
MINED = HERE.parent / "mined"

for folder in sorted(p for p in HERE.iterdir() if (p / "queries.jsonl").is_file()):
    source = json.loads((MINED / folder.name / "source.json").read_text())
    source["shares"] = f"mined-{folder.name}"
    (folder / "source.json").write_text(json.dumps(source, indent=2) + "\n")
