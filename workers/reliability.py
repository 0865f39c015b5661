"""The one reliability profile every cuemem worker runs with (Celery configuration as data).

Why each setting:
- late acks + reject on worker loss: a message is acknowledged only after its unit of work
  committed, so a killed worker's message is delivered again (handlers are idempotent);
- prefetch 1: embedding is slow; a worker must not hoard messages another could run;
- JSON only: messages carry ids and plain values, never pickled objects;
- visibility timeout above the longest task plus its longest retry delay: otherwise Redis
  hands a still-running task to a second worker;
- results off except for the index owner's search RPC;
- unacked-message restore every few seconds, scanning each time, and a short restore mutex:
  kombu's defaults scan only every 100 s and let a SIGKILLed worker's restore mutex block every
  other worker's restore for 5 minutes, so a killed worker's messages came back minutes late;
- queues checked in a fixed order by the index owner only (``queue_order_for``): searches first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kombu import Queue as KombuQueue

from shared.queues import INDEX_OWNER_QUEUES, ROUTES, Queue
from shared.settings import Settings

RESTORE_INTERVAL_S = 5  # how often each worker looks for unacked messages past the visibility timeout
RESTORE_MUTEX_S = 30  # a restore takes milliseconds; a dead holder must not block others for long


def queue_order_for(queues: Sequence[str] | str | None) -> str:
    """Kombu's ``queue_order_strategy`` for a worker consuming ``queues`` (its ``-Q``, in order).

    The Redis transport pops with one ``BRPOP q1 q2 ...``, which takes from the first non-empty
    key. "round_robin" (kombu's default) moves the queue it just took from to the end of that
    list; "priority" keeps the list as given, so the first queue always wins. The index owner
    (exactly ``INDEX_OWNER_QUEUES``: search, then index) gets "priority": a search waits for the
    index task in hand, never behind the write backlog. Every other worker keeps round robin: a
    pipeline worker with strict priority would starve its later stages under sustained ingest.
    """
    if isinstance(queues, str):
        queues = queues.split(",")
    names = [q.strip() for q in queues or () if q.strip()]
    return "priority" if names == [q.value for q in INDEX_OWNER_QUEUES] else "round_robin"


def celery_config(settings: Settings, broker_url: str | None) -> dict[str, Any]:
    """The workers' app configuration. Without ``broker_url`` (a unit test calling task bodies)
    it names no broker; a worker refuses to start so (``workers/celery_app.py``)."""
    longest = settings.task_time_limit_s + settings.retry_backoff_max_s
    if settings.visibility_timeout_s <= longest:
        raise ValueError(
            f"CUEMEM_VISIBILITY_TIMEOUT_S={settings.visibility_timeout_s} must exceed the task time limit "
            f"plus the longest retry delay ({longest} s), or Redis redelivers running tasks"
        )
    broker = {"broker_url": broker_url, "result_backend": broker_url} if broker_url else {}
    return broker | {
        "task_ignore_result": True,
        "result_expires": 600,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "task_time_limit": settings.task_time_limit_s,
        "task_soft_time_limit": max(1, settings.task_time_limit_s - 5),
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            "unacked_restore_interval": RESTORE_INTERVAL_S,
            "unacked_restore_throttle": 1,
            "unacked_mutex_expire": RESTORE_MUTEX_S,
        },
        "result_backend_transport_options": {"visibility_timeout": settings.visibility_timeout_s},
        "broker_connection_retry_on_startup": True,
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_queues": [KombuQueue(q.value, routing_key=q.value) for q in Queue],
        "task_default_queue": Queue.INGEST.value,
        "task_routes": {name.value: {"queue": queue.value} for name, queue in ROUTES.items()},
        "task_send_sent_event": True,
        "worker_send_task_events": True,
        "worker_hijack_root_logger": False,
        # Exactly one beat (workers/redis/beat_lock.py): the scheduler holds a Redis lock and renews it
        # every tick; ticking at least every third of the TTL keeps a live beat's lock alive.
        "beat_scheduler": "workers.redis.beat_lock:LockedScheduler",
        "beat_max_loop_interval": max(1, settings.beat_lock_ttl_s // 3),
        "cuemem_beat_lock": {
            "url": settings.effective_redis_url or broker_url,
            "ttl_s": settings.beat_lock_ttl_s,
        },
        "timezone": "UTC",
        "enable_utc": True,
    }
