"""Lazy package exports: a name is imported from its module on first use (PEP 562).

`import kenning` (or `kenning.store`) stays cheap for light commands such as the gate hook and `--help`, which
must not pay for numpy, SQLite and the model runtime they never use.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that loads `name` from `where[name]`."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
