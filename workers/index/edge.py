"""``VectorIndex`` on the embedded Qdrant engine (qdrant-edge): no server, one owning process.

Files, for a shard at ``<path>``:

- ``<path>/``            the shard (segments, WAL, edge_config.json), owned by qdrant-edge;
- ``<path>.lock``        flock held by the owning process, holding its pid;
- ``<path>.meta.json``   ``{"model": ..., "dim": ...}``: which embedding model the vectors come from,
                          and ``"lost"`` while the index is incomplete (see "Lost files" below).

Each point carries the dense vector ``dense`` and, when its text has terms, the sparse vector
``bm25`` (``shared.recall.sparse``: BM25 term weights; the shard's IDF modifier supplies the IDF).

The lock and meta files sit beside the shard, not in it, so that ``reset`` can delete the shard
directory while still holding the lock.

Lost files. The shard directory can vanish under the owning process (deleted by hand, a volume
lost). The engine does not notice: searches go on answering from what it holds in memory, and
writes change memory and then fail to flush, with a plain ``Exception``. Every call therefore
checks first that the directory it opened is still there (three ``stat`` calls). When it is not,
the handle is closed without a flush and the loss is noted in the meta file (``"lost"``: when and
what); the next ``ensure`` creates an empty shard, so ingest goes on, and until the index is whole
again searches raise ``IndexUnavailable`` saying so (recall answers with what Postgres can and
notes it), rather than answering "no such memory" from a partial index. The same note is made
when ``ensure`` finds the meta file without its shard (deleted while no process had it open).
``on_lost`` (the composition root sends ``memory.reconcile``) asks for the repair at once; a
reconciliation that ran from start to end after the note clears it (``lost`` / ``mark_rebuilt``),
as does ``reset`` (``cuemem reindex``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    HasIdCondition,
    IdfParams,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Modifier,
    PayloadSchemaType,
    Point,
    Query,
    QueryRequest,
    ScrollRequest,
    SearchParams,
    SparseVector,
    UpdateOperation,
)

from shared.ports import (
    EmbeddingModelMismatch,
    IndexHit,
    IndexOwnedElsewhere,
    IndexPoint,
    IndexUnavailable,
    SparseTerms,
)
from workers.index import (
    UNRECORDED,
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
# qdrant-edge 0.9 writes this file when it creates a shard. We test for it instead of calling
# EdgeShard.load on a guess, because a failed load leaves a "segments" directory behind.
_SHARD_MARKER = "edge_config.json"
_SEGMENTS = "segments"


class EdgeVectorIndex:
    """The shard opens lazily on first use, never in ``__init__``: a shard opened before ``fork()``
    hangs in the child, and the process that constructs this object may be a pre-fork parent.

    One lock serialises all calls: ``close`` and ``reset`` swap the shard under any reader, and a
    filtered search costs well under a millisecond, so the serialisation costs little.
    """

    def __init__(self, path: Path, on_lost: Callable[[str], None] | None = None) -> None:
        self._path = Path(path)
        self._lock_path = self._path.with_name(self._path.name + ".lock")
        self._meta_path = self._path.with_name(self._path.name + ".meta.json")
        self._mutex = threading.RLock()
        self._lock_fd: int | None = None
        self._owner_pid: int | None = None
        self._shard: EdgeShard | None = None
        # (device, inode) of the shard directory the open shard was loaded from or created in.
        self._shard_dir: tuple[int, int] | None = None
        self._dim: int | None = None
        self._model: str | None = None
        # Whether the open shard declares the sparse vector SPARSE, and with the IDF modifier.
        self._sparse: tuple[bool, bool] | None = None
        # Called once per loss noticed while this process had the index (see the module doc).
        self._on_lost = on_lost

    @property
    def path(self) -> Path:
        return self._path

    # ---- VectorIndex -------------------------------------------------------------------------

    def ensure(self, dim: int, model_name: str) -> None:
        with self._mutex:
            self._acquire()
            self._drop_if_vanished()
            if not self._shard_exists():
                self._refuse_foreign_directory()
                stored = self._read_meta()
                lost = stored.get("lost") if stored is not None else None
                if stored is not None and lost is None:
                    # The meta file says an index was here: its points are gone, not yet written.
                    lost = self._loss_note(self._missing())
                    self._create(dim, model_name, lost=lost)
                    self._report_loss(lost)
                    return
                self._create(dim, model_name, lost=lost)
                return
            stored = self._read_meta()
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
            dropped = 0
            for p in points:
                vectors: dict[str, Any] = {DENSE: check_vector(p.vector, self._dim)}
                sparse = check_sparse(p.sparse)
                # Upsert replaces the whole point: without terms it keeps no sparse vector.
                if sparse is not None and declared:
                    vectors[SPARSE] = SparseVector(*sparse)
                elif sparse is not None:
                    dropped += 1
                edge_points.append(Point(normalize_id(p.id), vectors, point_payload(p)))
            if dropped:
                # Degrade rather than fail: ingest keeps working, and search_keywords says what to do.
                logger.warning(
                    "vector index %s has no sparse vector %r: stored without keyword terms; "
                    "run `cuemem reindex` to enable keyword search",
                    self._path,
                    SPARSE,
                )
            started = time.perf_counter()
            with self._writing():
                shard.update(UpdateOperation.upsert_points(edge_points))
                # Flush per batch: an acknowledged upsert then survives a crash without relying on
                # WAL replay. Measured cost 8-17 ms per batch (8 to 384 dims, 1 to 100 points,
                # 20k-point shard), nearly flat in batch size: callers should batch, not upsert
                # point by point.
                shard.flush()
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
            scoped = _scope_filter(tenant_id, user_id, extra=[HasIdCondition(set(point_ids))])
            with self._writing():
                shard.update(UpdateOperation.delete_points_by_filter(scoped))
                shard.flush()

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
                filter=_scope_filter(
                    tenant_id, user_id, extra=[FieldCondition("status", match=MatchAny(wanted))]
                ),
                with_payload=True,
            )
            scored = shard.query(query)
        hits = (IndexHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in scored)
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
        wanted = normalize_statuses(statuses)
        sparse = check_sparse(terms)
        if limit <= 0 or not wanted or sparse is None:
            return []
        with self._mutex:
            shard = self._searchable_shard()
            if shard is None:
                return []
            self._require_keyword_search()
            scope = _scope_filter(tenant_id, user_id)
            query = QueryRequest(
                limit=fetch_limit(limit),
                query=Query.Nearest(SparseVector(*sparse), using=SPARSE),
                filter=_scope_filter(
                    tenant_id, user_id, extra=[FieldCondition("status", match=MatchAny(wanted))]
                ),
                # IDF per tenant AND user (qdrant-edge supports a corpus filter): a word is rare or
                # common by this user's memories, of every status, not by other users'. Only points
                # that carry a sparse vector count in the corpus.
                params=SearchParams(idf=IdfParams(corpus=scope)),
                with_payload=True,
            )
            scored = shard.query(query)
        hits = (IndexHit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in scored)
        return rank_hits(hits, limit)

    def ids(self, tenant_id: str, user_id: str) -> set[str]:
        require_scope(tenant_id, user_id)
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return set()
            scope = _scope_filter(tenant_id, user_id)
            found: set[str] = set()
            offset: Any = None
            while True:
                records, offset = shard.scroll(
                    ScrollRequest(
                        offset=offset, limit=_SCROLL_PAGE, filter=scope, with_payload=False, with_vector=False
                    )
                )
                found.update(str(r.id) for r in records)
                if offset is None:
                    return found

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict[str, Any]]:
        require_scope(tenant_id, user_id)
        with self._mutex:
            shard = self._current_shard()
            if shard is None:
                return {}
            scope = _scope_filter(tenant_id, user_id)
            found: dict[str, dict[str, Any]] = {}
            offset: Any = None
            while True:
                records, offset = shard.scroll(
                    ScrollRequest(
                        offset=offset, limit=_SCROLL_PAGE, filter=scope, with_payload=True, with_vector=False
                    )
                )
                found.update((str(r.id), dict(r.payload or {})) for r in records)
                if offset is None:
                    return found

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

    def count(self) -> int:
        with self._mutex:
            shard = self._current_shard()
            return 0 if shard is None else shard.count(CountRequest(exact=True))

    def lost(self) -> str | None:
        """Why the index is incomplete (its files vanished; see the module doc), or None.

        Also notes a meta file whose shard is missing, so that a reconciliation that starts now
        and runs to its end may clear the note (``mark_rebuilt``)."""
        with self._mutex:
            self._acquire()
            self._drop_if_vanished()
            stored = self._read_meta()
            if stored is None:
                return None
            lost: str | None = stored.get("lost")
            if lost is None and not self._shard_exists():
                lost = self._loss_note(self._missing())
                _write_json(self._meta_path, {**stored, "lost": lost})
            return lost

    def mark_rebuilt(self, lost: str) -> bool:
        """A reconciliation that began after ``lost`` was noted has finished: the index holds what
        Postgres holds again. Clears the note unless another loss was noted since."""
        with self._mutex:
            self._acquire()
            self._drop_if_vanished()
            stored = self._read_meta()
            if stored is None or stored.get("lost") != lost or not self._shard_exists():
                return False
            _write_json(self._meta_path, {k: v for k, v in stored.items() if k != "lost"})
            logger.warning(
                "vector index %s is whole again (rebuilt from Postgres after: %s)", self._path, lost
            )
            return True

    def reset(self, dim: int, model_name: str) -> None:
        with self._mutex:
            self._acquire()
            self._drop_if_vanished()
            self._close_shard()
            self._refuse_foreign_directory()
            if self._path.exists():
                shutil.rmtree(self._path)
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
            if self._owner_pid is not None and self._owner_pid != os.getpid():
                # A forked child holds a copy of the parent's handle: flushing it would hang, while
                # dropping the reference is harmless (checked) and leaves the parent's shard intact.
                self._shard = None
            self._drop_if_vanished()  # a flush into vanished files would fail and keep the lock
            self._close_shard()
            self._release()

    # ---- shard lifecycle ---------------------------------------------------------------------

    def _shard_exists(self) -> bool:
        return (self._path / _SHARD_MARKER).is_file()

    def _refuse_foreign_directory(self) -> None:
        """A mistyped path must not have a shard created in, or reset() wipe, an unrelated directory."""
        if self._path.is_dir() and not self._shard_exists() and any(self._path.iterdir()):
            raise IndexUnavailable(f"{self._path} is neither an empty directory nor a vector index shard")

    def _create(self, dim: int, model_name: str, lost: str | None = None) -> None:
        # Meta first: a crash between the two steps leaves a meta file without a shard, never a
        # shard of unknown model. The next ensure() then notes a loss that was none (the index
        # was being created, empty) and asks for a reconciliation, which finds nothing to do.
        meta: dict[str, Any] = {"model": model_name, "dim": dim}
        if lost is not None:
            meta["lost"] = lost
        _write_json(self._meta_path, meta)
        config = EdgeConfig(
            vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine)},
            # Declared now so a later keyword search can fill it without re-creating the shard.
            sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
        )
        shard = EdgeShard.create(str(self._path), config)
        shard.update(UpdateOperation.create_field_index("tenant_id", KeywordIndexParams(is_tenant=True)))
        shard.update(UpdateOperation.create_field_index("user_id", PayloadSchemaType.Keyword))
        shard.update(UpdateOperation.create_field_index("status", PayloadSchemaType.Keyword))
        shard.flush()
        self._shard = shard
        self._shard_dir = _dir_id(self._path)
        self._dim = dim
        self._model = model_name
        self._sparse = None
        logger.info("created vector index %s for model %s (dim %d)", self._path, model_name, dim)

    def _adopt_unrecorded(self, dim: int, model_name: str) -> None:
        """A shard without a meta file: its vectors' model is unknown, so only an empty one is safe."""
        self._open_shard()
        if self._shard is not None and self._shard.count(CountRequest(exact=True)) > 0:
            raise EmbeddingModelMismatch(UNRECORDED, model_name)
        _write_json(self._meta_path, {"model": model_name, "dim": dim})
        logger.warning(
            "vector index %s had no meta file; it is empty, recorded model %s", self._path, model_name
        )

    def _open_shard(self) -> None:
        if self._shard is None and self._shard_exists():
            self._shard = EdgeShard.load(str(self._path))
            self._shard_dir = _dir_id(self._path)
            self._sparse = None
            logger.info("opened vector index %s", self._path)

    def _sparse_config(self) -> tuple[bool, bool]:
        """(declared, with IDF) for the sparse vector SPARSE, read from the shard's config file.

        Shards made by ``_create`` always declare it with IDF; one made by an older cuemem may not,
        and qdrant-edge cannot add a vector to an existing shard: ``cuemem reindex`` recreates it."""
        if self._sparse is None:
            try:
                config = json.loads((self._path / _SHARD_MARKER).read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise IndexUnavailable(f"cannot read {self._path / _SHARD_MARKER}: {exc}") from exc
            params = (config.get("sparse_vectors") or {}).get(SPARSE)
            if isinstance(params, dict):
                self._sparse = (True, str(params.get("modifier", "")).lower() == "idf")
            else:
                self._sparse = (False, False)
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
        self._acquire()
        self._drop_if_vanished()
        if self._dim is None:
            meta = self._read_meta()
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
        meta = self._read_meta() if shard is not None or self._meta_path.is_file() else None
        if shard is None and meta is not None:
            raise IndexUnavailable(
                f"vector index {self._path} is missing although {self._meta_path.name} records it "
                f"({meta.get('lost') or 'deleted?'}); rebuild it from Postgres with `cuemem reindex` "
                "or `cuemem maintain` (reconciliation)"
            )
        if meta is not None and meta.get("lost"):
            # A partial index would answer "no such memory" for what it lost.
            raise IndexUnavailable(
                f"vector index {self._path} is incomplete: {meta['lost']}; it holds only what was "
                "written since, until reconciliation (`memory.reconcile`, `cuemem maintain`) or "
                "`cuemem reindex` rebuilds it from Postgres"
            )
        return shard

    def _require_shard(self) -> EdgeShard:
        shard = self._current_shard()
        if shard is None:
            raise IndexUnavailable(
                f"vector index {self._path} does not exist yet: call ensure(dim, model) first"
            )
        return shard

    # ---- files vanishing under the open shard (see the module doc) ----------------------------

    def _files_changed(self) -> bool:
        """Whether the open shard's directory is gone or replaced, or lost its config or segments."""
        if self._shard is None:
            return False
        try:
            current = _dir_id(self._path)
        except FileNotFoundError:
            return True
        if current != self._shard_dir:
            return True
        return not self._shard_exists() or not (self._path / _SEGMENTS).is_dir()

    def _drop_if_vanished(self) -> bool:
        """Close the open shard without a flush if its files vanished, note the loss and report it.
        The next ``ensure`` creates an empty shard (or a reload finds what replaced it)."""
        if not self._files_changed():
            return False
        shard, self._shard = self._shard, None
        self._shard_dir = None
        self._sparse = None
        with contextlib.suppress(Exception):  # the engine may complain about its files; they are gone
            shard.close()  # type: ignore[union-attr]
        lost = self._loss_note(f"the files of {self._path} vanished while pid {os.getpid()} had it open")
        logger.error(
            "vector index %s lost its files under this process (deleted?): the points it held are gone; "
            "new writes go to a new, empty index, searches report it unavailable until it is rebuilt "
            "from Postgres (reconciliation or `cuemem reindex`)",
            self._path,
        )
        stored = self._read_meta()
        if stored is not None:
            _write_json(self._meta_path, {**stored, "lost": lost})
        elif self._model is not None and self._dim is not None:  # the meta file went with it
            _write_json(self._meta_path, {"model": self._model, "dim": self._dim, "lost": lost})
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
        except IndexUnavailable:
            raise
        except Exception as exc:
            if self._drop_if_vanished():
                lost = f"vector index {self._path} lost its files during a write: {exc}"
                raise IndexUnavailable(lost) from exc
            raise IndexUnavailable(
                f"vector index {self._path} could not write: {exc}; if its files are damaged, "
                "rebuild it from Postgres with `cuemem reindex`"
            ) from exc

    def _missing(self) -> str:
        return f"{self._path} was missing although {self._meta_path.name} records it"

    def _loss_note(self, what: str) -> str:
        return f"{datetime.now(UTC).isoformat(timespec='microseconds')}: {what}"

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
        self._sparse = None
        try:
            shard.flush()
        finally:
            shard.close()
        logger.info("closed vector index %s", self._path)

    # ---- ownership lock ----------------------------------------------------------------------

    def _acquire(self) -> None:
        """Become the owning process, before any load: a second open of a shard fails and also breaks
        the owner's next flush, so a second process must be stopped before it touches the shard."""
        if self._lock_fd is not None:
            if self._owner_pid != os.getpid():
                # flock is shared across fork(), so the child would pass the lock check; the shard
                # handle, however, hangs in a child. Refuse rather than hang.
                raise IndexUnavailable(
                    f"vector index {self._path} was opened by pid {self._owner_pid} before a fork; "
                    "open it in the process that uses it"
                )
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _read_owner(fd)
            os.close(fd)
            raise IndexOwnedElsewhere(
                f"vector index {self._path} is owned by another process (pid {owner}, lock file "
                f"{self._lock_path}); only one process may open it"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd, self._owner_pid = fd, os.getpid()
        logger.debug("took lock %s", self._lock_path)

    def _release(self) -> None:
        if self._lock_fd is None:
            return
        fd, self._lock_fd = self._lock_fd, None
        if self._owner_pid == os.getpid():
            # The file stays: unlinking a lock file lets a waiter lock an inode nobody else sees.
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        self._owner_pid = None

    def _read_meta(self) -> dict[str, Any] | None:
        try:
            with self._meta_path.open(encoding="utf-8") as fh:
                meta = json.load(fh)
        except FileNotFoundError:
            return None
        if not isinstance(meta, dict) or "model" not in meta or "dim" not in meta:
            raise IndexUnavailable(f"vector index meta file {self._meta_path} is malformed: {meta!r}")
        out = {"model": meta["model"], "dim": meta["dim"]}
        if isinstance(meta.get("lost"), str):
            out["lost"] = meta["lost"]
        return out


def _scope_filter(tenant_id: str, user_id: str, extra: Sequence[Any] = ()) -> Filter:
    # Exact keyword matches only: the ids are compared as values, never parsed as a query.
    return Filter(
        must=[
            FieldCondition("tenant_id", match=MatchValue(tenant_id)),
            FieldCondition("user_id", match=MatchValue(user_id)),
            *extra,
        ]
    )


def _read_owner(fd: int) -> str:
    with contextlib.suppress(OSError):
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        if text:
            return text
    return "unknown"


def _dir_id(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic replace, so a crash never leaves a half-written meta file."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
