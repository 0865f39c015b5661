"""The event an app publishes for every chat turn, and its validation.

Validation errors always name the field and the problem (``user_id: must not be empty``), so a
producer, the JSONL importer and the workers report the same reason for the same bad input.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from shared.public import public_fields

# Ids travel through Redis keys, Qdrant payload filters and URLs: keep them to a safe alphabet
# so that no id can smuggle a wildcard, a separator or a filter expression.
# Matched whole (``is_safe_id``): with ``re.match`` and ``$`` an id ending in a newline passed.
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:-]*")
SAFE_ID_TEXT = "letters, digits and . _ @ : - (starting with a letter or digit)"
MAX_METADATA_DEPTH = 8
# The producer's seq counter runs in Redis Lua, whose numbers are doubles: above 2^53 - 1 two seqs
# can read as one (…993 came back as …992), so no seq may be larger.
MAX_SEQ = 2**53 - 1


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


# The most ``Settings.max_id_chars`` may allow: what a client that cannot see the server's settings
# (the agent tools) lets through, leaving the exact limit to the server.
MAX_ID_CHARS_CEILING = 512


@dataclass(frozen=True)
class EventLimits:
    max_content_chars: int = 32_000
    max_id_chars: int = 128
    max_metadata_bytes: int = 16_384


@dataclass(frozen=True)
class FieldError:
    field: str
    problem: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem}"


class InvalidEvent(ValueError):
    """Raised with every problem found in one event, each naming its field."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


class InvalidInput(ValueError):
    """Raised with every problem found in one request (a recall, an edit of a memory...), each
    naming its field; the API answers 422, the CLI names the option, an agent tool the argument."""

    def __init__(self, errors: list[FieldError]):
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


@dataclass(frozen=True)
class TurnPublished:
    """A chat turn, as published by a producer. ``seq`` orders it inside its conversation."""

    event_id: str
    tenant_id: str
    user_id: str
    session_id: str
    seq: int
    role: Role
    content: str
    at: datetime
    metadata: dict[str, Any]

    @property
    def conversation(self) -> tuple[str, str, str]:
        return (self.tenant_id, self.user_id, self.session_id)

    @property
    def content_hash(self) -> str:
        return content_hash(self.role, self.content)

    @property
    def ref(self) -> str:
        """The pipeline's key of this turn (``event_ref``)."""
        return event_ref(self.tenant_id, self.event_id)

    def to_message(self) -> dict[str, Any]:
        """The JSON-safe dict that travels on the broker."""
        return public_fields(self, "event_id tenant_id user_id session_id seq role content at metadata")


# The record message (what ``memory.record`` receives and the publish ledger keeps) is the turn's
# fields plus ``"seq_assigned": true`` when the producer's counter chose the seq (the app gave
# none). Apps cannot send it (validate_turn refuses unknown fields). It tells the recorder that a
# clash on that seq means the counter fell back (Redis lost its last writes in a crash), not that
# the app reused a seq: such a turn is renumbered instead of rejected (docs/RELIABILITY.md).
SEQ_ASSIGNED = "seq_assigned"


def record_message(event: TurnPublished, *, seq_assigned: bool) -> dict[str, Any]:
    message = event.to_message()
    if seq_assigned:
        message[SEQ_ASSIGNED] = True
    return message


def split_record_message(message: Any) -> tuple[Any, bool]:
    """The turn's fields of a record message, and whether the producer's counter chose its seq.
    Anything but a mapping holding exactly ``True`` there counts as an app's seq (kept strict)."""
    if isinstance(message, Mapping) and SEQ_ASSIGNED in message:
        turn = {k: v for k, v in message.items() if k != SEQ_ASSIGNED}
        return turn, message[SEQ_ASSIGNED] is True
    return message, False


def content_hash(role: str, content: str) -> str:
    return hashlib.sha256(f"{role}\n{content}".encode()).hexdigest()


def event_ref(tenant_id: str, event_id: str) -> str:
    """The pipeline's key of a recorded turn: an event id is the producer's and unique within its
    tenant only (two tenants may both publish ``order-1001``; migration 0017), so every stage
    message, sweep and lookup names the tenant too. ``/`` is outside ``SAFE_ID``: the key splits
    back unambiguously (``split_ref``)."""
    return f"{tenant_id}/{event_id}"


def split_ref(ref: str) -> tuple[str | None, str]:
    """(tenant, event id) of a key made by ``event_ref``. A bare event id (a stage message sent by
    a version before 0017, still queued at the upgrade) has no tenant: it is looked up by event id
    alone, and found only while no other tenant holds the same id."""
    tenant, sep, event_id = ref.partition("/")
    return (tenant, event_id) if sep else (None, ref)


def new_event_id() -> str:
    return uuid.uuid4().hex


def text_problem(value: str) -> str | None:
    """Why a text cannot be stored (Postgres refuses NUL; a lone surrogate is no UTF-8), or None."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (it holds a lone surrogate)"
    return None


def is_safe_id(value: object) -> bool:
    """True for a non-empty string wholly in the safe alphabet (a trailing newline included)."""
    return isinstance(value, str) and SAFE_ID.fullmatch(value) is not None


def id_problem(value: str, max_chars: int) -> str | None:
    """Why a string cannot be an id (empty, too long, outside the safe alphabet), or None."""
    if not value:
        return "must not be empty"
    if len(value) > max_chars:
        return f"is {len(value)} characters long; the limit is {max_chars}"
    if not is_safe_id(value):
        return f"{value[:40]!r} has characters outside {SAFE_ID_TEXT}"
    return None


def _check_id(name: str, value: Any, limits: EventLimits, errors: list[FieldError]) -> str:
    # A turn's id may arrive as any JSON value, and blank counts as missing here.
    if value is None or (isinstance(value, str) and not value.strip()):
        problem: str | None = "must not be empty"
    elif not isinstance(value, str):
        problem = f"must be a string, got {type(value).__name__}"
    else:
        problem = id_problem(value, limits.max_id_chars)
    if problem is not None:
        errors.append(FieldError(name, problem))
        return ""
    return value


# Times outside these bounds are refused: a turn "told" in year 9999 was stored as year 10000
# (its offset), dead-lettered, and broke the index repair of every tenant; a recall "now" near
# year 1 or 9999 overflowed in the time arithmetic.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
# A UTC offset, in seconds, is strictly within a day (``datetime.timezone``): what
# ``events.at_offset_s`` can hold.
MAX_OFFSET_S = 24 * 3600 - 1
# A turn may carry a time a little ahead of the receiving clock (clock skew), not more.
FUTURE_SLACK = timedelta(days=1)


def bounded_at(value: Any, latest: datetime = LATEST) -> datetime:
    """:func:`parse_at`, refusing a time before 1970 or after ``latest``."""
    at = parse_at(value)
    if not EARLIEST <= at <= latest:
        raise ValueError(
            f"{str(value)[:60]!r} is out of range: it must be between {EARLIEST.date()} and "
            f"{latest.isoformat(timespec='seconds')}"
        )
    return at


def parse_at(value: Any) -> datetime:
    """Parse an event time; raises ValueError with a reason when it is not a zoned timestamp."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value[:60]!r} is not an ISO 8601 timestamp") from None
    else:
        raise ValueError("must be an ISO 8601 timestamp string")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"{str(value)[:60]!r} has no timezone; add an offset such as +00:00 or Z")
    return parsed


def nesting_depth(value: Any, limit: int = MAX_METADATA_DEPTH) -> int:
    """Nesting depth of dicts and lists, counted up to ``limit + 1`` and no further.

    Iterative and cut off past the limit: a recursive walk raised RecursionError (not a reason
    naming the field) on metadata nested a few thousand levels deep (issue 8, bad input)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list | tuple):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth) for child in children)
    return deepest


def validate_turn(
    raw: Mapping[str, Any],
    limits: EventLimits | None = None,
    *,
    now: datetime | None = None,
    require_seq: bool = True,
) -> TurnPublished:
    """Build a :class:`TurnPublished` from a mapping or raise :class:`InvalidEvent`.

    ``require_seq=False`` lets a producer validate a turn before it assigns the seq (seq 0 is
    then a placeholder that :meth:`dataclasses.replace` fills in).

    ``at`` must lie between 1970 and 2200; given ``now`` (the receiving clock, as the Publisher
    passes it), also no later than a day after it. The recorder re-validates without ``now``: it
    records what a producer accepted, whenever the message arrives.
    """
    limits = limits or EventLimits()
    errors: list[FieldError] = []
    if not isinstance(raw, Mapping):
        raise InvalidEvent([FieldError("event", f"must be a JSON object, got {type(raw).__name__}")])

    known = {"event_id", "tenant_id", "user_id", "session_id", "seq", "role", "content", "at", "metadata"}
    for key in raw:
        if key not in known:
            errors.append(
                FieldError(
                    repr(key)[:40] if not str(key).strip() else str(key)[:40],
                    f"is not a known field (known: {', '.join(sorted(known))})",
                )
            )

    event_id_raw = raw.get("event_id")
    event_id = new_event_id() if event_id_raw is None else _check_id("event_id", event_id_raw, limits, errors)
    tenant_raw = raw.get("tenant_id")
    tenant_id = "default" if tenant_raw is None else _check_id("tenant_id", tenant_raw, limits, errors)
    user_id = _check_id("user_id", raw.get("user_id"), limits, errors)
    session_id = _check_id("session_id", raw.get("session_id"), limits, errors)

    seq_raw = raw.get("seq")
    seq = 0
    if seq_raw is None:
        if require_seq:
            errors.append(FieldError("seq", "is required here"))
    elif isinstance(seq_raw, bool) or not isinstance(seq_raw, int):
        errors.append(FieldError("seq", f"must be a positive integer, got {seq_raw!r:.40}"))
    elif seq_raw < 1 or seq_raw > MAX_SEQ:
        errors.append(FieldError("seq", f"must be between 1 and 2^53 - 1, got {seq_raw}"))
    else:
        seq = seq_raw

    role_raw = raw.get("role")
    role = Role.USER
    if isinstance(role_raw, str) and role_raw in {r.value for r in Role}:
        role = Role(role_raw)
    else:
        errors.append(
            FieldError("role", f"{role_raw!r:.40} is not one of {', '.join(r.value for r in Role)}")
        )

    content_raw = raw.get("content")
    content = ""
    if not isinstance(content_raw, str):
        errors.append(FieldError("content", "must be a string" if content_raw is not None else "is required"))
    elif not content_raw.strip():
        errors.append(FieldError("content", "must not be empty"))
    elif len(content_raw) > limits.max_content_chars:
        errors.append(
            FieldError(
                "content", f"is {len(content_raw)} characters long; the limit is {limits.max_content_chars}"
            )
        )
    elif (problem := text_problem(content_raw)) is not None:
        errors.append(FieldError("content", problem))
    else:
        content = content_raw

    at_raw = raw.get("at")
    at = now or datetime.now(UTC)
    if at_raw is not None:
        try:
            at = bounded_at(at_raw, latest=LATEST if now is None else now + FUTURE_SLACK)
        except ValueError as exc:
            errors.append(FieldError("at", str(exc)))

    metadata_raw = raw.get("metadata")
    metadata: dict[str, Any] = {}
    if metadata_raw is not None:
        if not isinstance(metadata_raw, dict):
            errors.append(FieldError("metadata", f"must be a JSON object, got {type(metadata_raw).__name__}"))
        elif nesting_depth(metadata_raw) > MAX_METADATA_DEPTH:
            errors.append(FieldError("metadata", f"is nested deeper than {MAX_METADATA_DEPTH} levels"))
        else:
            try:
                encoded = json.dumps(metadata_raw, ensure_ascii=False, allow_nan=False)
            except (TypeError, ValueError) as exc:
                errors.append(FieldError("metadata", f"is not JSON-serialisable ({exc})"))
            else:
                if "\\u0000" in encoded:
                    errors.append(FieldError("metadata", "contains a NUL character"))
                elif len(encoded.encode("utf-8", "surrogatepass")) > limits.max_metadata_bytes:
                    errors.append(
                        FieldError("metadata", f"is larger than {limits.max_metadata_bytes} bytes as JSON")
                    )
                elif (problem := text_problem(encoded)) is not None:
                    errors.append(FieldError("metadata", problem))
                else:
                    metadata = metadata_raw

    if errors:
        raise InvalidEvent(errors)
    return TurnPublished(
        event_id=event_id,
        tenant_id=tenant_id,
        user_id=user_id,
        session_id=session_id,
        seq=seq,
        role=role,
        content=content,
        at=at,
        metadata=metadata,
    )
