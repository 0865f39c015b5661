"""A no-op Celery task on the product's own app and configuration, for `cuemem bench ingest`.

The benchmark starts a worker with ``-A bench.noop_tasks`` (this module exposes the
product's ``app``, so the worker runs the exact reliability profile of the pipeline workers) and
measures how many of these it runs per second: the floor any pipeline stage pays per task.
"""

from __future__ import annotations

from bench.ingest_services import NOOP_QUEUE, NOOP_TASK
from workers.celery_app import app


@app.task(name=NOOP_TASK, ignore_result=True)
def noop() -> None:
    return None


__all__ = ["NOOP_QUEUE", "NOOP_TASK", "app", "noop"]
