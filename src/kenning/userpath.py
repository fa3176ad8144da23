"""How a path the user typed is read: one rule for the CLI, the daemon route and Engine.relative.

Standard library only: the CLI's route to a running daemon imports this, and must start in milliseconds.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def user_path(path: str, root: Path | str) -> str:
    """A path as the user typed it, made absolute (not resolved): relative to where the user stands when that is
    inside the root and the path exists there (as every other tool reads it), else relative to the root."""
    p = os.path.expanduser(path)
    if os.path.isabs(p):
        return p
    here, top = os.path.realpath(os.getcwd()), str(root)
    inside = here == top or here.startswith(top.rstrip(os.sep) + os.sep)
    return os.path.join(here if inside and os.path.exists(os.path.join(here, p)) else top, p)
