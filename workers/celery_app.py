"""The workers' Celery application (entry point for `celery -A workers.celery_app worker|beat|flower`).

Importing this module reads no settings and opens nothing, so that the task bodies
(``workers/tasks/``) import in a unit test. The app reads its configuration from the
settings on first use of ``app.conf`` (Celery's lazy defaults): when a worker, beat or flower
starts, or when a task is first bound. A worker needs CUEMEM_BROKER_URL and refuses to start
without it; `cuemem worker` sets it when it runs on the embedded default.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, bootsteps
from celery.signals import (
    celeryd_after_setup,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_shutdown,
)

from shared.settings import get_settings
from workers.lexicon import apply_lexicon
from workers.reliability import celery_config, queue_order_for

log = logging.getLogger(__name__)


def _config_from_settings() -> dict[str, Any]:
    settings = get_settings()
    # A bad user lexicon file stops the worker at start, naming the file, instead of failing every task.
    apply_lexicon(settings)
    return celery_config(settings, settings.broker_url)


class _RequireBroker(bootsteps.Step):
    """Refuses to start a worker that has no broker to consume from: Celery would otherwise try
    its default (RabbitMQ on localhost) and retry forever."""

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        if not parent.app.conf.broker_url:
            raise RuntimeError(
                "CUEMEM_BROKER_URL is not set: point it at Redis (redis://host:6379/0), or run "
                "`cuemem worker`, which starts the embedded broker for you"
            )


app = Celery("cuemem", set_as_current=True)
app.add_defaults(_config_from_settings)  # a promise: read on first use of app.conf, not here
app.conf.include = ["workers.tasks.ingest", "workers.tasks.index", "workers.tasks.lifecycle"]
app.steps["worker"].add(_RequireBroker)

try:  # beat's schedule lives in the top-level module the product design names
    import beat_schedule

    app.conf.beat_schedule = beat_schedule.BEAT_SCHEDULE
except ImportError:  # pragma: no cover - only when the package is installed without it
    log.warning("beat_schedule module not found; beat will run no periodic task")


@celeryd_init.connect
def _queue_order(conf: Any = None, options: dict[str, Any] | None = None, **_: object) -> None:
    """Choose the order this worker checks its queues in, from its ``-Q`` (see queue_order_for).
    Runs before the worker opens its broker connection, which reads the transport options."""
    queues = (options or {}).get("queues")
    strategy = queue_order_for(queues)
    transport = dict(conf.broker_transport_options or {})
    conf.broker_transport_options = transport | {"queue_order_strategy": strategy}


@celeryd_after_setup.connect
def _say_queue_order(instance: Any = None, conf: Any = None, **_: object) -> None:
    # Logged here, not in _queue_order: the worker's logging is set up between the two signals.
    queues = list(instance.app.amqp.queues.consume_from) if instance is not None else []
    strategy = (conf.broker_transport_options or {}).get("queue_order_strategy") if conf else None
    log.info("queue order %s: %s", strategy, ", ".join(queues))


def _trace_tasks() -> None:
    # Before the first task: the Celery instrumentation must be in place when a task starts,
    # so that its span continues the trace its message carries (infra/tracing.py).
    from infra import tracing
    from shared.settings import get_settings

    tracing.configure(get_settings(), tracing.WORKER_SERVICE)


def _load_before_fork() -> None:
    """Load in the worker's main process, before its pool forks, what every task process would
    otherwise load inside its first task, and so inside that task's time limit: jieba's dictionary
    and the modules the container imports on first use (the database adapters, the LLM endpoint).
    Each child, one started again after a crash too, begins with them. Nothing here opens a
    connection or a file that a child would share.

    Why: at a fault test's start, with four pool children starting at once on two busy cores, a
    child's first task spent 4 to 9 s in these loads (py-spy: jieba's dictionary, then the
    imports), and once more than the 20 s time limit of the tests that kill workers. That task was
    dead-lettered. Loaded here, they cost about 2 s once, in the main process."""
    import workers.db.out_of_range
    import workers.db.uow
    import workers.endpoints.llm
    import workers.endpoints.llm_runtime  # noqa: F401
    from shared.language.text import load_segmenter

    load_segmenter()


@worker_init.connect
def _worker_started(sender: Any = None, **_: object) -> None:
    _load_before_fork()
    # A solo pool runs the tasks in this process; a prefork pool in children (worker_process_init).
    if "solo" in str(getattr(sender, "pool_cls", "")).lower():
        _trace_tasks()


@worker_process_init.connect
def _fresh_process(**_: object) -> None:
    # Connections, engines and the index must never be shared across fork: each child builds its
    # own on first use.
    from workers.bootstrap import reset_container

    reset_container()
    _trace_tasks()


@worker_process_shutdown.connect
def _close_process(**_: object) -> None:
    from infra import tracing
    from workers.bootstrap import reset_container

    reset_container()
    tracing.flush()


@worker_shutdown.connect
def _worker_stopped(**_: object) -> None:
    from infra import tracing

    tracing.flush()


_started: dict[str, float] = {}


@task_prerun.connect
def _task_started(task_id: str | None = None, **_: object) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_finished(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: object
) -> None:
    """Run time per task into Redis, where the API's /metrics reads it (workers/redis/task_metrics.py).
    A metrics write must never fail a task: errors are logged and dropped."""
    started = _started.pop(task_id or "", None)
    if started is None or task is None:
        return
    try:
        from workers.bootstrap import container
        from workers.redis.task_metrics import record_task_run

        client = container().redis_client()
        if client is not None:
            record_task_run(client, str(task.name), time.perf_counter() - started, state or "UNKNOWN")
    except Exception:
        log.warning("could not record the run time of %s", getattr(task, "name", "?"), exc_info=True)
