"""How a path the user typed is read: one rule for the CLI, the daemon route and Engine.relative.

Standard library only: the CLI's route to a running daemon imports this, and must start in milliseconds.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from kenning.errors import UsageError

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


def resolve_user_path(path: Path | str, given: str | Path | None = None) -> Path:
    """`path` resolved, or a UsageError naming `given` (the user's spelling): resolve() raises on a symlink loop
    (RuntimeError before Python 3.13, OSError after) and on other failures a user's path can meet."""
    from pathlib import Path  # here: the daemon route imports this module and must not pay for pathlib

    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        loop = isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP
        why = "it is a symlink loop" if loop else getattr(exc, "strerror", None) or str(exc)
        raise UsageError(
            f"path {given if given is not None else path} cannot be resolved: {why}",
            hint="fix or remove the link, or name another path",
        ) from None
