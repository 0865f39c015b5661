"""The end-to-end tests' way to put turns through real workers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

import pytest

from shared.settings import Settings
from tests.support.services import PublishProcessed, publish_processed
from workers.bootstrap import Container
from workers.runtime.processes import WorkerProcess


@pytest.fixture
def publish_turns(
    it_settings: Settings, start_workers: Callable[[], list[WorkerProcess]]
) -> Iterator[PublishProcessed]:
    """``publish_processed`` bound to the test's settings and workers, for its ``ingest`` fixture
    to call as often as the test likes; every container it built is closed at teardown."""
    containers: list[Container] = []

    def publish(turns: Sequence[tuple[str, str, datetime]]) -> tuple[Container, list[str]]:
        container, ids = publish_processed(it_settings, start_workers, turns)
        containers.append(container)
        return container, ids

    yield publish
    for container in containers:
        container.close()
