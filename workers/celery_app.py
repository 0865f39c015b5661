"""The Celery application (entry point for `celery -A workers.celery_app worker|beat|flower`).

This module is an entry point, so it reads settings from the environment at import. It needs
CUEMEM_BROKER_URL: `cuemem worker` sets it when it runs on the embedded default.
"""

from __future__ import annotations

import logging

from celery import Celery
from celery.signals import worker_process_init, worker_process_shutdown

from shared.settings import get_settings
from workers.lexicon import apply_lexicon
from workers.reliability import celery_config

log = logging.getLogger(__name__)

_settings = get_settings()
if not _settings.broker_url:
    raise RuntimeError(
        "CUEMEM_BROKER_URL is not set: point it at Redis (redis://host:6379/0), or run `cuemem worker`, "
        "which starts the embedded broker for you"
    )

# A bad user lexicon file stops the worker at start, naming the file, instead of failing every task.
apply_lexicon(_settings)

app = Celery("cuemem", set_as_current=True)
app.conf.update(celery_config(_settings, _settings.broker_url))
app.conf.include = ["workers.tasks"]

try:  # beat's schedule lives in the top-level module the product design names
    import beat_schedule

    app.conf.beat_schedule = beat_schedule.BEAT_SCHEDULE
except ImportError:  # pragma: no cover - only when the package is installed without it
    log.warning("beat_schedule module not found; beat will run no periodic task")


@worker_process_init.connect
def _fresh_process(**_: object) -> None:
    # Connections, engines and the index must never be shared across fork: each child builds its
    # own on first use.
    from workers.bootstrap import reset_container

    reset_container()


@worker_process_shutdown.connect
def _close_process(**_: object) -> None:
    from workers.bootstrap import reset_container

    reset_container()
