"""The embedded default's files are this user's only, and a privacy delete leaves no words in the
Redis files (issue 18): the data dir 0700, the Redis files 0600, and after ``erase_user`` the
append-only file and the RDB snapshot no longer hold the deleted content."""

from __future__ import annotations

import stat
from pathlib import Path

from infra import redis_layout
from service.operations.erasure import erase_user
from shared.settings import Settings
from workers.bootstrap import build_container
from workers.runtime.embedded import embedded_services

SECRET = "the vault code is 7c41-private"


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.name.endswith((".sock", ".pid"))]


def test_the_embedded_redis_files_are_private_and_a_privacy_delete_rewrites_them(
    it_settings: Settings, tmp_path: Path
):
    data_dir = tmp_path / "home"
    # Postgres is the test's own; the Redis is the embedded one, in the data dir.
    settings = it_settings.model_copy(update={"data_dir": data_dir, "broker_url": None, "redis_url": None})
    with embedded_services(settings) as resolved:
        container = build_container(resolved)
        try:
            client = container.redis_client()
            assert client is not None
            client.rpush(redis_layout.working_memory_key("default", "alice", "s1"), SECRET)
            client.rpush(redis_layout.working_memory_key("default", "bob", "s1"), "bob's own words")
            client.save()  # an RDB snapshot holding the secret, as a periodic save would leave

            redis_files = [p for p in _files(data_dir) if "pg" not in p.relative_to(data_dir).parts]
            assert any(SECRET.encode() in p.read_bytes() for p in redis_files)
            assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
            for path in redis_files:
                assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path

            erase_user(container, "default", "alice")

            redis_files = [p for p in _files(data_dir) if "pg" not in p.relative_to(data_dir).parts]
            assert not [p for p in redis_files if SECRET.encode() in p.read_bytes()]
            assert any(b"bob's own words" in p.read_bytes() for p in redis_files)
        finally:
            container.close()
