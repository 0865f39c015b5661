"""The record stage: a published turn validated and written to the event log exactly once."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from shared.events import (
    EventLimits,
    FieldError,
    InvalidEvent,
    TurnPublished,
    split_record_message,
    validate_turn,
)
from shared.ingest.common import next_step
from shared.models import EventStage, is_redacted
from shared.ports import SeqCounter
from shared.storage import FollowUp, Receipt, UnitOfWork

log = logging.getLogger(__name__)

RENUMBER_ATTEMPTS = 5


class SeqContended(RuntimeError):
    """A renumbered turn found every new seq it drew taken (transient: the next try draws anew)."""


def record_event(
    uow: UnitOfWork, message: Mapping[str, Any], limits: EventLimits, counter: SeqCounter | None = None
) -> list[FollowUp]:
    """Validate and record one published turn exactly once (the inbox is keyed by event id).

    A seq the app chose is strict: a clash with another turn is rejected with the reason. A seq
    the producer's counter chose (``SEQ_ASSIGNED``) that clashes means the counter fell back
    (Redis lost its last increments in a crash); given ``counter``, the turn is renumbered past
    the conversation's last recorded seq instead of being lost (``_renumber``)."""
    message, seq_assigned = split_record_message(message)
    raw_id = message.get("event_id") if isinstance(message, Mapping) else None
    try:
        event = validate_turn(message, limits)
    except InvalidEvent as exc:
        if not isinstance(raw_id, str) or not raw_id or len(raw_id) > 512 or _storable(raw_id) != raw_id:
            # No usable key to hang a receipt on (Postgres cannot store a NUL or a lone surrogate,
            # and a cleaned id would not be the producer's): the caller dead-letters the message.
            raise
        # Every text of the receipt is cleaned: a NUL in a raw user id or an unknown field's name
        # made the insert itself fail, so the turn ended "failed" with a database error instead of
        # "rejected" with its reason (found by tests/e2e/test_bad_input_e2e.py).
        uow.receipts.add_if_absent(
            Receipt(
                event_id=raw_id,
                tenant_id=_storable(str(message.get("tenant_id") or "default")[:512]),
                user_id=_storable(str(message.get("user_id") or "")[:512]),
                outcome="rejected",
                reason=_storable(str(exc)),
                payload=_safe_payload(message),
            )
        )
        log.warning("event %s rejected: %s", raw_id, exc)
        return []

    # Event ids are the producer's, unique within a tenant (migration 0017): another tenant's turn
    # with the same id is another turn, recorded on its own, and nothing here tells of it.
    receipts = uow.receipts.get_many(event.tenant_id, [event.event_id])
    if event.event_id in receipts:
        seen = receipts[event.event_id]
        if seen.outcome != "accepted" and seen.user_id == event.user_id:
            return []
        stored = uow.events.get(event.ref)
        problem = reused_id_problem(seen, stored.event if stored else None, event)
        if problem is not None:
            # Refused loudly (a dead letter with the reason); the API refuses it before
            # publishing when the first turn is already recorded (service/operations/event_ids.py).
            raise InvalidEvent([FieldError("event_id", problem)])
        return next_step(event.ref, stored.stage) if stored else []

    if uow.events.insert_if_absent(event, EventStage.RECORDED.value):
        uow.receipts.add_if_absent(Receipt(event.event_id, event.tenant_id, event.user_id, "accepted"))
        log.info(
            "event %s recorded (%s/%s seq %d)", event.event_id, event.user_id, event.session_id, event.seq
        )
        return next_step(event.ref, EventStage.RECORDED.value)

    slot = uow.events.at_seq(event.tenant_id, event.user_id, event.session_id, event.seq)
    if (
        seq_assigned
        and counter is not None
        and slot is not None
        and slot.event.event_id != event.event_id
        and uow.events.get(event.ref) is None
    ):
        return _renumber(uow, event, slot.event.event_id, counter)
    if slot is not None and slot.event.content_hash == event.content_hash:
        uow.receipts.add_if_absent(
            Receipt(
                event.event_id,
                event.tenant_id,
                event.user_id,
                "duplicate",
                canonical_event_id=slot.event.event_id,
            )
        )
        log.info("event %s duplicates %s: nothing changes", event.event_id, slot.event.event_id)
        return []
    if slot is not None:
        reason = (
            f"seq {event.seq} of conversation {event.user_id}/{event.session_id} already holds different "
            f"content (event {slot.event.event_id}); a seq cannot be reused"
        )
    else:
        taken = uow.events.get(event.ref)
        reason = (
            f"event_id {_reused_reason(taken.event)}" if taken else "event_id is already used by another turn"
        )
    uow.receipts.add_if_absent(
        Receipt(
            event.event_id,
            event.tenant_id,
            event.user_id,
            "rejected",
            reason=reason,
            payload=event.to_message(),
        )
    )
    log.warning("event %s rejected: %s", event.event_id, reason)
    return []


def record_events(
    uow: UnitOfWork, messages: Sequence[Any], limits: EventLimits, counter: SeqCounter | None = None
) -> tuple[list[FollowUp], list[tuple[Any, str]]]:
    """Record a batch of published turns in this unit of work, each exactly as ``record_event``
    would alone. A message that cannot be recorded at all (no usable id, or an id another user
    holds) is returned with its reason instead of failing the batch: the caller parks it as the
    single ``memory.record`` would have been parked. Both raise before anything is written."""
    followups: list[FollowUp] = []
    refused: list[tuple[Any, str]] = []
    for message in messages:
        try:
            followups += record_event(uow, message, limits, counter)
        except InvalidEvent as exc:
            refused.append((message, str(exc)))
    return followups, refused


def _renumber(uow: UnitOfWork, event: TurnPublished, holder: str, counter: SeqCounter) -> list[FollowUp]:
    """Record a turn whose counter-assigned seq another turn holds under a new seq, above every
    recorded seq of the conversation and above the counter, which moves past it (so the turns
    published next are not handed taken seqs either). The receipt says what happened.

    The turn was published after the holder was given the seq, but turns published right after
    it may be recorded before it and so come first in the timeline: after a Redis crash the order
    of the few turns around it is not guaranteed (docs/RELIABILITY.md, "Ordering")."""
    tenant, user, session = event.conversation
    floor = uow.events.max_seq(tenant, user, session)
    for _ in range(RENUMBER_ATTEMPTS):
        seq = counter.next_after(tenant, user, session, floor)
        moved = replace(event, seq=seq)
        if uow.events.insert_if_absent(moved, EventStage.RECORDED.value):
            reason = (
                f"renumbered from seq {event.seq} to {seq}: event {holder} already holds seq {event.seq} "
                "of this conversation, which the seq counter handed out again (it lost increments, as "
                "in a Redis crash)"
            )
            uow.receipts.add_if_absent(Receipt(event.event_id, tenant, user, "accepted", reason=reason))
            log.warning("event %s %s", event.event_id, reason)
            return next_step(event.ref, EventStage.RECORDED.value)
        # Taken meanwhile (a turn handed that seq before the crash, recorded just now): go higher.
        floor = max(floor, seq)
    raise SeqContended(
        f"event {event.event_id}: {RENUMBER_ATTEMPTS} new seqs for {user}/{session} were all taken"
    )


def reused_id_problem(seen: Receipt, stored: TurnPublished | None, event: TurnPublished) -> str | None:
    """Why ``event`` may not take its event id, which ``seen`` (a receipt of its tenant: event ids
    are unique per tenant, another tenant's same id is another turn) already holds, with
    ``stored`` the turn recorded under it; None when ``event`` is that turn again (a redelivery or
    a re-publish, not a reuse)."""
    if seen.user_id != event.user_id:
        # Another user of this tenant holds this id: its receipt and stage are not this turn's.
        return "is already used by another user; choose another id"
    if seen.outcome != "accepted" or stored is None or is_redacted(stored):
        # (A redacted turn is not compared: a replay of its erased words is refused quietly,
        # and a dead letter would keep them again.)
        return None
    if _other_turn(stored, event):
        # The id names a recorded turn and this is not it (other words, or another place in the
        # conversations): a redelivery it is not, and keeping the first one silently would drop
        # this turn without a word.
        return _reused_reason(stored)
    return None


def _other_turn(stored: TurnPublished, event: TurnPublished) -> bool:
    """Whether ``event`` is not the recorded ``stored`` one again (a redelivery or a re-publish
    of the same turn matches it; a renumbered turn keeps its id with a new seq, so the seq is not
    compared)."""
    return (stored.user_id, stored.session_id, stored.content_hash) != (
        event.user_id,
        event.session_id,
        event.content_hash,
    )


def _reused_reason(stored: TurnPublished) -> str:
    return (
        f"is already used by another turn of this tenant (seq {stored.seq} of conversation "
        f"{stored.user_id}/{stored.session_id}, with different content); an event id cannot be reused"
    )


def _safe_payload(message: Mapping[str, Any]) -> dict[str, Any]:
    """Keep a rejected message for the report, minus what Postgres cannot store (NUL, surrogates)."""
    out: dict[str, Any] = {}
    for key, value in list(message.items())[:20]:
        text = repr(value) if not isinstance(value, str) else value
        out[_storable(str(key)[:64])] = _storable(text[:2000])
    return out


def _storable(text: str) -> str:
    """``text`` as Postgres can store it: NUL written as ``\\0``, lone surrogates replaced."""
    return text.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")
