"""One way to open a redis-py client from a URL as Celery/kombu spell it.

kombu names a Redis unix socket ``redis+socket://`` (the embedded broker uses one); redis-py only
knows ``unix://``. Every adapter that opens Redis from a broker URL goes through here.
"""

from __future__ import annotations

from typing import Any

import redis


def redis_py_url(url: str) -> str:
    return url.replace("redis+socket://", "unix://", 1)


def connect(url: str, **options: Any) -> redis.Redis:
    return redis.Redis.from_url(redis_py_url(url), **options)
