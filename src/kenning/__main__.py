"""`python -m kenning`: the same as the `kenning` command (the daemon starts itself this way)."""

from kenning.cli import entry

entry()
