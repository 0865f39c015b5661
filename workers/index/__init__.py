"""Adapters of the ``VectorIndex`` port (``shared.ports``).

``edge.EdgeVectorIndex`` runs the Qdrant engine in-process (qdrant-edge); ``server.QdrantServerIndex``
talks to a Qdrant server through qdrant-client. Both, and the in-memory fake of the tests, share the
argument checks and the result ordering defined here, so that every implementation answers the same
question the same way. This module must stay free of qdrant imports: the fake imports it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from shared.ports import EmbeddingModelMismatch, IndexHit, IndexPoint

# Payload keys the adapters own: they come from IndexPoint.tenant_id/user_id, never from the payload.
SCOPE_KEYS = ("tenant_id", "user_id")

# Scores are compared at this precision when ordering: float32 engines and the float64 fake disagree
# in the last bits, and two mathematically equal scores must tie so the id decides, everywhere.
SCORE_DECIMALS = 6

# Stands for the model of vectors whose index never recorded one.
UNRECORDED = "<unrecorded>"


def require_scope(tenant_id: object, user_id: object) -> None:
    """Reject a missing tenant or user: an empty user must never mean "all users"."""
    for name, value in (("tenant_id", tenant_id), ("user_id", user_id)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} must be a non-empty string, got {value!r}")


def check_model(stored_model: str, stored_dim: int, model_name: str, dim: int) -> None:
    """Raise EmbeddingModelMismatch unless the index was built for exactly this model and dim."""
    if stored_model != model_name:
        raise EmbeddingModelMismatch(stored_model, model_name)
    if int(stored_dim) != dim:
        # Same name, other size (e.g. a truncated Matryoshka embedding): still not comparable.
        raise EmbeddingModelMismatch(f"{stored_model} (dim {stored_dim})", f"{model_name} (dim {dim})")


def normalize_id(point_id: object) -> str:
    """Canonical UUID text: Qdrant stores UUIDs, so "ABC..." and "abc..." are the same point."""
    if not isinstance(point_id, str):
        raise ValueError(f"point id must be UUID text, got {point_id!r}")
    try:
        return str(uuid.UUID(point_id))
    except ValueError:
        raise ValueError(f"point id must be UUID text, got {point_id!r}") from None


def normalize_statuses(statuses: Sequence[str] | str) -> list[str]:
    # A bare "active" would otherwise be iterated as the statuses "a", "c", "t", ...
    if isinstance(statuses, str):
        return [statuses]
    return list(statuses)


def check_vector(vector: Sequence[float], dim: int | None) -> list[float]:
    values = [float(v) for v in vector]
    if dim is not None and len(values) != dim:
        raise ValueError(f"vector has {len(values)} dimensions, the index holds {dim}")
    return values


def point_payload(point: IndexPoint) -> dict[str, Any]:
    """The stored payload: the caller's fields plus the scope, which the payload cannot override."""
    require_scope(point.tenant_id, point.user_id)
    for key in SCOPE_KEYS:
        given = point.payload.get(key)
        if given is not None and given != getattr(point, key):
            raise ValueError(f"payload {key}={given!r} contradicts the point's {key}={getattr(point, key)!r}")
    return {**point.payload, "tenant_id": point.tenant_id, "user_id": point.user_id}


def fetch_limit(limit: int) -> int:
    """How many candidates to ask the engine for, so ties at the cut-off are settled by id, not by
    the engine's internal order. Ties wider than this margin still come back in engine order, which is
    stable for a given index state."""
    return limit * 2 + 16


def rank_hits(hits: Iterable[IndexHit], limit: int) -> list[IndexHit]:
    """Best first; equal scores (at SCORE_DECIMALS) ordered by id so results are deterministic."""
    ordered = sorted(hits, key=lambda hit: (-round(hit.score, SCORE_DECIMALS), hit.id))
    return ordered[: max(limit, 0)]
