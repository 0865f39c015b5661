"""Adapters of the ``VectorIndex`` port (``shared.ports``).

``edge.EdgeVectorIndex`` runs the Qdrant engine in-process (qdrant-edge); ``server.QdrantServerIndex``
talks to a Qdrant server through qdrant-client. Both, and the in-memory fake of the tests, share the
argument checks and the result ordering defined here, so that every implementation answers the same
question the same way. This module must stay free of qdrant imports: the fake imports it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shared.ports import EmbeddingModelMismatch, IndexHit, IndexPoint, SparseTerms

# Payload keys the adapters own: they come from IndexPoint.tenant_id/user_id, never from the payload.
SCOPE_KEYS = ("tenant_id", "user_id")

# Scores are compared at this precision when ordering: float32 engines and the float64 fake disagree
# in the last bits, and two mathematically equal scores must tie so the id decides, everywhere.
SCORE_DECIMALS = 6

# A point's payload as the adapters return it.
Payload = dict[str, Any]

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


_MAX_SPARSE_INDEX = 2**32 - 1  # Qdrant's sparse indices are unsigned 32-bit


def check_sparse(terms: SparseTerms | None) -> tuple[list[int], list[float]] | None:
    """Validated (indices, values) sorted by index, or None when there are no terms.

    Accepts any pair of sequences (a SparseTerms that crossed JSON arrives as two lists). No terms
    means no sparse vector at all: the point is left out of keyword search and out of the IDF corpus
    alike, the same in every implementation."""
    if terms is None:
        return None
    try:
        raw_indices, raw_values = terms
    except (TypeError, ValueError):
        raise ValueError(f"sparse terms must be (indices, values), got {terms!r}") from None
    indices, values = list(raw_indices), list(raw_values)
    if len(indices) != len(values):
        raise ValueError(f"sparse terms have {len(indices)} indices but {len(values)} values")
    pairs: dict[int, float] = {}
    for index, value in zip(indices, values, strict=True):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= _MAX_SPARSE_INDEX:
            raise ValueError(f"sparse index must be an integer in 0..2^32-1, got {index!r}")
        weight = float(value)
        if not math.isfinite(weight):
            raise ValueError(f"sparse value must be finite, got {value!r}")
        if index in pairs:
            raise ValueError(f"sparse index {index} appears twice")
        pairs[index] = weight
    if not pairs:
        return None
    ordered = sorted(pairs)
    return ordered, [pairs[i] for i in ordered]


def point_payload(point: IndexPoint) -> dict[str, Any]:
    """The stored payload: the caller's fields plus the scope, which the payload cannot override."""
    require_scope(point.tenant_id, point.user_id)
    for key in SCOPE_KEYS:
        given = point.payload.get(key)
        if given is not None and given != getattr(point, key):
            raise ValueError(f"payload {key}={given!r} contradicts the point's {key}={getattr(point, key)!r}")
    return {**point.payload, "tenant_id": point.tenant_id, "user_id": point.user_id}


def payload_update(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a payload update may set: never the scope, so no update moves a point to another
    tenant or user."""
    return {k: v for k, v in payload.items() if k not in SCOPE_KEYS}


def fetch_limit(limit: int) -> int:
    """How many candidates to ask the engine for, so ties at the cut-off are settled by id, not by
    the engine's internal order. Ties wider than this margin still come back in engine order, which is
    stable for a given index state."""
    return limit * 2 + 16


def rank_hits(hits: Iterable[IndexHit], limit: int) -> list[IndexHit]:
    """Best first; equal scores (at SCORE_DECIMALS) ordered by id so results are deterministic."""
    ordered = sorted(hits, key=lambda hit: (-round(hit.score, SCORE_DECIMALS), hit.id))
    return ordered[: max(limit, 0)]
