"""The files of an embedded index (qdrant-edge) shard, and how a loss of them is noticed and noted.

Files, for a shard at ``<path>``:

- ``<path>/``            the shard (segments, WAL, edge_config.json), owned by qdrant-edge;
- ``<path>.lock``        flock held by the owning process, holding its pid (``ownership.py``);
- ``<path>.meta.json``   ``{"model": ..., "dim": ...}``: which embedding model the vectors come from,
                          and ``"lost"`` while the index is incomplete (see "Lost files" below).

Each point carries the dense vector ``dense`` and, when its text has terms, the sparse vector
``bm25`` (``shared.language.sparse``: BM25 term weights; the shard's IDF modifier applies the IDF,
over the corpus a search names: ``term_counts.py`` says which).

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

import json
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qdrant_edge import (
    Distance,
    EdgeConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Modifier,
    PayloadSchemaType,
    Record,
    ScrollRequest,
    UpdateOperation,
)

from shared.ports import IndexUnavailable

logger = logging.getLogger(__name__)

DENSE = "dense"
SPARSE = "bm25"
# qdrant-edge 0.9 writes this file when it creates a shard. We test for it instead of calling
# EdgeShard.load on a guess, because a failed load leaves a "segments" directory behind.
SHARD_MARKER = "edge_config.json"
SEGMENTS = "segments"

DirId = tuple[int, int]  # (device, inode) of a shard directory


def loss_note(what: str) -> str:
    """The ``lost`` note of a meta file: when, and what was lost."""
    return f"{datetime.now(UTC).isoformat(timespec='microseconds')}: {what}"


class ShardFiles:
    """The shard directory at ``path`` and its meta file; no engine state."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta_path = path.with_name(path.name + ".meta.json")

    def exists(self) -> bool:
        return (self.path / SHARD_MARKER).is_file()

    def dir_id(self) -> DirId:
        st = os.stat(self.path)
        return st.st_dev, st.st_ino

    def changed_since(self, opened: DirId | None) -> bool:
        """Whether the directory a shard was opened from is gone or replaced, or lost its config
        or segments."""
        try:
            current = self.dir_id()
        except FileNotFoundError:
            return True
        if current != opened:
            return True
        return not self.exists() or not (self.path / SEGMENTS).is_dir()

    def refuse_foreign_directory(self) -> None:
        """A mistyped path must not have a shard created in, or reset() wipe, an unrelated directory."""
        if self.path.is_dir() and not self.exists() and any(self.path.iterdir()):
            raise IndexUnavailable(f"{self.path} is neither an empty directory nor a vector index shard")

    def missing(self) -> str:
        return f"{self.path} was missing although {self.meta_path.name} records it"

    # ---- the shard ---------------------------------------------------------------------------

    def create(self, dim: int, model_name: str, lost: str | None = None) -> EdgeShard:
        # Meta first: a crash between the two steps leaves a meta file without a shard, never a
        # shard of unknown model. The next ensure() then notes a loss that was none (the index
        # was being created, empty) and asks for a reconciliation, which finds nothing to do.
        meta: dict[str, Any] = {"model": model_name, "dim": dim}
        if lost is not None:
            meta["lost"] = lost
        self.write_meta(meta)
        config = EdgeConfig(
            vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine)},
            # Declared now so a later keyword search can fill it without re-creating the shard.
            sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
        )
        shard = EdgeShard.create(str(self.path), config)
        shard.update(UpdateOperation.create_field_index("tenant_id", KeywordIndexParams(is_tenant=True)))
        shard.update(UpdateOperation.create_field_index("user_id", PayloadSchemaType.Keyword))
        shard.update(UpdateOperation.create_field_index("status", PayloadSchemaType.Keyword))
        shard.flush()
        return shard

    def load(self) -> EdgeShard:
        return EdgeShard.load(str(self.path))

    def remove(self) -> None:
        if self.path.exists():
            shutil.rmtree(self.path)

    def sparse_config(self) -> tuple[bool, bool]:
        """(declared, with IDF) for the sparse vector SPARSE, read from the shard's config file.

        Shards made by ``create`` always declare it with IDF; one made by an older cuemem may not,
        and qdrant-edge cannot add a vector to an existing shard: ``cuemem reindex`` recreates it."""
        try:
            config = json.loads((self.path / SHARD_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexUnavailable(f"cannot read {self.path / SHARD_MARKER}: {exc}") from exc
        params = (config.get("sparse_vectors") or {}).get(SPARSE)
        if isinstance(params, dict):
            return True, str(params.get("modifier", "")).lower() == "idf"
        return False, False

    # ---- the meta file -----------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any] | None:
        try:
            with self.meta_path.open(encoding="utf-8") as fh:
                meta = json.load(fh)
        except FileNotFoundError:
            return None
        if not isinstance(meta, dict) or "model" not in meta or "dim" not in meta:
            raise IndexUnavailable(f"vector index meta file {self.meta_path} is malformed: {meta!r}")
        out = {"model": meta["model"], "dim": meta["dim"]}
        if isinstance(meta.get("lost"), str):
            out["lost"] = meta["lost"]
        return out

    def write_meta(self, data: dict[str, Any]) -> None:
        """Atomic replace, so a crash never leaves a half-written meta file."""
        tmp = self.meta_path.with_name(self.meta_path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.meta_path)

    def note_loss(self, lost: str, model: str | None, dim: int | None) -> None:
        """Record ``lost`` in the meta file; rewrite the file from ``model`` and ``dim`` when it
        went with the shard."""
        stored = self.read_meta()
        if stored is not None:
            self.write_meta({**stored, "lost": lost})
        elif model is not None and dim is not None:
            self.write_meta({"model": model, "dim": dim, "lost": lost})

    def current_loss(self) -> str | None:
        """The meta file's ``lost`` note, or None. Also notes a meta file whose shard is missing,
        so that a reconciliation that starts now and runs to its end may clear the note."""
        stored = self.read_meta()
        if stored is None:
            return None
        lost: str | None = stored.get("lost")
        if lost is None and not self.exists():
            lost = loss_note(self.missing())
            self.write_meta({**stored, "lost": lost})
        return lost

    def clear_loss(self, lost: str) -> bool:
        """Drop the ``lost`` note, unless another loss was noted since (or the shard is missing)."""
        stored = self.read_meta()
        if stored is None or stored.get("lost") != lost or not self.exists():
            return False
        self.write_meta({k: v for k, v in stored.items() if k != "lost"})
        logger.warning("vector index %s is whole again (rebuilt from Postgres after: %s)", self.path, lost)
        return True

    def search_refusal(self, *, shard_open: bool) -> str | None:
        """Why a search must not answer, or None: the meta file records an index whose shard is
        missing, or a loss not yet repaired. A partial index would answer "no such memory" for
        what it lost."""
        meta = self.read_meta() if shard_open or self.meta_path.is_file() else None
        if not shard_open and meta is not None:
            return (
                f"vector index {self.path} is missing although {self.meta_path.name} records it "
                f"({meta.get('lost') or 'deleted?'}); rebuild it from Postgres with `cuemem reindex` "
                "or `cuemem maintain` (reconciliation)"
            )
        if meta is not None and meta.get("lost"):
            return (
                f"vector index {self.path} is incomplete: {meta['lost']}; it holds only what was "
                "written since, until reconciliation (`memory.reconcile`, `cuemem maintain`) or "
                "`cuemem reindex` rebuilds it from Postgres"
            )
        return None


# ---- filters on the payload fields ``create`` indexes --------------------------------------------


def scope_filter(tenant_id: str, user_id: str, extra: Sequence[Any] = ()) -> Filter:
    # Exact keyword matches only: the ids are compared as values, never parsed as a query.
    return Filter(
        must=[
            FieldCondition("tenant_id", match=MatchValue(tenant_id)),
            FieldCondition("user_id", match=MatchValue(user_id)),
            *extra,
        ]
    )


def status_filter(tenant_id: str, user_id: str, statuses: list[str]) -> Filter:
    return scope_filter(tenant_id, user_id, extra=[FieldCondition("status", match=MatchAny(statuses))])


def scrolled(
    shard: EdgeShard,
    where: Filter,
    *,
    with_payload: bool,
    with_vector: bool | list[str] = False,
    page: int = 1024,
) -> Iterator[Record]:
    """Every point ``where`` matches, page by page."""
    offset: Any = None
    while True:
        request = ScrollRequest(
            offset=offset, limit=page, filter=where, with_payload=with_payload, with_vector=with_vector
        )
        records, offset = shard.scroll(request)
        yield from records
        if offset is None:
            return
