"""What a CLI command needs, started for the command and stopped when it ends.

On the embedded default that is Postgres and Redis from the data dir (and, for commands that
process events, the worker processes); with CUEMEM_* URLs set it is just connections to those.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

from shared.settings import Settings
from workers.bootstrap import Container, build_container
from workers.lexicon import apply_lexicon
from workers.runtime.embedded import embedded_services
from workers.runtime.processes import WorkerProcess, running_workers
from workers.runtime.serving import serving

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    settings: Settings
    container: Container
    workers: list[WorkerProcess]

    def stop_workers(self) -> None:
        """Stop the command's own workers (warm shutdown); the embedded index is then free."""
        for worker in self.workers:
            worker.stop()
        self.workers.clear()


@contextmanager
def open_runtime(
    settings: Settings, *, start_workers: bool = False, beat: bool = False, command: str = "cuemem"
) -> Iterator[Runtime]:
    """The command's runtime. ``start_workers`` on the embedded broker makes this process the one
    that serves the data dir (``command`` names it to another one): it takes the data-dir lock
    before anything starts (``DataDirServed`` when another process holds it), then gives the
    messages a dead run's workers left unacknowledged back to their queues before its own
    workers start."""
    apply_lexicon(settings)  # a bad lexicon file fails before any service starts
    with ExitStack() as stack:
        serves = start_workers and not settings.broker_url
        if serves:
            stack.enter_context(serving(settings.resolved_data_dir, command))
        resolved = stack.enter_context(embedded_services(settings))
        workers: list[WorkerProcess] = []
        if start_workers:
            if serves:
                _restore_dead_workers_messages(resolved)
            workers = stack.enter_context(running_workers(resolved, beat=beat))
        container = build_container(resolved)
        stack.callback(container.close)
        yield Runtime(resolved, container, workers)


def _restore_dead_workers_messages(settings: Settings) -> None:
    """The data-dir lock is this process's and every worker of the dir holds it while it lives:
    no consumer of the embedded broker is alive, so whatever is unacknowledged was held by a
    worker that died (a killed run), and waits for nobody. Without this, it would come back only
    after the visibility timeout (an hour), and ``--wait`` would wait that long."""
    from workers.broker import restore_unacked
    from workers.reliability import celery_config

    url = str(settings.broker_url)
    restored = restore_unacked(url, celery_config(settings, url)["broker_transport_options"])
    if restored:
        log.warning("restored %d message(s) a dead worker of this data dir left unacknowledged", restored)
