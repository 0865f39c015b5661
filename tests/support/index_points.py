"""Points and indexes for the VectorIndex contract tests: readable ids, basis vectors, scopes
that must never see each other, and a factory per implementation (embedded, server, fake)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from shared.language.sparse import sparse_document, sparse_query
from shared.ports import IndexPoint, IndexUnavailable, VectorIndex
from tests.support.fake_index import FakeVectorIndex
from workers.index.edge import EdgeVectorIndex
from workers.index.server import QdrantServerIndex

DIM = 8
MODEL = "test-model-a"
OTHER_MODEL = "test-model-b"
TENANT = "t1"
USER = "alice"


def pid(n: int) -> str:
    """A readable, sortable point id: pid(1) < pid(2) < ... as UUID text."""
    return str(uuid.UUID(int=n))


def basis(i: int, scale: float = 1.0) -> list[float]:
    return [scale if k == i else 0.0 for k in range(DIM)]


def point(
    n: int,
    vector: list[float],
    *,
    tenant: str = TENANT,
    user: str = USER,
    status: str = "active",
    type_: str = "fact",
) -> IndexPoint:
    return IndexPoint(
        id=pid(n), tenant_id=tenant, user_id=user, vector=vector, payload={"status": status, "type": type_}
    )


def edge_index(tmp_path: Path) -> EdgeVectorIndex:
    return EdgeVectorIndex(tmp_path / "shard")


def server_index(tmp_path: Path) -> QdrantServerIndex:
    return QdrantServerIndex(QdrantClient(":memory:"), "test")


def fake_index(tmp_path: Path) -> FakeVectorIndex:
    return FakeVectorIndex()


FACTORIES: dict[str, Callable[[Path], VectorIndex]] = {
    "edge": edge_index,
    "server": server_index,
    "fake": fake_index,
}


# Users and tenants that must never see each other's points: look-alikes differ by one character,
# by case or by a trailing space; the last looks like a query injection and must just match nothing.
SCOPES = [
    ("t1", "alice"),
    ("t1", "alice2"),
    ("t1", "Alice"),
    ("t1", "alice "),
    ("t2", "alice"),
    ("t10", "alice"),
]

# Scopes that hold no point: injection-looking ids, prefixes, another case, a wildcard.
FOREIGN_SCOPES = [
    ("t1", "* OR 1=1"),
    ("t1", "alice' OR '1'='1"),
    ("t1", "al"),
    ("t1", "ALICE"),
    ("t", "alice"),
    ("*", "*"),
]


def text_point(
    n: int,
    text: str | None,
    *,
    tenant: str = TENANT,
    user: str = USER,
    status: str = "active",
) -> IndexPoint:
    """A point whose keyword terms come from ``text`` (None: a point without terms)."""
    return IndexPoint(
        id=pid(n),
        tenant_id=tenant,
        user_id=user,
        vector=basis(n % DIM),
        payload={"status": status, "type": "fact"},
        sparse=None if text is None else sparse_document(text),
    )


def keyword_ids(
    index: VectorIndex, text: str, *, tenant: str = TENANT, user: str = USER, **kw: object
) -> list[str]:
    return [h.id for h in index.search_keywords(tenant, user, sparse_query(text), limit=10, **kw)]  # type: ignore[arg-type]


def check_dense_only_collection_asks_for_reindex(index: VectorIndex) -> None:
    """On a collection an older cuemem made (dense vectors only): writes are kept without their
    terms, a keyword search asks for ``cuemem reindex``, and a reset makes keyword search work."""
    index.ensure(DIM, MODEL)
    index.upsert([text_point(1, "coffee")])  # stored without its terms, not refused
    assert index.ids(TENANT, USER) == {pid(1)}
    with pytest.raises(IndexUnavailable, match="cuemem reindex"):
        index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=5)

    index.reset(DIM, MODEL)
    index.upsert([text_point(1, "coffee")])
    assert keyword_ids(index, "coffee") == [pid(1)]
