"""The one exception tree of kenning.

Every error kenning raises on purpose derives from :class:`KenningError`. Each carries a stable ``code``
(for programs and agents) and a one-line message that names the problem and the fix. Adapters (CLI, MCP,
daemon) translate these at their edge; nothing deeper prints or exits.

    KenningError
    ├── UsageError            bad arguments or configuration (exit 2)
    │   ├── ConfigError       a config file or environment value that cannot be used
    │   └── ArgumentError     a tool argument of the wrong type, size or shape (MCP)
    ├── RootError             the root is missing, not a directory, or not allowed
    │   └── OutsideRoot       a path outside the roots being served
    ├── IndexError_           the on-disk index
    │   ├── IndexMissing      no index where one is needed
    │   ├── IndexCorrupt      the database cannot be read; rebuild it
    │   ├── IndexMismatch     built by another embedder or an unknown schema
    │   │   └── IndexOutdated an older schema: a writer upgrades it (the Engine does so before reading)
    │   └── IndexBusy         another process holds the writer lock
    ├── EmbedderError         an embedder that cannot load or answer
    │   └── RemoteNotAllowed  a remote embedder used without explicit opt-in
    ├── DaemonError           the background daemon: not running, already running, a refused address
    └── Interrupted           the user stopped a run; finished work is kept
"""

from __future__ import annotations


class KenningError(Exception):
    """Base of every deliberate kenning error."""

    code = "KENNING.ERROR"
    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} ({self.hint})"


class UsageError(KenningError):
    code = "KENNING.USAGE"


class ConfigError(UsageError):
    code = "KENNING.CONFIG"


class ArgumentError(UsageError):
    code = "KENNING.ARGUMENT"


class RootError(KenningError):
    code = "KENNING.ROOT"


class OutsideRoot(RootError):
    code = "KENNING.ROOT.OUTSIDE"


class IndexError_(KenningError):
    code = "KENNING.INDEX"


class IndexMissing(IndexError_):
    code = "KENNING.INDEX.MISSING"


class IndexCorrupt(IndexError_):
    code = "KENNING.INDEX.CORRUPT"


class IndexMismatch(IndexError_):
    code = "KENNING.INDEX.MISMATCH"


class IndexOutdated(IndexMismatch):
    code = "KENNING.INDEX.OUTDATED"


class IndexBusy(IndexError_):
    code = "KENNING.INDEX.BUSY"


class EmbedderError(KenningError):
    code = "KENNING.EMBEDDER"


class RemoteNotAllowed(EmbedderError):
    code = "KENNING.EMBEDDER.REMOTE_NOT_ALLOWED"


class DaemonError(KenningError):
    code = "KENNING.DAEMON"


class Interrupted(KenningError):
    code = "KENNING.INTERRUPTED"
    exit_code = 130
