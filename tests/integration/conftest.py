"""The SQL tests' container: real Postgres and Redis, vectors from a small hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.settings import Settings
from workers.bootstrap import Container, build_container


@pytest.fixture
def sql_settings(it_settings: Settings) -> Settings:
    """``it_settings`` with a 16-dimension hashing embedder: these tests store vectors of some
    model, what they mean does not matter. A module that needs more overrides this fixture."""
    return it_settings.model_copy(update={"embedder": "hash", "embedding_dim": 16})


@pytest.fixture
def c(sql_settings: Settings) -> Iterator[Container]:
    """A container on ``sql_settings``, closed at teardown."""
    container = build_container(sql_settings)
    yield container
    container.close()
