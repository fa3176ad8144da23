"""A forger's tools for tests of snapshot packs: read a pack's header and database, write a pack by hand, and
change a pack's database by SQL with its digest made to match (what anyone can make)."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from pathlib import Path
from typing import Any


def unpacked(pack: Path) -> tuple[dict[str, Any], bytes]:
    """A pack's header and database, read as a forger would."""
    with tarfile.open(pack) as tar:
        header = json.loads(tar.extractfile("kpack.json").read())  # type: ignore[union-attr]
        return header, tar.extractfile("index.db").read()  # type: ignore[union-attr]


def repacked(out: Path, header: dict[str, Any], blob: bytes, *, digest: bool = True) -> Path:
    """A pack written by hand from a header and a database, its digest and size made to match (`digest`)."""
    if digest:
        header = {**header, "db_sha256": hashlib.sha256(blob).hexdigest(), "db_bytes": len(blob)}
    with tarfile.open(out, "w") as tar:
        for name, content in (("kpack.json", json.dumps(header).encode()), ("index.db", blob)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out


def with_sql(pack: Path, out: Path, *statements: str, header: dict[str, Any] | None = None) -> Path:
    """The pack with its database changed by `statements`, the digest recomputed: what anyone can make."""
    head, blob = unpacked(pack)
    db = out.with_suffix(".db")
    db.write_bytes(blob)
    conn = sqlite3.connect(db)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    made = repacked(out, {**head, **(header or {})}, db.read_bytes())
    db.unlink()
    return made
