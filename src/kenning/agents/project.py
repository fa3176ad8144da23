"""Whether a folder looks like no project: a home folder, a temp folder, the filesystem root.

An agent's MCP server serves the folder the agent was started in, and a shell's `kenning index .` the folder the
shell is in; started from `~` or `/tmp`, either would index whatever happens to lie there, and answer searches
from it. kenning still does what it is told (such a folder may be what the user wants), but says so first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def looks_like_no_project(folder: Path | str) -> str | None:
    """What the folder is, when it looks like no project ("a temp folder", "your home folder"); else None.

    Only places that hold everything else qualify: a plain folder without project markers may still be a
    folder of notes worth searching, and a home folder under git (dotfiles) is still the whole home.
    """
    path = _real(folder)
    if path == Path(path.anchor):
        return "the filesystem root"
    temps = {_real(p) for p in (tempfile.gettempdir(), "/tmp", "/var/tmp") if os.path.isdir(p)}
    if path in temps:
        return "a temp folder"
    try:
        home = _real(Path.home())
    except RuntimeError:  # no home to be found: nothing to compare with
        return None
    if path == home:
        return "your home folder"
    if home.parent != Path(home.anchor) and path == home.parent:
        return "the folder of home folders"
    return None


def _real(path: Path | str) -> Path:
    # /tmp is a link to /private/tmp on macOS: compare where folders really are
    return Path(os.path.realpath(os.path.expanduser(path)))
