"""Exactly one beat: a Redis lock that the running beat holds and renews.

Two beats would send every periodic task twice (twice the decay, two concurrent sweeps). Compose
runs one beat replica, but nothing stops an operator from starting a second one, or a restarted
beat from overlapping the old. So the scheduler takes a lock before it schedules anything:

- ``SET key token NX PX ttl``: a second beat finds the key taken and refuses to start, naming
  the holder;
- every tick renews the TTL (compare-and-expire on the token); beat ticks at least every
  ``ttl / 3`` (``beat_max_loop_interval``), so a live beat never loses its lock;
- a beat that could not renew (it stalled past the TTL and another beat took over) stops before
  sending anything: at most one beat sends at any time;
- a beat that dies without releasing frees the lock after the TTL, and the next one starts.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import Any

import redis
from celery.beat import PersistentScheduler

from infra.broker import open_redis, redis_py_url

log = logging.getLogger(__name__)

DEFAULT_KEY = "cuemem:beat:lock"

# Compare-and-set on the token: a beat only ever extends or frees the lock it holds itself.
_RENEW = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end "
    "return 0"
)
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class BeatLockHeld(RuntimeError):
    """Another beat holds the lock: this one must not run."""


class BeatLock:
    def __init__(self, client: redis.Redis, key: str = DEFAULT_KEY, ttl_s: float = 60.0) -> None:
        self._client = client
        self.key = key
        self.ttl_ms = int(ttl_s * 1000)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def acquire(self) -> bool:
        return bool(self._client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """Extend the TTL; False when the lock is no longer ours (expired, taken over)."""
        return bool(self._client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> bool:
        return bool(self._client.eval(_RELEASE, 1, self.key, self.token))

    def holder(self) -> str | None:
        value = self._client.get(self.key)
        return value.decode() if isinstance(value, bytes) else value


def lock_from_conf(conf: Any) -> BeatLock:
    """The lock described by the app's ``cuemem_beat_lock`` setting (``reliability.celery_config``)."""
    spec = conf.get("cuemem_beat_lock") or {}
    url = str(spec.get("url") or conf.broker_url or "")
    url = redis_py_url(url)  # kombu's redis+socket:// is redis-py's unix://
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise RuntimeError(f"the beat lock needs a Redis URL (cuemem_beat_lock or the broker), got {url!r}")
    return BeatLock(open_redis(url), spec.get("key", DEFAULT_KEY), float(spec.get("ttl_s", 60)))


class LockedScheduler(PersistentScheduler):
    """Celery's file-backed scheduler, run only while holding the beat lock."""

    _lock: BeatLock | None = None

    def setup_schedule(self) -> None:
        # Only the real scheduler gets here (celery builds a lazy one for its banner first).
        lock = lock_from_conf(self.app.conf)
        if not lock.acquire():
            raise BeatLockHeld(
                f"another beat holds the lock {lock.key!r} (holder {lock.holder()}); exactly one beat may "
                "run per deployment. It frees the lock when it stops, or after its TTL when it died."
            )
        self._lock = lock
        log.info("beat lock %s taken (%s, ttl %d ms)", lock.key, lock.token, lock.ttl_ms)
        super().setup_schedule()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self._lock is not None and not self._lock.renew():
            log.error("beat lock %s lost (held by %s): this beat stops", self._lock.key, self._lock.holder())
            self._lock = None
            raise SystemExit(1)
        return float(super().tick(*args, **kwargs))

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self._lock is not None:
                self._lock.release()
                log.info("beat lock %s released", self._lock.key)
                self._lock = None
