"""The writer lock's interface, and its implementation as a lock file in the index's home.

One writer per index at a time, across processes: `kenning index`, a refresh before a search, the daemon's
watcher. The lock guards more than the store (the manifest, the vector snapshot, the folder a rebuild deletes),
so it is taken before a store is opened and is not a method of one. A store on a database server would lock
there instead (PostgreSQL's advisory locks), which is why the engine holds it through this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path

from kenning.store.layout import writer_active, writer_lock


class WriterLock(ABC):
    """The cross-process lock a writer holds while it changes the index."""

    @abstractmethod
    def hold(self, *, wait: float = 0.0, operation: str = "index") -> AbstractContextManager[None]:
        """Hold the lock for the block, waiting up to `wait` seconds for another holder; IndexBusy (naming
        the holder where it can) when it is still held then. A process killed while it holds the lock must not
        leave it held. `operation` names what the holder is doing, for that message."""

    @abstractmethod
    def active(self) -> bool:
        """Whether some process holds the lock now. A probe, for explaining a state no healthy index is in."""


class FileWriterLock(WriterLock):
    """`writer.lock` in the index's home (an flock, released by the OS even on kill -9), with `writer.json`
    saying who holds it: see `kenning.store.layout.writer_lock`."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def hold(self, *, wait: float = 0.0, operation: str = "index") -> AbstractContextManager[None]:
        return writer_lock(self.home, wait=wait, operation=operation)

    def active(self) -> bool:
        return writer_active(self.home)
