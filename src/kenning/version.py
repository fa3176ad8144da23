"""The installed kenning's version string: one low module that the CLI, the daemon and the MCP server all read.

It is looked up only when asked: reading package metadata costs ~25 ms, which no other command should pay.
"""

from __future__ import annotations


def version() -> str:
    """The version of the installed kenning distribution ("0+unknown" when it is not installed, e.g. a bare
    source checkout on PYTHONPATH)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("kenning")
    except PackageNotFoundError:
        return "0+unknown"
