"""Publish chat turns as sequenced events.

Publishing one turn is two steps:
1. one atomic Redis script assigns the turn's ``seq`` in its conversation (INCR, or "at least
   this" for an explicit seq replaying a log) and appends the turn to the conversation's working
   memory, so recall can see it at once (read-your-writes), before any worker ran;
2. the event is noted in the publish ledger (``infra.redis_layout.UNRECORDED``) and sent to the broker as
   a ``memory.record`` task, by name. The ledger entry stays until the record committed, so a
   message a Redis broker lost (a worker killed right after popping it) is sent again by the
   stalled sweep.
Only step 2 is retried (with tenacity): retrying step 1 would burn a new seq.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import redis
from kombu.exceptions import OperationalError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from infra import redis_layout, tracing
from infra.broker import open_redis, send_only_app, send_task
from producers.fair_share import FairShare
from shared.events import (
    MAX_SEQ,
    EventLimits,
    FieldError,
    InvalidEvent,
    TurnPublished,
    event_ref,
    record_message,
    validate_turn,
)
from shared.queues import ROUTES, TaskName
from shared.settings import Settings, get_settings

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)

_BROKER_ERRORS = (
    OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionError,
)


BATCH_SIZE = 64  # turns per memory.record_batch message (publish_batch)


@dataclass(frozen=True)
class Published:
    """A turn the publisher accepted. ``tenant_id`` is the tenant it was published under; the HTTP
    client leaves it None (the API key, not the caller, decides the tenant there)."""

    event_id: str
    seq: int
    session_id: str
    user_id: str
    tenant_id: str | None = None

    @property
    def ref(self) -> str:
        """The pipeline key of this turn (``shared.events.event_ref``: tenant and event id), what
        ``shared.ingest.progress`` and every wait on the pipeline look it up by. An event id alone
        is unique only within its tenant, so waiting on one never sees its turn finish."""
        if self.tenant_id is None:
            raise ValueError(
                f"event {self.event_id!r}: published without a known tenant, it has no pipeline key"
            )
        return event_ref(self.tenant_id, self.event_id)


@dataclass
class BatchResult:
    published: list[Published] = field(default_factory=list)
    errors: list[tuple[int, InvalidEvent]] = field(default_factory=list)


class Publisher:
    def __init__(
        self,
        broker_url: str,
        redis_url: str,
        *,
        tenant_id: str = "default",
        limits: EventLimits | None = None,
        publish_attempts: int = 5,
        working_memory_turns: int = 20,
        working_memory_ttl_s: int = 7 * 24 * 3600,
        redis_client: redis.Redis | None = None,
        fair_share_turns: int = 0,
        fair_share_window_s: int = 60,
        app: Celery | None = None,
    ):
        self.tenant_id = tenant_id
        self.limits = limits or EventLimits()
        self._attempts = publish_attempts
        self._wm_turns = working_memory_turns
        self._wm_ttl = working_memory_ttl_s
        self._redis = redis_client or open_redis(redis_url)
        self._assign = self._redis.register_script(redis_layout.ASSIGN_SEQ_SCRIPT)
        self._fair_share = FairShare(self._redis, fair_share_turns, fair_share_window_s)
        # Tasks are sent by name: producers never import the workers' app. ``app``: a send-only
        # app of the caller's own (one for ``broker_url`` when not given).
        self._app = app or send_only_app(broker_url)

    @classmethod
    def from_settings(cls, settings: Settings) -> Publisher:
        redis_url = settings.effective_redis_url
        if not settings.broker_url or not redis_url:
            raise ValueError(
                "CUEMEM_BROKER_URL (and CUEMEM_REDIS_URL when the broker is not Redis) must be set to "
                "publish; the CLI sets them itself on the embedded default"
            )
        # CUEMEM_TRACING; nothing when off. The same service name as the rest of the app's cuemem
        # code (build_container), whichever of them comes first.
        tracing.configure(settings, tracing.SERVICE)
        return cls(
            settings.broker_url,
            redis_url,
            tenant_id=settings.tenant_id,
            limits=EventLimits(
                settings.max_content_chars, settings.max_id_chars, settings.max_metadata_bytes
            ),
            publish_attempts=settings.publish_retries,
            working_memory_turns=settings.working_memory_turns,
            working_memory_ttl_s=settings.working_memory_ttl_s,
            fair_share_turns=settings.fair_share_turns,
            fair_share_window_s=settings.fair_share_window_s,
        )

    @classmethod
    def from_env(cls) -> Publisher:
        return cls.from_settings(get_settings())

    # --- publishing ---------------------------------------------------------------------------

    def publish(
        self,
        *,
        user_id: str,
        session_id: str,
        role: str,
        content: str,
        at: Any = None,
        seq: int | None = None,
        event_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        tenant_id: str | None = None,
    ) -> Published:
        """Publish one turn; raises InvalidEvent (naming each bad field) before anything is sent."""
        raw: dict[str, Any] = {"user_id": user_id, "session_id": session_id, "role": role, "content": content}
        for key, value in (("at", at), ("seq", seq), ("event_id", event_id), ("metadata", metadata)):
            if value is not None:
                raw[key] = value
        raw["tenant_id"] = tenant_id or self.tenant_id
        return self.publish_turn(raw)

    def publish_turn(self, raw: Mapping[str, Any]) -> Published:
        event, seq_assigned = self._sequenced(raw)
        self._send([(event, seq_assigned)])
        return _published(event)

    def publish_batch(self, turns: Iterable[Mapping[str, Any]]) -> BatchResult:
        """Publish many turns; invalid ones are reported by position and the rest still land.

        Each turn gets its seq and enters the working memory at once, as with ``publish_turn``;
        they are sent ``BATCH_SIZE`` to a message (``memory.record_batch``), which the workers
        record, extract, embed and persist in one unit of work with one model call."""
        result = BatchResult()
        pending: list[tuple[TurnPublished, bool]] = []
        for i, raw in enumerate(turns):
            try:
                pending.append(self._sequenced(raw))
            except InvalidEvent as exc:
                # Kept without its traceback: its frames hold the refused turn, and a batch of
                # refused turns with large metadata held every one of them until the answer.
                result.errors.append((i, exc.with_traceback(None)))
                continue
            if len(pending) == BATCH_SIZE:
                self._send(pending)
                result.published += [_published(e) for e, _ in pending]
                pending = []
        if pending:
            self._send(pending)
            result.published += [_published(e) for e, _ in pending]
        return result

    def close(self) -> None:
        self._app.close()
        self._redis.close()

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- steps --------------------------------------------------------------------------------

    def _retrying(self) -> Retrying:
        """The one retry policy of a publish step: broker errors, backoff with jitter."""
        return Retrying(
            retry=retry_if_exception_type(_BROKER_ERRORS),
            stop=stop_after_attempt(self._attempts),
            wait=wait_exponential_jitter(multiplier=0.1, max=5),
            reraise=True,
        )

    def _sequenced(self, raw: Mapping[str, Any]) -> tuple[TurnPublished, bool]:
        """Validate a turn and give it its seq (and its place in the working memory); returns it
        with whether the counter chose the seq."""
        if not isinstance(raw, Mapping):
            raise InvalidEvent([FieldError("event", f"must be a JSON object, got {type(raw).__name__}")])
        data = dict(raw)
        data.setdefault("tenant_id", self.tenant_id)
        # The receiving clock: a turn may not claim a time more than a day ahead of it.
        event = validate_turn(data, self.limits, now=datetime.now(UTC), require_seq=False)
        explicit = data.get("seq")
        return replace(event, seq=self._assign_seq(event, explicit)), explicit is None

    def _assign_seq(self, event: TurnPublished, explicit: Any) -> int:
        keys, args = redis_layout.assign_seq_call(
            event, None if explicit is None else int(explicit), self._wm_turns, self._wm_ttl
        )
        for attempt in self._retrying():
            with attempt:
                seq = int(self._assign(keys=keys, args=args))
        if seq == redis_layout.SEQS_USED_UP:
            raise InvalidEvent(
                [FieldError("seq", f"the conversation's seqs are used up (the largest is {MAX_SEQ}); "
                                   "continue it under a new session_id")]
            )  # fmt: skip
        return seq

    def _note_unrecorded(self, entries: Mapping[str, dict[str, Any]]) -> None:
        redis_layout.add_to_ledger(self._redis, entries, int(time.time() * 1000))

    def _forget_unrecorded(self, members: list[str]) -> None:
        try:
            redis_layout.drop_from_ledger(self._redis, members)
        except _BROKER_ERRORS:
            log.warning("could not drop %s from the publish ledger; the sweep may record them", members)

    def _send(self, events: list[tuple[TurnPublished, bool]]) -> None:
        """Send sequenced turns: one ``memory.record`` message for one turn, one
        ``memory.record_batch`` for several. Each is noted in the publish ledger first, so a turn
        whose message is lost is sent again by the stalled sweep."""
        started = time.perf_counter()
        # Marked when the counter chose the seq: should Redis lose the counter's last increments
        # in a crash, the recorder renumbers a clash instead of rejecting it.
        entries = {
            redis_layout.ledger_member(event.tenant_id, event.event_id): record_message(
                event, seq_assigned=assigned
            )
            for event, assigned in events
        }
        messages = list(entries.values())
        task, args = (
            (TaskName.RECORD, [messages[0]]) if len(messages) == 1 else (TaskName.RECORD_BATCH, [messages])
        )
        # A tenant past its share of the window goes to the back of the queue (producers/fair_share.py).
        priority = self._fair_share.priority(Counter(event.tenant_id for event, _ in events))
        try:
            traced = _publish_attributes(events, task) if tracing.enabled() else None
            with tracing.span("cuemem.publish", traced, kind=tracing.PRODUCER):
                self._send_once(entries, task, args, priority)
        except BaseException:
            # The caller is told the publish failed: the sweep must not record it behind its back
            # (a caller retrying under a new id would then get the turn twice).
            self._forget_unrecorded(list(entries))
            raise
        log.debug(
            "published %d turns (first %s seq %d) in %.1f ms",
            len(events),
            events[0][0].event_id,
            events[0][0].seq,
            (time.perf_counter() - started) * 1e3,
        )

    def _send_once(
        self, entries: dict[str, dict[str, Any]], task: TaskName, args: list[Any], priority: int | None
    ) -> None:
        for attempt in self._retrying():
            with attempt:
                self._note_unrecorded(entries)
                # Celery's own publish retry is off so that tenacity is the one retry policy.
                send_task(
                    self._app, task.value, args=args, queue=ROUTES[task].value, retry=False, priority=priority
                )


def _publish_attributes(events: list[tuple[TurnPublished, bool]], task: TaskName) -> dict[str, Any]:
    first = events[0][0]
    return {
        "messaging.system": "celery",
        "messaging.destination.name": ROUTES[task].value,
        "cuemem.tenant_id": first.tenant_id,
        "cuemem.user_id": first.user_id,
        "cuemem.session_id": first.session_id,
        "cuemem.event_id": first.event_id,
        "cuemem.seq": first.seq,
        "cuemem.turns": len(events),
    }


def _published(event: TurnPublished) -> Published:
    return Published(event.event_id, event.seq, event.session_id, event.user_id, event.tenant_id)
