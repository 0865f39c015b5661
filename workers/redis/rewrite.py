"""After a privacy delete, the embedded Redis's files are rewritten so the deleted words leave them.

Redis deletes a key in memory at once, but its append-only file keeps every command that wrote
the key until the file is rewritten, and an RDB snapshot keeps the key until the next snapshot.
On the embedded default (a Redis whose directory is inside cuemem's data dir) the privacy delete
asks for both, ``BGREWRITEAOF`` then ``BGSAVE``, and waits until they are done. A Redis of one's
own is left to its operator (docs/RELIABILITY.md, "What a privacy delete leaves on disk"): its
files, replicas and backups are theirs to manage, and its ``CONFIG`` may be disabled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import redis

log = logging.getLogger(__name__)

POLL_S = 0.05


def rewrite_if_embedded(client: redis.Redis | None, data_dir: Path) -> None:
    """After a privacy delete: the files of the embedded Redis rewritten (``rewrite_files``); any
    other Redis is left to its operator."""
    if client is not None and is_embedded(client, data_dir):
        rewrite_files(client)


def is_embedded(client: redis.Redis, data_dir: Path) -> bool:
    """Whether this Redis keeps its files inside ``data_dir`` (the embedded default's)."""
    try:
        directory = client.config_get("dir").get("dir")
    except redis.exceptions.ResponseError:  # CONFIG renamed or disabled: not ours
        return False
    return bool(directory) and Path(str(directory)).resolve().is_relative_to(data_dir.resolve())


def rewrite_files(client: redis.Redis, timeout_s: float = 30.0) -> bool:
    """Rewrite the append-only file (when on) and the RDB snapshot, waiting for each; False when
    they were still running at the timeout (the delete has happened; the files follow soon)."""
    deadline = time.monotonic() + timeout_s
    steps: list[tuple[Callable[[], object], tuple[str, ...]]] = []
    if client.config_get("appendonly").get("appendonly") == "yes":
        steps.append((client.bgrewriteaof, ("aof_rewrite_in_progress", "aof_rewrite_scheduled")))
    steps.append((client.bgsave, ("rdb_bgsave_in_progress",)))
    for start, busy in steps:
        if not _idle(client, busy, deadline):  # one started before (Redis refuses a second)
            return False
        start()
        if not _idle(client, busy, deadline):
            return False
    return True


def _idle(client: redis.Redis, flags: tuple[str, ...], deadline: float) -> bool:
    while True:
        info = client.info("persistence")
        if not any(int(info.get(f, 0)) for f in flags):
            return True
        if time.monotonic() > deadline:
            log.warning("embedded Redis still rewriting its files (%s) after the privacy delete", flags)
            return False
        time.sleep(POLL_S)
