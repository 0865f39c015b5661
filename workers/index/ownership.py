"""Which process owns an embedded index: an exclusive flock on ``<path>.lock``, holding its pid.

The embedded engine admits one process per shard: a second open of a shard fails, and also
breaks the owner's next flush, so a second process must be stopped before it touches the shard.
The lock is taken before any load and kept until ``close``. It sits beside the shard, not in
it, so that ``reset`` can delete the shard directory while still holding the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

from shared.ports import IndexOwnedElsewhere, IndexUnavailable

logger = logging.getLogger(__name__)


class OwnerLock:
    def __init__(self, index_path: Path) -> None:
        self._index_path = index_path
        self.path = index_path.with_name(index_path.name + ".lock")
        self._fd: int | None = None
        self._owner_pid: int | None = None

    def inherited(self) -> bool:
        """Whether this process is a fork of the one that took the lock (and its shard handle)."""
        return self._owner_pid is not None and self._owner_pid != os.getpid()

    def acquire(self) -> None:
        """Become the owning process; raises IndexOwnedElsewhere, naming the owner, if another is."""
        if self._fd is not None:
            if self._owner_pid != os.getpid():
                # flock is shared across fork(), so the child would pass the lock check; the shard
                # handle, however, hangs in a child. Refuse rather than hang.
                raise IndexUnavailable(
                    f"vector index {self._index_path} was opened by pid {self._owner_pid} before a fork; "
                    "open it in the process that uses it"
                )
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise IndexOwnedElsewhere(
                f"vector index {self._index_path} is owned by another process (pid {owner}, lock file "
                f"{self.path}); only one process may open it"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd, self._owner_pid = fd, os.getpid()
        logger.debug("took lock %s", self.path)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if self._owner_pid == os.getpid():
            # The file stays: unlinking a lock file lets a waiter lock an inode nobody else sees.
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        self._owner_pid = None


def _read_owner(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        if text:
            return text
    return "unknown"
