"""The ingest stages as tasks: record → extract → embed → persist → index → resolve, and the
sweep that re-drives events stuck between them (``shared/ingest/``, one module per stage)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import Task

from infra import redis_layout, tracing
from shared.events import event_ref
from shared.ingest import resume
from shared.ingest.advance import FUSED_STAGES, IngestSteps, advance_events
from shared.ingest.embed import embed_event
from shared.ingest.extract import extract_event
from shared.ingest.index import index_events
from shared.ingest.persist import persist_event
from shared.ingest.record import record_event, record_events
from shared.ingest.resolve import resolve_event
from shared.queues import TaskName
from shared.storage import FollowUp, UnitOfWork
from workers.bootstrap import Container, container
from workers.celery_app import app
from workers.failures import TRANSIENT_ERRORS, PermanentFailure, dead_letter
from workers.tasks.base import PipelineTask, batch_key, each_concurrently, run_batch, run_unit

log = logging.getLogger(__name__)


@app.task(name=TaskName.RECORD.value, base=PipelineTask, bind=True)
def record(self: Task, message: dict[str, Any]) -> None:
    """Record one published turn, then carry it on through extract, embed and persist."""
    c = container()
    key = str(message.get("event_id")) if isinstance(message, dict) else "?"
    followups = run_unit(
        self.name, key, lambda uow: record_event(uow, message, c.limits, c.seq_counter), dispatch=False
    )
    settle_published(c, [message])
    note_trace(c, [message])
    carry_on(self.name, c, followups, [message])


@app.task(name=TaskName.RECORD_BATCH.value, base=PipelineTask, bind=True)
def record_batch(self: Task, messages: list[Any]) -> None:
    """Record many published turns in one unit of work (``Publisher.publish_batch`` sends them),
    then carry them on together: one model call per user of the batch, one index message."""
    c = container()
    if not isinstance(messages, list) or not messages:
        raise PermanentFailure(f"{self.name} takes a non-empty list of turn messages")
    ids = [str(m.get("event_id")) if isinstance(m, dict) else "?" for m in messages]
    refused: list[tuple[Any, str]] = []

    def work(uow: UnitOfWork) -> list[FollowUp]:
        followups, refused[:] = record_events(uow, messages, c.limits, c.seq_counter)
        return followups

    # A failure of the record step is not the batch's verdict but one turn's: each goes on as its
    # own memory.record, so the bad one is retried and parked alone (with its own dead letter).
    followups = run_batch(
        self.name,
        ids,
        work,
        lambda: [FollowUp(TaskName.RECORD.value, (m,)) for m in messages],
        dispatch=False,
        split_alone=True,
    )
    if followups is None:
        return
    for message, reason in refused:
        dead_letter(c, TaskName.RECORD.value, self.request.id, [message], reason)
    settle_published(c, messages)
    note_trace(c, messages)
    carry_on(self.name, c, followups, messages)


def note_trace(c: Container, messages: list[Any]) -> None:
    """With tracing on, store the recording task's trace context with its turns, for the recalls
    that draw on them to link to (``infra/tracing.py``). Nothing when off."""
    if not tracing.enabled():
        return
    context = tracing.current_context()
    ids = [
        event_ref(str(m.get("tenant_id") or "default"), m["event_id"])
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("event_id"), str)
    ]
    if context is None or not ids:
        return
    with c.uow() as uow:
        uow.traces.note(ids, context)
        uow.commit()


def settle_published(c: Any, messages: list[Any]) -> None:
    """The turns' record committed (or they were parked): the publish ledger may forget them."""
    ledger = c.ledger
    members = [
        redis_layout.ledger_member(str(m.get("tenant_id") or "default"), m["event_id"])
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("event_id"), str)
    ]
    if members and ledger is not None:
        ledger.settle(members)


def carry_on(name: str, c: Container, followups: list[FollowUp], messages: list[Any]) -> None:
    """Run the extract, embed and persist steps that ``followups`` name in this process and send
    the rest: one unit of work (and one model call) per user of the batch, and one index message
    for all of them at the end (``shared/ingest/advance.py``).

    ``CUEMEM_INGEST_UNITS`` units run at once (threads, each its own connection), so that one
    user's model call overlaps the next user's extraction and SQL: the model releases the GIL and
    takes one call at a time (``E5Embedder``), so the model runs back to back while the rest of
    the pipeline's work is done beside it. Their outcomes are taken in (tenant, user) order.

    A unit per user, not per batch: persist and resolve hold the user's lock until the unit
    commits, so units of many users would hold up every batch sharing one of them (every batch of
    an interleaved backlog), and a failing unit costs only its own user's turns. After a
    transient failure no unit starts; once the running ones have ended and what committed is sent,
    the task is retried as any task is (the record step hands the same steps back, and users
    already done are past them). Any other failure of a user's unit sends that user's steps out
    as messages after all: the per-stage tasks take each event on alone, with their own retries
    and dead letters, and one bad turn holds up no other. The soft time limit or a shutdown while
    units run (``each_concurrently``): the users not started go on stage by stage, a unit still
    running sends what it gives when it ends."""
    inline = [f for f in followups if f.task in FUSED_STAGES]
    c.dispatch([f for f in followups if f.task not in FUSED_STAGES])
    if not inline:
        return
    owner = {
        event_ref(str(m.get("tenant_id") or "default"), m["event_id"]): (
            str(m.get("tenant_id") or "default"),
            str(m.get("user_id")),
        )
        for m in messages
        if isinstance(m, dict) and isinstance(m.get("event_id"), str)
    }
    groups: dict[tuple[str, str], list[FollowUp]] = {}
    for f in inline:
        groups.setdefault(owner.get(str(f.args[0]), ("", "")), []).append(f)
    steps = c.ingest_steps()
    halted = threading.Event()  # a unit failed transiently: the retry takes the users not started

    def unit(user: tuple[str, str]) -> list[FollowUp]:
        if halted.is_set():
            raise _LeftForRetry
        ids = [str(f.args[0]) for f in groups[user]]
        stages = sorted({f.task for f in groups[user]})
        try:
            with tracing.span("cuemem.advance", {"cuemem.stages": stages} if tracing.enabled() else None):
                return run_unit(name, batch_key(ids), _advance(ids, steps, c), dispatch=False)
        except TRANSIENT_ERRORS:
            halted.set()
            raise

    def gone_on(user: tuple[str, str], outcome: list[FollowUp] | BaseException) -> list[FollowUp]:
        """What to send for a user's unit: its follow-ups, or (it failed, or was stopped before it
        ended) its turns' steps, which go on stage by stage (each stage is idempotent)."""
        if isinstance(outcome, BaseException):
            log.warning(
                "%s %s: extract, embed and persist failed together (%s: %s); each goes on stage by stage",
                name, batch_key([str(f.args[0]) for f in groups[user]]), type(outcome).__name__, outcome,
            )  # fmt: skip
            return list(groups[user])
        return outcome

    def late(user: tuple[str, str], outcome: list[FollowUp] | BaseException) -> None:
        # A unit still running when the task's wait was interrupted ends on its own thread.
        c.dispatch(merge_index(gone_on(user, outcome)))

    onward: list[FollowUp] = []
    transient: BaseException | None = None
    stopped: BaseException | None = None
    left: list[tuple[str, str]] = []
    for user, outcome in each_concurrently(unit, sorted(groups), c.settings.ingest_units, late):
        if isinstance(outcome, _LeftForRetry):
            left.append(user)  # not started after a transient failure: the retry takes it
        elif isinstance(outcome, TRANSIENT_ERRORS):
            # An outage or a deadlock: Celery retries the record task with backoff; its record
            # step finds the turns recorded and hands the steps still to do back here (the users
            # whose units committed are past them).
            transient = transient or outcome
        else:
            onward += gone_on(user, outcome)
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                stopped = stopped or outcome  # a shutdown: raised once the rest is sent
    if transient is None:
        # The unit that failed transiently was still running when the wait was interrupted (its
        # outcome goes to ``late``): nothing will retry the users it kept from starting.
        onward += [f for user in left for f in groups[user]]
    c.dispatch(merge_index(onward))
    if stopped is not None:
        raise stopped
    if transient is not None:
        raise transient


class _LeftForRetry(Exception):
    """A user's unit not started because another failed transiently: the task's retry takes it."""


def _advance(ids: list[str], steps: IngestSteps, c: Container) -> Callable[[UnitOfWork], list[FollowUp]]:
    return lambda uow: advance_events(uow, ids, steps, c.clock())


def merge_index(followups: list[FollowUp]) -> list[FollowUp]:
    """The ``memory.index`` messages of several units as one for each ``resolved`` flag (the index
    owner pushes each user's rows once per message); the other follow-ups as they are."""
    merged: dict[bool, list[str]] = {}
    rest: list[FollowUp] = []
    for f in followups:
        if f.task != TaskName.INDEX.value:
            rest.append(f)
            continue
        ids, resolved = f.args[0], len(f.args) > 1 and f.args[1] is True
        merged.setdefault(resolved, []).extend([ids] if isinstance(ids, str) else ids)
    return rest + [FollowUp(TaskName.INDEX.value, (ids, resolved)) for resolved, ids in merged.items()]


@app.task(name=TaskName.EXTRACT.value, base=PipelineTask, bind=True)
def extract(self: Task, ref: str) -> None:
    """``ref``: the event's pipeline key (tenant and event id), or a bare event id sent before 0017."""
    c = container()
    threshold = c.settings.importance_threshold
    extractor = c.extractor()
    run_unit(
        self.name,
        ref,
        lambda uow: extract_event(
            uow, ref, threshold, c.clock(), extractor, keep_turns=c.settings.index_turns
        ),
    )


@app.task(name=TaskName.EMBED.value, base=PipelineTask, bind=True)
def embed(self: Task, ref: str) -> None:
    c = container()
    s = c.settings
    keep, window, alone = s.index_turns, s.turn_window, s.turn_alone_vector
    run_unit(self.name, ref, lambda uow: embed_event(uow, c.embedder, ref, keep, window, alone))


@app.task(name=TaskName.PERSIST.value, base=PipelineTask, bind=True)
def persist(self: Task, ref: str) -> None:
    c = container()
    run_unit(self.name, ref, lambda uow: persist_event(uow, ref, c.clock()))


@app.task(name=TaskName.INDEX.value, base=PipelineTask, bind=True)
def index(self: Task, event_id: str | list[str], resolved: bool = False) -> None:
    """One event, or a batch (the fused stages send one message for all they persisted): each
    user's rows pushed once per message. ``resolved``: the events' memories were judged before
    the index (the fused stages with the rules judge), so they are done here."""
    c = container()
    ids = [event_id] if isinstance(event_id, str) else [str(i) for i in event_id]
    run_batch(
        self.name,
        ids,
        lambda uow: index_events(uow, c.indexes(), c.embedder, ids, resolved is True),
        lambda: [FollowUp(TaskName.INDEX.value, (i,)) for i in ids],
    )


@app.task(name=TaskName.RESOLVE.value, base=PipelineTask, bind=True)
def resolve(self: Task, ref: str) -> None:
    c = container()
    run_unit(
        self.name,
        ref,
        lambda uow: resolve_event(uow, ref, c.judge, c.embedder, c.clock(), c.strategies),
    )


@app.task(name=TaskName.RESUME_STALLED.value, base=PipelineTask, bind=True)
def resume_stalled(self: Task, older_than_s: int = resume.STALLED_AFTER_S) -> None:
    """Re-drive events stuck at one stage, and re-send published turns never recorded, for longer
    than ``older_than_s`` (keep it above the broker's visibility timeout)."""
    c = container()
    before = c.clock() - timedelta(seconds=older_than_s)
    run_unit(
        self.name,
        "sweep",
        lambda uow: resume.resume_stalled(uow, before, c.ledger, max_redrives=c.settings.max_redrives),
    )
