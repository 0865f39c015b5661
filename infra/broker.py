"""The one way any cuemem process opens Redis, and the one send-only Celery app.

In the I/O commons, below both sides: the producer's ``Publisher`` needs them and may not import
``workers``; the workers, the service and the CLI need them and have no business importing the
app-facing ``producers``. ``shared`` would not do either: it is the pure core and imports no I/O
library.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import redis
from celery import Celery
from celery.result import AsyncResult
from kombu.exceptions import OperationalError

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


def send_task(app: Celery, name: str, **options: Any) -> AsyncResult:
    """``app.send_task``, with a broker connection lost mid-publish always raised as kombu's
    ``OperationalError`` (the error every caller already retries).

    kombu's Redis transport can lose that race in its own code: a channel whose connection was
    dropped while the broker restarts reads ``self.connection.client`` from ``None`` when it
    publishes (``Channel._connparams`` under ``_put``), and the caller gets an ``AttributeError``
    that no retry policy takes for an outage; a task's follow-up was then dead-lettered instead
    of retried. Only an ``AttributeError`` raised inside kombu is translated: one from anywhere
    else is a bug and stays what it is."""
    try:
        return app.send_task(name, **options)
    except AttributeError as exc:
        if not _raised_inside(exc.__traceback__, "kombu."):
            raise
        raise OperationalError(f"the broker connection was lost while sending {name}: {exc}") from exc


def _raised_inside(tb: TracebackType | None, package: str) -> bool:
    """Whether the innermost frame of ``tb`` runs code of ``package`` (a dotted prefix)."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and str(last.tb_frame.f_globals.get("__name__", "")).startswith(package)
