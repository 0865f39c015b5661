"""``VectorIndex`` on a Qdrant server, through qdrant-client (also runs against its local mode).

The embedding model and dim are kept in the collection's own ``metadata`` (Qdrant >= 1.16, and
qdrant-client's local mode since 1.16). Compared with a reserved meta point or a sidecar collection,
the record cannot be separated from the vectors it describes: dropping or recreating the collection
drops the record with it, no search has to filter a meta point out, and there is no second object to
keep in step. A server too old to keep metadata is detected when the collection is created and
reported as IndexUnavailable rather than silently running without the model check.

Keyword search uses the sparse vector ``bm25`` (IDF modifier) declared at creation, with the IDF
computed per tenant and user (``SearchParams(idf=IdfCorpusParams(corpus=filter))``, Qdrant >= 1.19;
an older server rejects the request). A collection made before the sparse vector existed cannot gain
it in place: upserts store no terms there (with a warning) and keyword search raises
IndexUnavailable pointing at ``cuemem reindex``, which recreates the collection.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from shared.ports import EmbeddingModelMismatch, IndexHit, IndexPoint, IndexUnavailable, SparseTerms
from workers.index import (
    UNRECORDED,
    Payload,
    check_model,
    check_sparse,
    check_vector,
    fetch_limit,
    normalize_id,
    normalize_statuses,
    payload_update,
    point_payload,
    rank_hits,
    require_scope,
)

logger = logging.getLogger(__name__)

DENSE = "dense"
SPARSE = "bm25"
_SCROLL_PAGE = 1024
_UNAVAILABLE_STATUSES = {502, 503, 504}


class QdrantServerIndex:
    def __init__(self, client: QdrantClient, collection: str) -> None:
        if not collection:
            raise ValueError("collection must be a non-empty string")
        self._client = client
        self._collection = collection
        self._dim: int | None = None
        # Only "exists" is remembered: a collection that is missing now may be created by another
        # worker at any time, while ours disappears only through reset(), which recreates it.
        self._exists = False
        # (declared, with IDF) for the sparse vector SPARSE; read once per collection.
        self._sparse: tuple[bool, bool] | None = None

    @classmethod
    def from_url(
        cls, url: str, api_key: str | None = None, collection: str = "cuemem_memories"
    ) -> QdrantServerIndex:
        return cls(QdrantClient(url=url, api_key=api_key), collection)

    @property
    def collection(self) -> str:
        return self._collection

    # ---- VectorIndex -------------------------------------------------------------------------

    def ensure(self, dim: int, model_name: str) -> None:
        with _translate_errors(self._collection):
            if not self._client.collection_exists(self._collection):
                self._create_racing(dim, model_name)
            self._check_stored_model(dim, model_name)
            self._dim = dim
            self._exists = True

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        with _translate_errors(self._collection):
            if not self._collection_exists():
                raise IndexUnavailable(
                    f"collection {self._collection!r} does not exist yet: call ensure(dim, model) first"
                )
            dim = self._known_dim()
            declared, _ = self._sparse_config()
            structs: list[models.PointStruct] = []
            dropped = 0
            for p in points:
                vectors: dict[str, Any] = {DENSE: check_vector(p.vector, dim)}
                sparse = check_sparse(p.sparse)
                # Upsert replaces the whole point: without terms it keeps no sparse vector.
                if sparse is not None and declared:
                    vectors[SPARSE] = models.SparseVector(indices=sparse[0], values=sparse[1])
                elif sparse is not None:
                    dropped += 1
                structs.append(
                    models.PointStruct(id=normalize_id(p.id), vector=vectors, payload=point_payload(p))
                )
            if dropped:
                # Degrade rather than fail: ingest keeps working, and search_keywords says what to do.
                logger.warning(
                    "collection %s has no sparse vector %r: %d points stored without keyword terms; "
                    "run `cuemem reindex` to enable keyword search",
                    self._collection,
                    SPARSE,
                    dropped,
                )
            # wait=True: the call returns once the points are applied, like the edge adapter's flush.
            self._client.upsert(self._collection, points=structs, wait=True)

    def delete(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> None:
        require_scope(tenant_id, user_id)
        point_ids: list[models.ExtendedPointId] = sorted({normalize_id(i) for i in ids})
        if not point_ids:
            return
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return
            # The scope conditions make a guessed id of another user match nothing.
            scoped = _scope_filter(tenant_id, user_id, extra=[models.HasIdCondition(has_id=point_ids)])
            self._client.delete(
                self._collection, points_selector=models.FilterSelector(filter=scoped), wait=True
            )

    def search(
        self,
        tenant_id: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        require_scope(tenant_id, user_id)
        wanted = normalize_statuses(statuses)
        if limit <= 0 or not wanted:
            return []
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return []
            status = models.FieldCondition(key="status", match=models.MatchAny(any=wanted))
            response = self._client.query_points(
                self._collection,
                query=check_vector(vector, self._known_dim()),
                using=DENSE,
                query_filter=_scope_filter(tenant_id, user_id, extra=[status]),
                limit=fetch_limit(limit),
                with_payload=True,
            )
        return _ranked(response.points, limit)

    def search_keywords(
        self,
        tenant_id: str,
        user_id: str,
        terms: SparseTerms,
        limit: int,
        statuses: Sequence[str] = ("active",),
    ) -> list[IndexHit]:
        require_scope(tenant_id, user_id)
        wanted = normalize_statuses(statuses)
        sparse = check_sparse(terms)
        if limit <= 0 or not wanted or sparse is None:
            return []
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return []
            declared, idf = self._sparse_config()
            if not (declared and idf):
                raise IndexUnavailable(
                    f"collection {self._collection!r} has no sparse vector {SPARSE!r} with IDF (made by an "
                    "older cuemem): run `cuemem reindex` to rebuild it with keyword search"
                )
            status = models.FieldCondition(key="status", match=models.MatchAny(any=wanted))
            response = self._client.query_points(
                self._collection,
                query=models.SparseVector(indices=sparse[0], values=sparse[1]),
                using=SPARSE,
                query_filter=_scope_filter(tenant_id, user_id, extra=[status]),
                # IDF per tenant AND user: a word is rare or common by this user's memories (of every
                # status, those with terms), not by the whole collection's.
                search_params=models.SearchParams(
                    idf=models.IdfCorpusParams(corpus=_scope_filter(tenant_id, user_id))
                ),
                limit=fetch_limit(limit),
                with_payload=True,
            )
        return _ranked(response.points, limit)

    def ids(self, tenant_id: str, user_id: str) -> set[str]:
        return {point_id for point_id, _ in self._scroll(tenant_id, user_id, with_payload=False)}

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        return dict(self._scroll(tenant_id, user_id, with_payload=True))

    def _scroll(
        self, tenant_id: str, user_id: str, *, with_payload: bool
    ) -> list[tuple[str, dict[str, Any]]]:
        """Every point of one user, page by page: (id, payload, or {} without ``with_payload``)."""
        require_scope(tenant_id, user_id)
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return []
            scope = _scope_filter(tenant_id, user_id)
            found: list[tuple[str, Payload]] = []
            offset: models.ExtendedPointId | None = None
            while True:
                records, offset = self._client.scroll(
                    self._collection,
                    scroll_filter=scope,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=with_payload,
                    with_vectors=False,
                )
                found.extend((str(r.id), dict(r.payload or {})) for r in records)
                if offset is None:
                    return found

    def set_payload(self, tenant_id: str, user_id: str, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        require_scope(tenant_id, user_id)
        updates = {normalize_id(i): payload_update(p) for i, p in payloads.items()}
        if not updates:
            return
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return
            # Each point by a scoped filter: a missing id or another user's id matches nothing
            # (selecting by id alone fails on a missing point). One request for the whole batch.
            operations: list[models.UpdateOperation] = [
                models.SetPayloadOperation(
                    set_payload=models.SetPayload(
                        payload=dict(payload),
                        filter=_scope_filter(tenant_id, user_id, extra=[models.HasIdCondition(has_id=[i])]),
                    )
                )
                for i, payload in sorted(updates.items())
            ]
            self._client.batch_update_points(self._collection, operations, wait=True)

    def count(self, tenant_id: str | None = None) -> int:
        scope = (
            None
            if tenant_id is None
            else models.Filter(
                must=[models.FieldCondition(key="tenant_id", match=models.MatchValue(value=tenant_id))]
            )
        )
        with _translate_errors(self._collection):
            if not self._collection_exists():
                return 0
            return self._client.count(self._collection, count_filter=scope, exact=True).count

    def reset(self, dim: int, model_name: str) -> None:
        with _translate_errors(self._collection):
            self._client.delete_collection(self._collection)
            self._exists = False
            self._dim = None
            self._sparse = None
            logger.info("reset collection %s for model %s (dim %d)", self._collection, model_name, dim)
            self._create(dim, model_name)
            self._check_stored_model(dim, model_name)
            self._dim = dim
            self._exists = True

    def optimize(self) -> bool:
        """A Qdrant server runs its own optimizer: nothing to do."""
        return False

    def close(self) -> None:
        self._client.close()

    # ---- collection lifecycle ----------------------------------------------------------------

    def _create_racing(self, dim: int, model_name: str) -> None:
        """Create the collection; if another worker created it first, its record is checked instead."""
        try:
            self._create(dim, model_name)
        except (UnexpectedResponse, ValueError):
            if not self._client.collection_exists(self._collection):
                raise
            logger.info("collection %s was created concurrently; checking its model", self._collection)

    def _create(self, dim: int, model_name: str) -> None:
        self._client.create_collection(
            self._collection,
            vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
            # Declared now so a later keyword search can fill it without re-creating the collection.
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            metadata={"model": model_name, "dim": dim},
        )
        # Local mode warns that payload indexes have no effect there; the server needs them.
        self._client.create_payload_index(
            self._collection,
            "tenant_id",
            field_schema=models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
            wait=True,
        )
        for field in ("user_id", "status"):
            self._client.create_payload_index(
                self._collection, field, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
            )
        logger.info("created collection %s for model %s (dim %d)", self._collection, model_name, dim)

    def _check_stored_model(self, dim: int, model_name: str) -> None:
        info = self._client.get_collection(self._collection)
        stored_dim = _dense_dim(info, self._collection)
        meta = info.config.metadata or {}
        if "model" not in meta:
            self._adopt_unrecorded(stored_dim, dim, model_name)
            return
        check_model(str(meta["model"]), int(meta.get("dim", stored_dim)), model_name, dim)
        if stored_dim != dim:
            raise EmbeddingModelMismatch(f"{meta['model']} (dim {stored_dim})", f"{model_name} (dim {dim})")

    def _adopt_unrecorded(self, stored_dim: int, dim: int, model_name: str) -> None:
        """No model on record: only an empty collection of the right size is safe to claim."""
        if stored_dim != dim or self._client.count(self._collection, exact=True).count > 0:
            raise EmbeddingModelMismatch(UNRECORDED, model_name)
        self._client.update_collection(self._collection, metadata={"model": model_name, "dim": dim})
        if "model" not in (self._client.get_collection(self._collection).config.metadata or {}):
            raise IndexUnavailable(
                f"Qdrant did not keep the metadata of collection {self._collection!r}; cuemem records the "
                "embedding model there and needs a server with collection metadata (Qdrant >= 1.16)"
            )
        logger.warning(
            "collection %s had no model on record; it is empty, recorded %s", self._collection, model_name
        )

    def _collection_exists(self) -> bool:
        if not self._exists:
            self._exists = self._client.collection_exists(self._collection)
        return self._exists

    def _sparse_config(self) -> tuple[bool, bool]:
        """(declared, with IDF) for the sparse vector SPARSE of the (existing) collection.

        Only the good answer is remembered: another process's ``cuemem reindex`` may recreate an old
        collection with the sparse vector at any time, and this worker must then start filling it."""
        if self._sparse is not None:
            return self._sparse
        sparse_vectors = self._client.get_collection(self._collection).config.params.sparse_vectors or {}
        params = sparse_vectors.get(SPARSE)
        found = (False, False) if params is None else (True, params.modifier == models.Modifier.IDF)
        if found == (True, True):
            self._sparse = found
        return found

    def _known_dim(self) -> int | None:
        if self._dim is None and self._collection_exists():
            self._dim = _dense_dim(self._client.get_collection(self._collection), self._collection)
        return self._dim


def _scope_filter(tenant_id: str, user_id: str, extra: Sequence[models.Condition] = ()) -> models.Filter:
    # Exact keyword matches only: the ids are compared as values, never parsed as a query.
    return models.Filter(
        must=[
            models.FieldCondition(key="tenant_id", match=models.MatchValue(value=tenant_id)),
            models.FieldCondition(key="user_id", match=models.MatchValue(value=user_id)),
            *extra,
        ]
    )


def _dense_dim(info: models.CollectionInfo, collection: str) -> int:
    vectors: Any = info.config.params.vectors
    params = vectors.get(DENSE) if isinstance(vectors, dict) else None
    if not isinstance(params, models.VectorParams):
        raise IndexUnavailable(
            f"collection {collection!r} has no dense vector {DENSE!r}: not a cuemem collection"
        )
    return int(params.size)


@contextlib.contextmanager
def _translate_errors(collection: str) -> Iterator[None]:
    """Transport failures become IndexUnavailable, so callers can retry or degrade on one type.
    qdrant-client's REST transport wraps every httpx error in ResponseHandlingException."""
    try:
        yield
    except ResponseHandlingException as exc:
        raise IndexUnavailable(f"Qdrant unreachable for collection {collection!r}: {exc.source}") from exc
    except UnexpectedResponse as exc:
        if exc.status_code in _UNAVAILABLE_STATUSES:
            raise IndexUnavailable(f"Qdrant unavailable for collection {collection!r}: {exc}") from exc
        raise


def _ranked(points: Sequence[Any], limit: int) -> list[IndexHit]:
    """A query's scored points as hits, in the port's order (score, then id), cut to ``limit``."""
    return rank_hits(
        (IndexHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in points), limit
    )
