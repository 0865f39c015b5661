"""Which process serves a data dir: an exclusive flock on ``<data dir>/serve.lock``, holding its
pid and command.

On the embedded default the process that runs a data dir's workers (``cuemem serve``, ``cuemem
worker``, and every command that starts workers for itself: ``ingest``, ``demo``, ``mcp`` on the
library, ``dead-letters replay``, the benchmarks; ``workers.runtime.local.open_runtime`` takes it
for them) runs, among them, the one owner of the embedded index. A second one on the same data dir
would share the first one's Postgres and Redis, start workers whose index owner can never open the
index, and answer recalls with 503 "owned by another process". So it is refused before anything
starts, naming the process that serves the dir.

The lock goes with its processes (flock): a crash leaves nothing stale behind. The workers a
holder starts inherit the lock's file descriptor (``held_fd``; ``workers.runtime.processes``
passes it on), so the lock is held while any of them lives, even when the command that started
them was SIGKILLed: holding it proves that no worker of the data dir is alive, which is what lets
a new holder hand their unacknowledged messages back to the queues at once
(``workers.broker.restore_unacked``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "serve.lock"

# The data dirs this process holds: resolved path -> (pid, fd). The pid guards against a fork
# that inherited the table (the child holds nothing of its own).
_held: dict[Path, tuple[int, int]] = {}


class DataDirServed(RuntimeError):
    """Another process serves the data dir; the message names it."""

    def __init__(self, data_dir: Path, holder: str):
        self.data_dir = data_dir
        self.holder = holder
        super().__init__(
            f"data dir {data_dir} is already served by {holder}; stop it, or give this one another --data-dir"
        )


def held_fd(data_dir: Path) -> int | None:
    """The lock's file descriptor when this process holds ``data_dir``, else None."""
    pid, fd = _held.get(data_dir.resolve(), (None, -1))
    return fd if pid == os.getpid() else None


@contextlib.contextmanager
def serving(data_dir: Path, command: str) -> Iterator[None]:
    """Hold ``data_dir`` for this process (``command`` names it to a second one) for the duration;
    raises :class:`DataDirServed` at once when another process holds it. Held already by this
    process (``cuemem serve`` takes it before it checks its port, then starts its runtime, which
    takes it again), it is the same hold."""
    if held_fd(data_dir) is not None:
        yield
        return
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
    key = data_dir.resolve()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({command})\n".encode(), 0)
        _held[key] = (os.getpid(), fd)
        yield
    finally:
        _held.pop(key, None)
        # The file stays: unlinking a lock file lets a waiter lock an inode nobody else sees.
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        if text:
            return text + _exited_note(text)
    # Locked, but its holder has not written its line yet (or never will: not a cuemem process).
    return "another process"


def _exited_note(text: str) -> str:
    """When the named process is gone, the lock is held by the workers it started (they inherit
    it): say so, or "stop it" would name a process that no longer exists."""
    try:
        pid = int(text.split()[1])
        os.kill(pid, 0)
    except (IndexError, ValueError, PermissionError):
        return ""
    except ProcessLookupError:
        return ", which exited: its worker processes still run"
    return ""
