"""Snapshot packs (`.kpack`): a commit's SQLite index as one file, shipped from CI to every machine that searches
it. A pack is input from elsewhere, so everything here reads it as hostile.

What a pack says of itself (`info`), the file and its checks (`archive`), the deltas of one pack against an
earlier one (`delta`), packs in a folder: writing one, reading one with the packs it stands on, pruning
(`folder`), and fetching one from a URL (`fetch`). The engine (`kenning.engine.snapshot`) decides which pack a
root starts from and lays the working tree on top.
"""

from __future__ import annotations

from kenning.pack.archive import read_info, unpack_db
from kenning.pack.folder import base_chain, prune, unpack_chain, write_pack
from kenning.pack.info import PACK_SUFFIX, PackInfo

__all__ = [
    "PACK_SUFFIX",
    "PackInfo",
    "base_chain",
    "prune",
    "read_info",
    "unpack_chain",
    "unpack_db",
    "write_pack",
]
