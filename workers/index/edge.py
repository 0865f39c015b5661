"""``VectorIndex`` on the embedded Qdrant engine (qdrant-edge): no server, one owning process.

The index operations live here; the shard's files and how a loss of them is noticed and noted
in ``edge_shards.py`` (read its doc for the files and "Lost files"); which process owns the
shard in ``ownership.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from qdrant_edge import (
    CountRequest,
    EdgeShard,
    FieldCondition,
    Filter,
    HasIdCondition,
    IdfParams,
    MatchValue,
    Point,
    Query,
    QueryRequest,
    SearchParams,
    SparseVector,
    UpdateOperation,
)

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
from workers.index.edge_shards import (
    DENSE,
    SPARSE,
    DirId,
    ShardFiles,
    loss_note,
    scope_filter,
    scrolled,
    status_filter,
)
from workers.index.ownership import OwnerLock
from workers.index.term_counts import HOLD_FROM, PointTerms, TermCounts, idf_query, stored_terms

logger = logging.getLogger(__name__)


class EdgeVectorIndex:
    """The shard opens lazily on first use, never in ``__init__``: a shard opened before ``fork()``
    hangs in the child, and the process that constructs this object may be a pre-fork parent.

    One lock serialises all calls: ``close`` and ``reset`` swap the shard under any reader, and a
    filtered search costs well under a millisecond, so the serialisation costs little.
    """

    def __init__(
        self, path: Path, on_lost: Callable[[str], None] | None = None, hold_counts_from: int = HOLD_FROM
    ) -> None:
        self._path = Path(path)
        self._files = ShardFiles(self._path)
        self._owner = OwnerLock(self._path)
        self._mutex = threading.RLock()
        self._shard: EdgeShard | None = None
        # (device, inode) of the shard directory the open shard was loaded from or created in.
        self._shard_dir: DirId | None = None
        self._dim: int | None = None
        self._model: str | None = None
        # Whether the open shard declares the sparse vector SPARSE, and with the IDF modifier.
        self._sparse: tuple[bool, bool] | None = None
        # Each searched large user's document frequencies, kept in step with every write.
        self._counts = TermCounts(hold_from=hold_counts_from)
        # Called once per loss noticed while this process had the index (see edge_shards.py, "Lost files").
        self._on_lost = on_lost

    @property
    def path(self) -> Path:
        return self._path

    # ---- VectorIndex -------------------------------------------------------------------------

    def ensure(self, dim: int, model_name: str) -> None:
        with self._mutex:
            self._owner.acquire()
            self._drop_if_vanished()
            if not self._files.exists():
                self._files.refuse_foreign_directory()
                stored = self._files.read_meta()
                lost = stored.get("lost") if stored is not None else None
                if stored is not None and lost is None:
                    # The meta file says an index was here: its points are gone, not yet written.
                    lost = loss_note(self._files.missing())
                    self._create(dim, model_name, lost=lost)
                    self._report_loss(lost)
                    return
                self._create(dim, model_name, lost=lost)
                return
            stored = self._files.read_meta()
            if stored is None:
                self._adopt_unrecorded(dim, model_name)
            else:
                check_model(stored["model"], stored["dim"], model_name, dim)
            self._dim = dim
            self._model = model_name
            self._open_shard()

    def upsert(self, points: Sequence[IndexPoint]) -> None:
        if not points:
            return
        with self._mutex:
            shard = self._require_shard()
            declared, _ = self._sparse_config()
            edge_points: list[Point] = []
            # Each point's scope and stored terms; the engine keeps the last of two with one id.
            terms: dict[str, PointTerms] = {}
            dropped = 0
            for p in points:
                vectors: dict[str, Any] = {DENSE: check_vector(p.vector, self._dim)}
                sparse = check_sparse(p.sparse)
                # Upsert replaces the whole point: without terms it keeps no sparse vector.
                if sparse is not None and declared:
                    vectors[SPARSE] = SparseVector(*sparse)
                dropped += sparse is not None and not declared
                point_id = normalize_id(p.id)
                edge_points.append(Point(point_id, vectors, point_payload(p)))
                terms[point_id] = ((p.tenant_id, p.user_id), sparse[0] if sparse and declared else None)
            if dropped:
                # Degrade rather than fail: ingest keeps working, and search_keywords says what to do.
                logger.warning(
                    "vector index %s has no sparse vector %r: stored without keyword terms; "
                    "run `cuemem reindex` to enable keyword search",
                    self._path,
                    SPARSE,
                )
            started = time.perf_counter()
            replaced = stored_terms(shard, terms) if self._counts.any_held() else []
            with self._writing():
                shard.update(UpdateOperation.upsert_points(edge_points))
                # Flush per batch: an acknowledged upsert then survives a crash without WAL replay.
                # Measured 8-17 ms per batch (8 to 384 dims, 1 to 100 points, 20k-point shard),
                # nearly flat in batch size: callers should batch, not upsert point by point.
                shard.flush()
            self._counts.apply(replaced, terms.values())
            logger.debug(
                "upserted %d points into %s, flush %.1f ms",
                len(edge_points),
                self._path,
                (time.perf_counter() - started) * 1000,
            )

    def delete(self, tenant_id: str, user_id: str, ids: Sequence[str]) -> None:
        require_scope(tenant_id, user_id)
        point_ids = {normalize_id(i) for i in ids}
        if not point_ids:
            return
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return
            # The scope conditions make a guessed id of another user match nothing.
            scoped = scope_filter(tenant_id, user_id, extra=[HasIdCondition(set(point_ids))])
            held = stored_terms(shard, point_ids) if (tenant_id, user_id) in self._counts else []
            with self._writing():
                shard.update(UpdateOperation.delete_points_by_filter(scoped))
                shard.flush()
            self._counts.apply([h for h in held if h[0] == (tenant_id, user_id)], [])

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
        with self._mutex:
            shard = self._searchable_shard()
            if shard is None:
                return []
            query = QueryRequest(
                limit=fetch_limit(limit),
                query=Query.Nearest(check_vector(vector, self._dim), using=DENSE),
                filter=status_filter(tenant_id, user_id, wanted),
                with_payload=True,
            )
            scored = shard.query(query)
        return _ranked(scored, limit)

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
        with self._mutex:
            shard = self._searchable_shard()
            if shard is None:
                return []
            self._require_keyword_search()
            # IDF per tenant AND user: a word is rare or common by this user's points with terms,
            # of every status, not by other users' (term_counts.py: kept here for large users).
            scope = (tenant_id, user_id)
            weights, corpus = idf_query(self._counts, shard, scope, scope_filter(*scope), sparse)
            query = QueryRequest(
                limit=fetch_limit(limit),
                query=Query.Nearest(SparseVector(sparse[0], weights), using=SPARSE),
                filter=status_filter(tenant_id, user_id, wanted),
                params=SearchParams(idf=IdfParams(corpus=corpus)),
                with_payload=True,
            )
            scored = shard.query(query)
        return _ranked(scored, limit)

    def ids(self, tenant_id: str, user_id: str) -> set[str]:
        return {point_id for point_id, _ in self._scroll(tenant_id, user_id, with_payload=False)}

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        return dict(self._scroll(tenant_id, user_id, with_payload=True))

    def _scroll(self, tenant_id: str, user_id: str, *, with_payload: bool) -> list[tuple[str, Payload]]:
        """Every point of one user, page by page: (id, payload, or {} without ``with_payload``)."""
        require_scope(tenant_id, user_id)
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return []
            scope = scope_filter(tenant_id, user_id)
            return [
                (str(r.id), dict(r.payload or {})) for r in scrolled(shard, scope, with_payload=with_payload)
            ]

    def set_payload(self, tenant_id: str, user_id: str, payloads: Mapping[str, Mapping[str, Any]]) -> None:
        require_scope(tenant_id, user_id)
        updates = {normalize_id(i): payload_update(p) for i, p in payloads.items()}
        if not updates:
            return
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return
            # Only points of this scope: a guessed id of another user is skipped, not written.
            records = shard.retrieve(list(updates), with_payload=True, with_vector=False)
            scope = (tenant_id, user_id)
            present = {
                str(r.id)
                for r in records
                if ((r.payload or {}).get("tenant_id"), (r.payload or {}).get("user_id")) == scope
            }
            with self._writing():
                for point_id in sorted(present):
                    shard.update(UpdateOperation.set_payload([point_id], updates[point_id]))
                # One flush per batch, as for upserts.
                shard.flush()

    def count(self, tenant_id: str | None = None) -> int:
        scope = (
            None
            if tenant_id is None
            else Filter(must=[FieldCondition("tenant_id", match=MatchValue(tenant_id))])
        )
        with self._mutex:
            shard = self._current_shard()
            return 0 if shard is None else shard.count(CountRequest(exact=True, filter=scope))

    def lost(self) -> str | None:
        """Why the index is incomplete (its files vanished; see edge_shards.py), or None.

        Also notes a meta file whose shard is missing, so that a reconciliation that starts now
        and runs to its end may clear the note (``mark_rebuilt``)."""
        with self._mutex:
            self._owner.acquire()
            self._drop_if_vanished()
            return self._files.current_loss()

    def mark_rebuilt(self, lost: str) -> bool:
        """A reconciliation that began after ``lost`` was noted has finished: the index holds what
        Postgres holds again. Clears the note unless another loss was noted since."""
        with self._mutex:
            self._owner.acquire()
            self._drop_if_vanished()
            return self._files.clear_loss(lost)

    def reset(self, dim: int, model_name: str) -> None:
        with self._mutex:
            self._owner.acquire()
            self._drop_if_vanished()
            self._close_shard()
            self._files.refuse_foreign_directory()
            self._files.remove()
            logger.info("reset vector index %s for model %s (dim %d)", self._path, model_name, dim)
            self._create(dim, model_name)

    def optimize(self) -> bool:
        """Build the HNSW graph and merge segments (qdrant-edge has no background optimizer).

        Seconds to a minute per 100k points: run it from the index worker's maintenance task,
        never on the request path. Returns whether anything was optimized."""
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return False
            started = time.perf_counter()
            with self._writing():
                changed = bool(shard.optimize())
            logger.info(
                "optimized %s in %.1f s (changed: %s)", self._path, time.perf_counter() - started, changed
            )
            return changed

    def close(self) -> None:
        with self._mutex:
            if self._owner.inherited():
                # A forked child holds a copy of the parent's handle: flushing it would hang, while
                # dropping the reference is harmless (checked) and leaves the parent's shard intact.
                self._shard = None
                self._counts.clear()
            self._drop_if_vanished()  # a flush into vanished files would fail and keep the lock
            self._close_shard()
            self._owner.release()

    # ---- shard lifecycle ---------------------------------------------------------------------

    def _create(self, dim: int, model_name: str, lost: str | None = None) -> None:
        self._shard = self._files.create(dim, model_name, lost)
        self._shard_dir = self._files.dir_id()
        self._dim = dim
        self._model = model_name
        self._forget_shard_state()
        logger.info("created vector index %s for model %s (dim %d)", self._path, model_name, dim)

    def _adopt_unrecorded(self, dim: int, model_name: str) -> None:
        """A shard without a meta file: its vectors' model is unknown, so only an empty one is safe."""
        self._open_shard()
        if self._shard is not None and self._shard.count(CountRequest(exact=True)) > 0:
            raise EmbeddingModelMismatch(UNRECORDED, model_name)
        self._files.write_meta({"model": model_name, "dim": dim})
        logger.warning(
            "vector index %s had no meta file; it is empty, recorded model %s", self._path, model_name
        )

    def _open_shard(self) -> None:
        if self._shard is None and self._files.exists():
            self._shard = self._files.load()
            self._shard_dir = self._files.dir_id()
            self._forget_shard_state()
            logger.info("opened vector index %s", self._path)

    def _forget_shard_state(self) -> None:
        """What this object knows of the open shard: read again from the next one."""
        self._sparse = None
        self._counts.clear()

    def _sparse_config(self) -> tuple[bool, bool]:
        """(declared, with IDF) for the sparse vector SPARSE, read once per open shard."""
        if self._sparse is None:
            self._sparse = self._files.sparse_config()
        return self._sparse

    def _require_keyword_search(self) -> None:
        declared, idf = self._sparse_config()
        if not (declared and idf):
            raise IndexUnavailable(
                f"vector index {self._path} has no sparse vector {SPARSE!r} with IDF (made by an older "
                "cuemem): run `cuemem reindex` to rebuild it with keyword search"
            )

    def _current_shard(self) -> EdgeShard | None:
        """The open shard, opening it on first use; None while no shard exists (reads find nothing)."""
        self._owner.acquire()
        self._drop_if_vanished()
        if self._dim is None:
            meta = self._files.read_meta()
            self._dim = int(meta["dim"]) if meta is not None else None
            self._model = str(meta["model"]) if meta is not None else None
        self._open_shard()
        return self._shard

    def _searchable_shard(self) -> EdgeShard | None:
        """The shard for a search: None while no index was ever created here (nothing to find yet).

        A meta file without its shard means the index existed and its directory is gone (deleted,
        lost with a volume): answering "no hits" would read as "this user has no such memory", so
        raise and let recall say in its trace that the vector search was unavailable. Reads that
        feed a repair (``ids``, ``payloads``) still see an empty index, so reconciliation can
        rebuild it from Postgres."""
        shard = self._current_shard()
        refusal = self._files.search_refusal(shard_open=shard is not None)
        if refusal is not None:
            raise IndexUnavailable(refusal)
        return shard

    def _require_shard(self) -> EdgeShard:
        shard = self._current_shard()
        if shard is None:
            raise IndexUnavailable(
                f"vector index {self._path} does not exist yet: call ensure(dim, model) first"
            )
        return shard

    # ---- files vanishing under the open shard (see edge_shards.py) -----------------------------

    def _drop_if_vanished(self) -> bool:
        """Close the open shard without a flush if its files vanished, note the loss and report it.
        The next ``ensure`` creates an empty shard (or a reload finds what replaced it)."""
        if self._shard is None or not self._files.changed_since(self._shard_dir):
            return False
        shard, self._shard = self._shard, None
        self._shard_dir = None
        self._forget_shard_state()
        with contextlib.suppress(Exception):  # the engine may complain about its files; they are gone
            shard.close()  # type: ignore[union-attr]
        lost = loss_note(f"the files of {self._path} vanished while pid {os.getpid()} had it open")
        logger.error(
            "vector index %s lost its files under this process (deleted?): the points it held are gone; "
            "new writes go to a new, empty index, searches report it unavailable until it is rebuilt "
            "from Postgres (reconciliation or `cuemem reindex`)",
            self._path,
        )
        self._files.note_loss(lost, self._model, self._dim)
        self._report_loss(lost)
        return True

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """An engine write. The engine reports every failure as a plain ``Exception``, which the
        pipeline would park as a permanent failure; the arguments were checked before, so what is
        left is the files: raise ``IndexUnavailable`` (transient, the task retries). When they
        vanished, the shard is dropped first and the retry writes into a new one; a directory
        being deleted right now (a flush can fail on a segment file already gone while the rest
        is still there) is seen as vanished by the retry."""
        try:
            yield
        except BaseException as exc:
            self._counts.clear()  # the write may have gone through, or in part
            if isinstance(exc, IndexUnavailable) or not isinstance(exc, Exception):
                raise
            if self._drop_if_vanished():
                lost = f"vector index {self._path} lost its files during a write: {exc}"
                raise IndexUnavailable(lost) from exc
            raise IndexUnavailable(
                f"vector index {self._path} could not write: {exc}; if its files are damaged, "
                "rebuild it from Postgres with `cuemem reindex`"
            ) from exc

    def _report_loss(self, lost: str) -> None:
        if self._on_lost is None:
            return
        try:
            self._on_lost(lost)
        except Exception:  # asking for the repair must never fail the index call
            logger.exception("could not ask for the repair of vector index %s", self._path)

    def _close_shard(self) -> None:
        if self._shard is None:
            return
        shard, self._shard = self._shard, None
        self._dim = None
        self._forget_shard_state()
        try:
            shard.flush()
        finally:
            shard.close()
        logger.info("closed vector index %s", self._path)


def _ranked(scored: Sequence[Any], limit: int) -> list[IndexHit]:
    hits = (IndexHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in scored)
    return rank_hits(hits, limit)
