"""The ingest stages as tasks: record → extract → embed → persist → index → resolve, and the
sweep that re-drives events stuck between them (``shared/ingest/``, one module per stage)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import Task

from shared import keys
from shared.ingest import resume
from shared.ingest.embed import embed_event
from shared.ingest.extract import extract_event
from shared.ingest.index import index_event
from shared.ingest.persist import persist_event
from shared.ingest.record import record_event
from shared.ingest.resolve import resolve_event
from shared.queues import TaskName
from workers.bootstrap import container
from workers.celery_app import app
from workers.tasks.base import PipelineTask, run_unit


@app.task(name=TaskName.RECORD.value, base=PipelineTask, bind=True)
def record(self: Task, message: dict[str, Any]) -> None:
    c = container()
    key = str(message.get("event_id")) if isinstance(message, dict) else "?"
    run_unit(self.name, key, lambda uow: record_event(uow, message, c.limits, c.seq_counter))
    settle_published(c, message)


def settle_published(c: Any, message: Any) -> None:
    """The turn's record committed (or it was parked): the publish ledger may forget it."""
    event_id = message.get("event_id") if isinstance(message, dict) else None
    ledger = c.ledger
    if isinstance(event_id, str) and ledger is not None:
        tenant = message.get("tenant_id") or "default"
        ledger.settle([keys.ledger_member(str(tenant), event_id)])


@app.task(name=TaskName.EXTRACT.value, base=PipelineTask, bind=True)
def extract(self: Task, event_id: str) -> None:
    c = container()
    threshold = c.settings.importance_threshold
    extractor = c.extractor()
    run_unit(
        self.name,
        event_id,
        lambda uow: extract_event(
            uow, event_id, threshold, c.clock(), extractor, keep_turns=c.settings.index_turns
        ),
    )


@app.task(name=TaskName.EMBED.value, base=PipelineTask, bind=True)
def embed(self: Task, event_id: str) -> None:
    c = container()
    keep, window = c.settings.index_turns, c.settings.turn_window
    run_unit(self.name, event_id, lambda uow: embed_event(uow, c.embedder, event_id, keep, window))


@app.task(name=TaskName.PERSIST.value, base=PipelineTask, bind=True)
def persist(self: Task, event_id: str) -> None:
    c = container()
    run_unit(self.name, event_id, lambda uow: persist_event(uow, event_id, c.clock()))


@app.task(name=TaskName.INDEX.value, base=PipelineTask, bind=True)
def index(self: Task, event_id: str) -> None:
    c = container()
    run_unit(self.name, event_id, lambda uow: index_event(uow, c.indexes(), c.embedder, event_id))


@app.task(name=TaskName.RESOLVE.value, base=PipelineTask, bind=True)
def resolve(self: Task, event_id: str) -> None:
    c = container()
    run_unit(
        self.name,
        event_id,
        lambda uow: resolve_event(uow, event_id, c.judge, c.embedder, c.clock(), c.strategies),
    )


@app.task(name=TaskName.RESUME_STALLED.value, base=PipelineTask, bind=True)
def resume_stalled(self: Task, older_than_s: int = 300) -> None:
    """Re-drive events stuck at one stage, and re-send published turns never recorded, for longer
    than ``older_than_s`` (keep it above the broker's visibility timeout)."""
    c = container()
    before = c.clock() - timedelta(seconds=older_than_s)
    run_unit(self.name, "sweep", lambda uow: resume.resume_stalled(uow, before, c.ledger))
