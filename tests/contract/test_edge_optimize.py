"""The embedded engine has no background optimizer: ``optimize`` (run by ``memory.optimize_index``
and ``cuemem maintain``) is what builds the HNSW graph, and without it every dense search scans the
user's points. Checked on the engine's own count of indexed vectors (``EdgeShard.info()``), on a
shard past the engine's indexing threshold (10,000 KB of vectors: 350 vectors of 8,192 floats;
below it the engine keeps the plain index, and a test on a few dozen points builds nothing)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_edge import EdgeShard

import workers.tasks.index  # noqa: F401  (registers the tasks, as the worker's include does)
from shared.ports import IndexPoint
from shared.queues import TaskName
from shared.settings import Settings
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container, install_container, reset_container
from workers.celery_app import app
from workers.endpoints.embedders.hashing import HashingEmbedder
from workers.index.edge import EdgeVectorIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

POINTS, DIM = 350, 8192  # 11.2 MB of float32 vectors: past the 10,000 KB threshold
MODEL = "optimize-test"


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


def _filled(path: Path, seed: int) -> tuple[EdgeVectorIndex, list[IndexPoint]]:
    rng = random.Random(seed)
    points = [
        IndexPoint(f"00000000-0000-0000-0000-{i:012d}", "t1", "alice", _vector(rng), {"status": "active"})
        for i in range(1, POINTS + 1)
    ]
    index = EdgeVectorIndex(path)
    index.ensure(DIM, MODEL)
    for start in range(0, POINTS, 100):
        index.upsert(points[start : start + 100])
    return index, points


def _indexed_vectors(path: Path) -> tuple[int, int]:
    """(points, indexed vectors) as the engine counts them; the index must be closed."""
    shard = EdgeShard.load(str(path))
    try:
        info = shard.info()
        return info.points_count, info.indexed_vectors_count
    finally:
        shard.close()


def test_optimize_builds_the_hnsw_graph_and_searches_still_find_each_point(tmp_path: Path) -> None:
    path = tmp_path / "memories"
    index, points = _filled(path, seed=1)
    index.close()
    assert _indexed_vectors(path) == (POINTS, 0), "the graph existed before optimize: nothing is tested"

    index = EdgeVectorIndex(path)
    index.ensure(DIM, MODEL)
    assert index.optimize() is True
    for p in points[::50]:  # served by the graph now: each point is its own nearest neighbour
        assert index.search("t1", "alice", p.vector, limit=1)[0].id == p.id
    assert index.optimize() is False, "a second optimize found work left"
    index.close()
    assert _indexed_vectors(path) == (POINTS, POINTS)


@pytest.fixture
def two_indexes(tmp_path: Path) -> Iterator[tuple[EdgeVectorIndex, EdgeVectorIndex]]:
    memories, _ = _filled(tmp_path / "memories", seed=2)
    turns, _ = _filled(tmp_path / "turns", seed=3)
    yield memories, turns
    reset_container()
    memories.close()
    turns.close()


def test_the_optimize_task_builds_the_graphs_of_the_memory_index_and_the_conversation_log(
    tmp_path: Path, two_indexes: tuple[EdgeVectorIndex, EdgeVectorIndex]
) -> None:
    memories, turns = two_indexes
    settings = Settings(index_turns=True, broker_url=None, redis_url=None, data_dir=tmp_path / "data")
    install_container(
        build_container(
            settings,
            uow=FakeStore().uow,
            embedder=HashingEmbedder(dim=DIM),
            index=memories,
            turn_index=turns,
            dispatch=lambda _: None,
            llm=None,
            reranker=None,
        )
    )
    app.tasks[TaskName.OPTIMIZE_INDEX.value]()
    memories.close()
    turns.close()
    assert _indexed_vectors(memories.path) == (POINTS, POINTS), "the memory index's graph was not built"
    assert _indexed_vectors(turns.path) == (POINTS, POINTS), "the conversation log's graph was not built"
