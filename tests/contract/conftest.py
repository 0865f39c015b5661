"""Fixtures of the contract tier: every VectorIndex implementation, blank or ensured; the scripted
OpenAI-compatible server and a sink that records the LLM client's usage."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.ports import VectorIndex
from tests.support.index_points import DIM, FACTORIES, MODEL
from tests.support.llm_stub import ListSink
from tests.support.openai_stub import StubServer


@pytest.fixture(params=sorted(FACTORIES))
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """An index that was never ensured, of each implementation in turn."""
    index = FACTORIES[request.param](tmp_path)
    yield index
    index.close()


@pytest.fixture
def index(blank: VectorIndex) -> VectorIndex:
    """An index ensured for DIM dimensions of MODEL."""
    blank.ensure(DIM, MODEL)
    return blank


@pytest.fixture
def stub() -> Iterator[StubServer]:
    """A scripted OpenAI-compatible server on a free local port."""
    with StubServer() as server:
        yield server


@pytest.fixture
def sink() -> ListSink:
    """Records every LLM usage the client reports."""
    return ListSink()
