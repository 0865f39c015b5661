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
from typing import Any

from service.operations.index_followups import sync_index
from shared.ingest.embed import check_embedding_model, embed_windows
from shared.transfer import TABLES, Header, ImportRefused, end_line, parse_header, parse_rows, row_line
from workers.bootstrap import Container

log = logging.getLogger(__name__)


def export_lines(container: Container, tenant_id: str, user_id: str | None) -> Iterator[str]:
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


def import_lines(container: Container, lines: Iterable[str], tenant_id: str | None = None) -> dict[str, Any]:
    """Import an export. ``tenant_id`` (the API key's) refuses a file of another tenant. Every line
    is checked before anything is written; then one transaction. Raises ImportRefused."""
    started = time.perf_counter()
    numbered = list(enumerate(lines, start=1))
    header = parse_header(numbered[0][1] if numbered else None)
    if tenant_id is not None and header.tenant_id != tenant_id:
        raise ImportRefused(
            1, f"the file holds tenant {header.tenant_id!r}; this key's tenant is {tenant_id!r}"
        )
    rows = parse_rows(numbered[1:], header, container.settings.max_id_chars)
    embedder = container.embedder
    same_model = (header.embedding_model, header.dim) == (embedder.model_name, embedder.dim)
    with container.uow() as uow:
        check_embedding_model(uow, embedder)
        events = uow.transfer.import_rows("events", rows["events"])
        receipts = uow.transfer.import_rows("event_receipts", rows["event_receipts"])
        memories = uow.transfer.import_rows("memories", rows["memories"])
        # History follows its memory: a memory kept from an earlier import keeps its history.
        history = [(n, r) for n, r in rows["memory_history"] if r.get("memory_id") in memories]
        uow.transfer.import_rows("memory_history", history)
        reembedded = 0
        if not same_model:
            pairs = uow.transfer.drop_vectors(sorted(memories))
            vectors = embedder.embed_passages([content for _, content in pairs]) if pairs else []
            uow.transfer.set_memory_vectors(
                {memory_id: v for (memory_id, _), v in zip(pairs, vectors, strict=True)}, embedder.model_name
            )
            reembedded = len(pairs)
            with_vectors = [
                row for _, row in rows["events"] if row["event_id"] in events and row.get("embedding")
            ]
            for user in sorted({row["user_id"] for row in with_vectors}):
                ids = [row["event_id"] for row in with_vectors if row["user_id"] == user]
                reembedded += embed_windows(
                    uow, embedder, header.tenant_id, user, ids, container.settings.turn_window
                )
        uow.transfer.mark_unindexed(header.tenant_id, sorted(memories), sorted(events))
        uow.commit()
    users = sorted({row["user_id"] for table in TABLES for _, row in rows[table]})
    indexed = {user: sync_index(container, header.tenant_id, user) for user in users}
    counts = {"events": events, "event_receipts": receipts, "memories": memories}
    report = {
        "tenant_id": header.tenant_id,
        "users": users,
        "imported": {**{t: len(ids) for t, ids in counts.items()}, "memory_history": len(history)},
        "already_present": {t: len(rows[t]) - len(ids) for t, ids in counts.items()},
        "reembedded": reembedded,
        "embedding_model": {"file": header.embedding_model, "here": embedder.model_name},
        "indexed": indexed,
    }
    log.info(
        "import of %s (%d users): %s, re-embedded %d, %.0f ms",
        header.tenant_id, len(users), report["imported"], reembedded, 1000 * (time.perf_counter() - started),
    )  # fmt: skip
    return report
