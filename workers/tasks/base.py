"""What every Celery task of cuemem shares: the house task class (retries, the redelivery cap,
dead letters) and ``run_unit``, one unit of work per task with its follow-ups enqueued only after
commit. The tasks themselves are thin (``ingest``, ``index``, ``lifecycle`` beside this module):
decode the message, call one service function of ``shared/``.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from infra import tracing
from shared.queues import TaskName
from shared.settings import get_settings
from shared.storage import FollowUp, UnitOfWork
from workers.bootstrap import Container, container
from workers.endpoints.embedders import EmbeddingError
from workers.endpoints.llm_runtime import current_event_id
from workers.failures import PERMANENT_ERRORS, TRANSIENT_ERRORS, PermanentFailure, count_delivery, dead_letter

log = logging.getLogger(__name__)

Item = TypeVar("Item")
Result = TypeVar("Result")


class PipelineTask(Task):
    """House defaults: retries with backoff and jitter for transient failures, a redelivery cap,
    and a dead-letter record (with the reason) for anything the pipeline gives up on."""

    autoretry_for = TRANSIENT_ERRORS
    dont_autoretry_for = PERMANENT_ERRORS
    retry_backoff = 1
    retry_jitter = True
    acks_late = True
    ignore_result = True

    # Read from the settings, not the container: Celery reads these when it registers the task,
    # in the parent process, where no connection may be opened before the fork.
    @property
    def max_retries(self) -> int:  # type: ignore[override]
        return get_settings().max_retries

    @property
    def retry_backoff_max(self) -> int:  # type: ignore[override]
        return get_settings().retry_backoff_max_s

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        c = container()
        deliveries = count_delivery(c, self.request.id, self.request.retries)
        if deliveries > c.settings.max_deliveries:
            # A message that killed its worker this many times is poison: park it, ack it.
            dead_letter(
                c, self.name, self.request.id, list(args), f"delivered {deliveries} times without finishing"
            )
            return None
        return super().__call__(*args, **kwargs)

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, TRANSIENT_ERRORS) and not isinstance(exc, PERMANENT_ERRORS):
            # Retries ran out on an outage, not on a bad message: parking it would make a passing
            # failure permanent (and drop a turn from the publish ledger). The event stays at its
            # stage, or the turn in the ledger, and the stalled sweep sends it again later.
            log.error(
                "%s %s gave up after %d retries (%s: %s); left to the stalled sweep",
                self.name, task_id, self.request.retries, type(exc).__name__, exc,
            )  # fmt: skip
            return
        dead_letter(container(), self.name, task_id, list(args), f"{type(exc).__name__}: {exc}")


def run_unit(
    name: str, key: str, work: Callable[[UnitOfWork], list[FollowUp]], *, dispatch: bool = True
) -> list[FollowUp]:
    """Run ``work`` in one unit of work, commit, then enqueue its follow-ups (or, with
    ``dispatch=False``, hand them back to the caller, who runs some of them in process)."""
    c = container()
    started = time.perf_counter()
    # LLM usage rows name the event they were spent on by its pipeline key (``shared.events.
    # event_ref``: event ids are unique per tenant only); the privacy delete finds them by it.
    token = current_event_id.set(key)
    traced = {"cuemem.task": name, "cuemem.unit.key": key} if tracing.enabled() else None
    try:
        with tracing.span("cuemem.unit", traced), c.uow() as uow:
            try:
                followups = work(uow)
            except EmbeddingError as exc:
                if exc.transient:
                    raise
                raise PermanentFailure(str(exc)) from exc
            uow.commit()
    finally:
        current_event_id.reset(token)
    # Only after commit: a follow-up must never see state that was rolled back.
    if dispatch:
        c.dispatch(followups)
    log.info(
        "%s %s done in %.1f ms, %d follow-ups",
        name,
        key,
        (time.perf_counter() - started) * 1e3,
        len(followups),
    )
    return followups


def batch_key(ids: Sequence[str]) -> str:
    """How a batch is named in the logs: its first id and its size."""
    return ids[0] if len(ids) == 1 else f"{ids[0]}+{len(ids) - 1}"


def run_batch(
    name: str,
    ids: Sequence[str],
    work: Callable[[UnitOfWork], list[FollowUp]],
    one_by_one: Callable[[], list[FollowUp]],
    *,
    dispatch: bool = True,
    split_alone: bool = False,
) -> list[FollowUp] | None:
    """Run a batch in one unit of work (``run_unit``; ``dispatch`` as there) and return its
    follow-ups. Transient failures go to Celery's retry like any task's. Any other failure of a
    batch of several (or of one, with ``split_alone``) is not the batch's verdict but one
    member's: the follow-ups of ``one_by_one`` (each member as its own message) are sent instead,
    so that the bad one is retried and parked alone while the others go on; returns None then."""
    try:
        return run_unit(name, batch_key(ids), work, dispatch=dispatch)
    except TRANSIENT_ERRORS:
        raise
    except Exception as exc:
        if len(ids) <= 1 and not split_alone:
            raise
        log.warning(
            "%s %s failed as a batch (%s: %s); each goes on alone",
            name,
            batch_key(ids),
            type(exc).__name__,
            exc,
        )
        container().dispatch(one_by_one())
        return None


def sync_touched(c: Container, touched: Sequence[tuple[str, str]]) -> None:
    """After a sweep changed memories of these (tenant, user) pairs: the index owner syncs each."""
    c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])


def finish_sweep(name: str, c: Container, stats: Any, touched: Sequence[tuple[str, str]]) -> None:
    """The end of every lifecycle sweep: the touched users synced by the index owner, the counts logged."""
    sync_touched(c, touched)
    log.info("%s: %s", name, stats)


def each_concurrently(
    work: Callable[[Item], Result],
    items: Sequence[Item],
    at_once: int,
    late: Callable[[Item, Result | BaseException], None] | None = None,
) -> Iterator[tuple[Item, Result | BaseException]]:
    """``work`` on every item, ``at_once`` of them at a time on threads (inline when 1), each in
    a copy of the caller's context (the task's trace span, its log context); yields each item
    with its result or the exception it raised, in the items' order. An item's failure is its
    outcome, not the caller's: what the others did is committed and must be dispatched.

    When the wait itself is interrupted (Celery's soft time limit, which only the main thread
    receives; a shutdown), the items not started are cancelled and yield the interruption; an
    item still running on its thread is not yielded: ``late`` gets its outcome when it ends (the
    call returns without waiting for it). Inline, the soft limit interrupts the item itself, which
    yields it, and the items after it yield it without running."""
    if at_once <= 1 or len(items) <= 1:
        for n, item in enumerate(items):
            try:
                outcome = contextvars.copy_context().run(_outcome, work, item)
            except BaseException as interruption:
                yield from ((rest, interruption) for rest in items[n:])
                return
            yield item, outcome
        return
    pool = ThreadPoolExecutor(max_workers=min(at_once, len(items)), thread_name_prefix="unit")
    futures = [pool.submit(contextvars.copy_context().run, _outcome, work, item) for item in items]
    outcomes: list[Result | BaseException] = []
    try:
        for future in futures:
            outcomes.append(future.result())
    except BaseException as interruption:
        pool.shutdown(wait=False, cancel_futures=True)
        yield from zip(items[: len(outcomes)], outcomes, strict=True)
        for item, future in zip(items[len(outcomes) :], futures[len(outcomes) :], strict=True):
            if future.cancelled() or (future.done() and future.exception() is not None):
                yield item, interruption  # not started, or stopped by something not an Exception
            elif future.done():
                yield item, future.result()
            elif late is not None:
                future.add_done_callback(_calling(late, item))
        return
    pool.shutdown(wait=True)
    yield from zip(items, outcomes, strict=True)


def _calling(
    late: Callable[[Item, Result | BaseException], None], item: Item
) -> Callable[[Future[Any]], None]:
    """A done-callback handing ``late`` the item's outcome: its result, or what stopped it."""

    def ended(future: Future[Any]) -> None:
        error = future.exception()
        late(item, error if error is not None else future.result())

    return ended


def _outcome(work: Callable[[Item], Result], item: Item) -> Result | BaseException:
    try:
        return work(item)
    except SoftTimeLimitExceeded:
        raise  # the task's limit, not the item's failure (inline only: threads never get it)
    except Exception as exc:
        return exc
