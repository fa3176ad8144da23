"""The agents kenning can register with, by name. `install` does the work; the CLI only needs the names, and
importing them from here keeps `kenning search` through the daemon from loading the installer."""

AGENTS = ("claude", "codex", "cursor", "opencode")
