"""Fetching a pack from an http(s) URL into a local file, bounded by the disk that must hold it.

An import needs room for the pack and for the index unpacked from it, so a download may take at most half the
free space where it is written: a server that announces more is refused before a byte is written, one that
sends more is cut off.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kenning.errors import UsageError
from kenning.pack.info import PACK_SUFFIX

__all__ = ["URL_TIMEOUT", "download", "is_url"]

URL_TIMEOUT = 30.0


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def download(url: str, folder: Path) -> Path | None:
    """Fetch the pack at `url` into a new file in `folder`; its path, or None when the server has none (404).
    UsageError, with nothing left behind, when it cannot be fetched or would not fit."""
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=folder, suffix=PACK_SUFFIX)
    target = Path(name)
    try:
        # only http(s) URLs reach here (is_url); urllib follows redirects to http(s) only
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=URL_TIMEOUT) as answer:
            _copy(answer, out, url, folder)
    except UsageError:
        target.unlink(missing_ok=True)
        raise
    except urllib.error.HTTPError as exc:
        target.unlink(missing_ok=True)
        if exc.code == 404:
            return None
        raise UsageError(
            f"snapshot source {url} answered HTTP {exc.code} ({exc.reason})",
            hint="check snapshot_source's URL, and that its server serves the .kpack files",
        ) from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        target.unlink(missing_ok=True)
        raise UsageError(
            f"cannot fetch snapshot {url} ({getattr(exc, 'reason', exc)})",
            hint="check snapshot_source's URL and that the server is up, or unset it to index locally",
        ) from None
    return target


def _copy(answer: Any, out: Any, url: str, folder: Path) -> None:
    room = shutil.disk_usage(folder).free // 2
    announced = answer.headers.get("Content-Length", "")
    if announced.isdigit() and int(announced) > room:
        _too_big(url, int(announced), folder)
    written = 0
    while chunk := answer.read(1 << 20):
        written += len(chunk)
        if written > room:
            _too_big(url, written, folder)
        out.write(chunk)


def _too_big(url: str, size: int, folder: Path) -> None:
    free = shutil.disk_usage(folder).free
    raise UsageError(
        f"snapshot {url} is {size / 1e9:.1f} GB or more, over half the {free / 1e9:.1f} GB free at {folder} "
        "(an import needs room for the pack and the index unpacked from it)",
        hint="free some disk space, or unset snapshot_source to index locally",
    )
