"""In-memory ``VectorIndex`` for unit tests of the core: brute-force cosine and BM25, no engine.

It shares the argument checks and result ordering of the real adapters (``workers.index``), and the
contract suite (tests/contract/test_index_contract.py) runs it beside them, so a core test that
passes against the fake relies on nothing the adapters do differently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shared.ports import IndexHit, IndexPoint, IndexUnavailable, SparseTerms
from workers.index import (
    check_model,
    check_sparse,
    check_vector,
    normalize_id,
    normalize_statuses,
    payload_update,
    point_payload,
    rank_hits,
    require_scope,
)


@dataclass(frozen=True)
class _Stored:
    vector: tuple[float, ...]
    payload: dict[str, Any]
    sparse: dict[int, float] | None = None

    def in_scope(self, tenant_id: str, user_id: str) -> bool:
        return self.payload["tenant_id"] == tenant_id and self.payload["user_id"] == user_id


class FakeVectorIndex:
    def __init__(self) -> None:
        self._model: tuple[str, int] | None = None  # None: the index does not exist yet
        self._points: dict[str, _Stored] = {}
        self.closed = False

    def ensure(self, dim: int, model_name: str) -> None:
        if self._model is None:
            self._model = (model_name, dim)
            return
        check_model(self._model[0], self._model[1], model_name, dim)

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        if self._model is None:
            raise IndexUnavailable("fake index does not exist yet: call ensure(dim, model) first")
        staged = {
            normalize_id(p.id): _Stored(
                tuple(check_vector(p.vector, self._model[1])), point_payload(p), _sparse_dict(p.sparse)
            )
            for p in points
        }
        self._points.update(staged)

    def delete(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> None:
        require_scope(tenant_id, user_id)
        for point_id in {normalize_id(i) for i in ids}:
            stored = self._points.get(point_id)
            if stored is not None and stored.in_scope(tenant_id, user_id):
                del self._points[point_id]

    def search(
        self,
        tenant_id: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        require_scope(tenant_id, user_id)
        wanted = set(normalize_statuses(statuses))
        if limit <= 0 or not wanted or self._model is None:
            return []
        query = check_vector(vector, self._model[1])
        hits = (
            IndexHit(id=point_id, score=_cosine(query, stored.vector), payload=dict(stored.payload))
            for point_id, stored in self._points.items()
            if stored.in_scope(tenant_id, user_id) and stored.payload.get("status") in wanted
        )
        return rank_hits(hits, limit)

    def search_keywords(
        self,
        tenant_id: str,
        user_id: str,
        terms: SparseTerms,
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        require_scope(tenant_id, user_id)
        wanted = set(normalize_statuses(statuses))
        query = _sparse_dict(terms)
        if limit <= 0 or not wanted or not query or self._model is None:
            return []
        # Qdrant's IDF modifier: idf = ln((N - df + 0.5) / (df + 0.5) + 1), over the corpus of this
        # tenant's and user's points that have terms (every status, like the adapters).
        corpus = [
            stored.sparse
            for stored in self._points.values()
            if stored.sparse is not None and stored.in_scope(tenant_id, user_id)
        ]
        idf = {
            index: math.log((len(corpus) - df + 0.5) / (df + 0.5) + 1)
            for index in query
            for df in [sum(1 for doc in corpus if index in doc)]
        }
        hits = (
            IndexHit(
                id=point_id,
                score=sum(
                    value * idf[i] * stored.sparse[i] for i, value in query.items() if i in stored.sparse
                ),
                payload=dict(stored.payload),
            )
            for point_id, stored in self._points.items()
            if stored.sparse is not None
            and stored.in_scope(tenant_id, user_id)
            and stored.payload.get("status") in wanted
            and not query.keys().isdisjoint(stored.sparse)
        )
        return rank_hits(hits, limit)

    def ids(self, tenant_id: str, user_id: str) -> set[str]:
        require_scope(tenant_id, user_id)
        return {point_id for point_id, stored in self._points.items() if stored.in_scope(tenant_id, user_id)}

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        require_scope(tenant_id, user_id)
        return {
            point_id: dict(stored.payload)
            for point_id, stored in self._points.items()
            if stored.in_scope(tenant_id, user_id)
        }

    def set_payload(self, tenant_id: str, user_id: str, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        require_scope(tenant_id, user_id)
        for point_id, update in ((normalize_id(i), payload_update(p)) for i, p in payloads.items()):
            stored = self._points.get(point_id)
            if stored is not None and stored.in_scope(tenant_id, user_id):
                self._points[point_id] = _Stored(stored.vector, {**stored.payload, **update}, stored.sparse)

    def count(self, tenant_id: str | None = None) -> int:
        return sum(tenant_id in (None, s.payload["tenant_id"]) for s in self._points.values())

    def reset(self, dim: int, model_name: str) -> None:
        self._points.clear()
        self._model = (model_name, dim)

    def optimize(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def _sparse_dict(terms: SparseTerms | None) -> dict[int, float] | None:
    checked = check_sparse(terms)
    return None if checked is None else dict(zip(*checked, strict=True))


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    # Qdrant scores a zero vector 0 against everything; so does the fake.
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0 else sum(x * y for x, y in zip(a, b, strict=True)) / norm
