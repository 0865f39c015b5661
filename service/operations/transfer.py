"""Export a user or a tenant, and import such a file, for ``cuemem export`` / ``cuemem import``
and ``GET /v1/export`` / ``POST /v1/import`` alike (the format: ``shared/transfer.py``).

An import never calls the LLM: it writes what the file holds. It re-embeds only when the file's
embedding model (or dimension) is not this deployment's: memories from their content, turns from
their context windows (``shared.ingest.embed.embed_windows``); otherwise the file's vectors are
kept. The imported rows are then pushed to the indexes (here, or by the index owner).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import IO, Any

from service.operations.index_followups import sync_index
from service.operations.ports import Indexing
from shared.ingest.embed import claim_embedding_model, embed_windows
from shared.models import imported_memory_id
from shared.storage import UnitOfWork
from shared.transfer import (
    TABLES,
    Batch,
    Header,
    ImportFile,
    ImportRefused,
    end_line,
    row_line,
    split_lines,
)

log = logging.getLogger(__name__)
BATCH = 500  # rows read, checked and written at a time: what an import holds in memory
READ_BYTES = 1 << 16


def export_lines(container: Indexing, tenant_id: str, user_id: str | None) -> Iterator[str]:
    """The header, then every row of the tenant (or of its user), table by table, one snapshot."""
    embedder = container.embedder
    header = Header(tenant_id, user_id, embedder.model_name, embedder.dim)
    yield header.to_line(datetime.now(UTC).isoformat())
    counts = dict.fromkeys(TABLES, 0)
    with container.uow() as uow:
        uow.transfer.pin_snapshot()
        for table in TABLES:
            for row in uow.transfer.export_rows(table, tenant_id, user_id):
                counts[table] += 1
                yield row_line(table, row)
    yield end_line(counts)


def import_file(container: Indexing, file: IO[bytes], tenant_id: str | None = None) -> dict[str, Any]:
    """Import an export read from a binary file, a chunk at a time (``import_lines``)."""
    return import_lines(container, split_lines(iter(lambda: file.read(READ_BYTES), b"")), tenant_id)


def import_lines(container: Indexing, lines: Iterable[str], tenant_id: str | None = None) -> dict[str, Any]:
    """Import an export. ``tenant_id`` (the API key's) refuses a file of another tenant. The lines
    are read, checked and written a batch at a time (``BATCH`` rows), all in one transaction that
    commits only after the end line: a bad line anywhere writes nothing. Raises ImportRefused."""
    started = time.perf_counter()
    file = ImportFile(lines, container.limits)
    header = file.header
    if tenant_id is not None and header.tenant_id != tenant_id:
        raise ImportRefused(
            1, f"the file holds tenant {header.tenant_id!r}; this key's tenant is {tenant_id!r}"
        )
    embedder = container.embedder
    run = _Import(
        container,
        header.tenant_id,
        (header.embedding_model, header.dim) != (embedder.model_name, embedder.dim),
    )
    with container.uow() as uow:
        claim_embedding_model(uow, embedder)
        for table, batch in file.batches(BATCH):
            run.write(uow, table, batch)
        uow.commit()
    users = sorted(run.users)
    indexed = {user: sync_index(container, header.tenant_id, user) for user in users}
    report = {
        "tenant_id": header.tenant_id,
        "users": users,
        "imported": run.imported,
        "already_present": {t: file.counts[t] - run.imported[t] for t in TABLES if t != "memory_history"},
        "reembedded": run.reembedded,
        "embedding_model": {"file": header.embedding_model, "here": embedder.model_name},
        "indexed": indexed,
    }
    elapsed_ms = 1000 * (time.perf_counter() - started)
    log.info(
        "import of %s (%d users): %s, re-embedded %d, %.0f ms",
        header.tenant_id, len(users), report["imported"], run.reembedded, elapsed_ms,
    )  # fmt: skip
    return report


class _Import:
    """One import's writes, a batch at a time, and what it keeps across batches: the users, the
    counts, and the ids of the memories it inserted (their history follows them)."""

    def __init__(self, container: Indexing, tenant_id: str, reembed: bool) -> None:
        self.container = container
        self.tenant_id = tenant_id
        self.reembed = reembed
        self.users: set[str] = set()
        self.imported = dict.fromkeys(TABLES, 0)
        self.reembedded = 0
        self.memories: set[str] = set()

    def write(self, uow: UnitOfWork, table: str, batch: Batch) -> None:
        self.users |= {row["user_id"] for _, row in batch}
        if table in ("memories", "memory_history"):
            batch = self._own_ids(uow, table, batch)
        if table == "memory_history":
            # History follows its memory: a memory kept from an earlier import keeps its history.
            batch = [(n, row) for n, row in batch if row["memory_id"] in self.memories]
        inserted = uow.transfer.import_rows(table, batch)
        self.imported[table] += len(batch) if table == "memory_history" else len(inserted)
        if table == "memories":
            self.memories |= inserted
            self._memories_written(uow, sorted(inserted))
        elif table == "events":
            self._events_written(uow, [row for _, row in batch if row["event_id"] in inserted])

    def _own_ids(self, uow: UnitOfWork, table: str, batch: Batch) -> Batch:
        """The batch with the tenant's own memory ids: a file's id that this user holds already
        stays (the same memory, imported again), every other becomes ``imported_memory_id``,
        whoever else may hold it (models.py says why)."""
        columns = ("id", "superseded_by") if table == "memories" else ("memory_id", "related_id")
        named = sorted({row[c] for _, row in batch for c in columns if row.get(c) is not None})
        held = uow.transfer.held_memory_ids(self.tenant_id, named)

        def own(user: str, memory_id: str | None) -> str | None:
            if memory_id is None or (user, memory_id) in held:
                return memory_id
            return imported_memory_id(self.tenant_id, user, memory_id)

        return [
            (n, {**row, **{c: own(row["user_id"], row.get(c)) for c in columns if c in row}})
            for n, row in batch
        ]

    def _memories_written(self, uow: UnitOfWork, ids: list[str]) -> None:
        if self.reembed and ids:
            embedder = self.container.embedder
            pairs = uow.transfer.drop_vectors(ids)
            vectors = embedder.embed_passages([content for _, content in pairs]) if pairs else []
            uow.transfer.set_memory_vectors(
                {memory_id: v for (memory_id, _), v in zip(pairs, vectors, strict=True)}, embedder.model_name
            )
            self.reembedded += len(pairs)
        uow.transfer.mark_unindexed(self.tenant_id, ids, [])

    def _events_written(self, uow: UnitOfWork, rows: list[dict[str, Any]]) -> None:
        if self.reembed:
            # Turns come in conversation order: the turns a window holds are written already.
            with_vectors = [row for row in rows if row.get("embedding")]
            for user in sorted({row["user_id"] for row in with_vectors}):
                ids = [row["event_id"] for row in with_vectors if row["user_id"] == user]
                self.reembedded += embed_windows(
                    uow,
                    self.container.embedder,
                    self.tenant_id,
                    user,
                    ids,
                    self.container.settings.turn_window,
                    self.container.settings.turn_alone_vector,
                )
        uow.transfer.mark_unindexed(self.tenant_id, [], sorted(row["event_id"] for row in rows))
