"""After a privacy delete, the embedded Redis's files are rewritten so the deleted words leave them.

Redis deletes a key in memory at once, but its append-only file keeps every command that wrote
the key until the file is rewritten, and an RDB snapshot keeps the key until the next snapshot.
On the embedded default (a Redis whose directory is inside cuemem's data dir) the privacy delete
asks for both, ``BGREWRITEAOF`` then ``BGSAVE``, and waits until they are done. A Redis of one's
own is left to its operator (docs/RELIABILITY.md, "What a privacy delete leaves on disk"): its
files, replicas and backups are theirs to manage, and its ``CONFIG`` may be disabled.

A rewrite copies the whole dataset, so it is bounded (``after_privacy_delete``): only a delete that
deleted something asks for one, and at most one runs per ``CUEMEM_PRIVACY_REWRITE_MIN_INTERVAL_S``
(a Redis key with that expiry is the window). A delete inside the window leaves a pending mark in
Redis instead; the next privacy delete after the window, or beat's ``memory.privacy_rewrite``
(every minute), whichever comes first, rewrites the files then (``flush_pending``). The mark is
cleared before the rewrite starts, so a delete during it marks again: none is left out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import redis

from infra.redis_layout import PREFIX

log = logging.getLogger(__name__)

POLL_S = 0.05
PENDING_KEY = f"{PREFIX}:privacy_rewrite:pending"  # a delete's words may still be in the files
WINDOW_KEY = f"{PREFIX}:privacy_rewrite:window"  # set while a rewrite ran within the window


def after_privacy_delete(client: redis.Redis | None, data_dir: Path, min_interval_s: float) -> bool:
    """After a privacy delete that deleted something: the embedded Redis's files rewritten now, or
    marked for the next rewrite when one ran within ``min_interval_s`` (``flush_pending``). Any
    other Redis is left to its operator. True when the files were rewritten now."""
    if client is None or not is_embedded(client, data_dir):
        return False
    client.set(PENDING_KEY, 1)
    return flush_pending(client, data_dir, min_interval_s)


def flush_pending(client: redis.Redis | None, data_dir: Path, min_interval_s: float) -> bool:
    """Rewrite the embedded Redis's files when a privacy delete marked them and no rewrite ran in
    the last ``min_interval_s``; True when it did. Run after each delete and by beat."""
    if client is None or not client.exists(PENDING_KEY) or not is_embedded(client, data_dir):
        return False
    window_ms = int(min_interval_s * 1000)
    if window_ms > 0 and not client.set(WINDOW_KEY, 1, nx=True, px=window_ms):
        log.info(
            "privacy delete: the Redis files are rewritten once the window ends (%.0f s)", min_interval_s
        )
        return False
    client.delete(PENDING_KEY)  # before the rewrite: a delete during it marks again
    if rewrite_files(client):
        return True
    client.set(PENDING_KEY, 1)  # another rewrite was running, or ours ran late: once more
    return False


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
