"""Which process serves a data dir: an exclusive flock on ``<data dir>/serve.lock``, holding its
pid and command.

On the embedded default the process that serves a data dir (``cuemem serve``, ``cuemem worker``)
runs the workers, among them the one owner of the embedded index. A second one on the same data
dir would share the first one's Postgres and Redis, start workers whose index owner can never
open the index, and answer recalls with 503 "owned by another process". So it is refused before
anything starts, naming the process that serves the dir. The lock goes with its process (flock):
a crash leaves nothing stale behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "serve.lock"


class DataDirServed(RuntimeError):
    """Another process serves the data dir; the message names it."""

    def __init__(self, data_dir: Path, holder: str):
        self.data_dir = data_dir
        self.holder = holder
        super().__init__(
            f"data dir {data_dir} is already served by {holder}; stop it, or give this one another --data-dir"
        )


@contextlib.contextmanager
def serving(data_dir: Path, command: str) -> Iterator[None]:
    """Hold ``data_dir`` for this process (``command`` names it to a second one) for the duration;
    raises :class:`DataDirServed` at once when another process holds it."""
    # Created as embedded_services creates it: private, the turns' words will be in it.
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise DataDirServed(data_dir, holder) from None
    except BaseException:
        os.close(fd)
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command})\n".encode(), 0)
        yield
    finally:
        # The file stays: unlinking a lock file lets a waiter lock an inode nobody else sees.
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text
    # Locked, but its holder has not written its line yet (or never will: not a cuemem process).
    return "another process"
