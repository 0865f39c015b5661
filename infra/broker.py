"""The one way any cuemem process opens Redis, and the one send-only Celery app.

In the I/O commons, below both sides: the producer's ``Publisher`` needs them and may not import
``workers``; the workers, the service and the CLI need them and have no business importing the
app-facing ``producers``. ``shared`` would not do either: it is the pure core and imports no I/O
library.
"""

from __future__ import annotations

from typing import Any

import redis
from celery import Celery

# URL schemes of a Redis broker as Celery/kombu spell them (kombu names a unix socket
# ``redis+socket://``; the embedded broker uses one).
REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://")


def is_redis_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(REDIS_SCHEMES)


def redis_py_url(url: str) -> str:
    """``url`` as redis-py spells it: kombu's ``redis+socket://`` is redis-py's ``unix://``."""
    return url.replace("redis+socket://", "unix://", 1)


def open_redis(url: str, **options: Any) -> redis.Redis:
    """A redis-py client (with its own connection pool) for a Redis or a Celery broker URL."""
    return redis.Redis.from_url(redis_py_url(url), **options)


def send_only_app(broker_url: str, *, with_results: bool = False) -> Celery:
    """A minimal Celery app that sends tasks by name and never consumes (producers never import
    the workers' app). ``with_results``: the broker is also the result backend, for the callers
    that wait for an answer (the index owner's search and reindex); without it, sending a task
    subscribes to no result channel, which keeps a publish one round trip."""
    app = Celery(
        "cuemem-sender",
        broker=broker_url,
        backend=broker_url if with_results else None,
        set_as_current=False,
    )
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
    )
    return app
