"""The checks of an export's rows (``shared/transfer.py``), column by column, before an import
writes any of them: the same checks as publish and the API, so that an import can store nothing a
turn or an edit could not have made (a time in year 9999, seq 2^62, a role ``robot``, a memory
type ``bogus``, a NaN score, a vector of another dimension were all stored, and that user's reads
then failed).

An event row's turn fields (ids, seq, role, content, at, metadata) go through
``shared.events.validate_turn``, the validator of publish; every other column through the checks
of ``shared/fields.py``, which the API uses too. A problem names the table and the column
(``memories.importance: must be a finite number between 0 and 10, got nan``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import fields as f
from shared.events import MAX_OFFSET_S, MAX_SEQ, EventLimits, FieldError, InvalidEvent, validate_turn
from shared.language.timeexpr import MAX_SPAN
from shared.models import REDACTED_HASH, REDACTED_METADATA, EventStage, MemoryStatus, MemoryType

# The largest line an import reads (characters): a memory's sources grow with its repeats, so this
# is far above what one turn can hold; it bounds what one line costs to parse.
MAX_LINE_CHARS = 8 << 20
MAX_PROSE_CHARS = 100_000  # reasons and other text the pipeline writes
MAX_WORD_CHARS = 1_000
MAX_SCORE = 1e6
MAX_IMPORTANCE = 10.0  # shared/scoring.py: importance is 0-10
# A memory's status as an import may bring it: a ``pending`` draft belongs to a pipeline run that
# the importing deployment never had (an export leaves drafts out).
IMPORTED_STATUSES = tuple(s for s in MemoryStatus if s is not MemoryStatus.PENDING)
RECEIPT_OUTCOMES = ("accepted", "duplicate", "rejected")  # storage.events.Outcome (which imports this module)


@dataclass(frozen=True)
class Column:
    check: Callable[[Any], Any]
    null: bool = False  # may be null
    absent: bool = False  # may be left out (the table's default applies)


Spec = dict[str, Column]


def _ids(max_chars: int) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        for i, item in enumerate(f.words(value, max_chars)):
            try:
                f.identifier(item, max_chars)
            except f.FieldProblem as exc:
                raise f.FieldProblem(f"[{i}] {exc}") from None
        return list(value)

    return check


def _sources(max_id_chars: int) -> Callable[[Any], list[dict[str, Any]]]:
    """The turns a memory cites: ``shared.models.Source`` as a dict."""

    def check(value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise f.FieldProblem(f"must be a list of sources, got {type(value).__name__}")
        for i, source in enumerate(value):
            if not isinstance(source, dict):
                raise f.FieldProblem(f"[{i}] must be an object")
            try:
                f.identifier(source.get("event_id"), max_id_chars)
                f.identifier(source.get("session_id"), max_id_chars)
                f.integer(source.get("seq"), 1, MAX_SEQ)
                f.instant(source.get("at"))
            except f.FieldProblem as exc:
                raise f.FieldProblem(f"[{i}] {exc}") from None
        return f.document(value, MAX_LINE_CHARS, max_depth=2)  # type: ignore[no-any-return]

    return check


def specs(limits: EventLimits, dim: int) -> dict[str, Spec]:
    """Every column of every exported table, with its check (``dim``: the file's vectors')."""
    content = limits.max_content_chars
    ident = Column(lambda v: f.identifier(v, limits.max_id_chars))
    maybe_ident = Column(ident.check, null=True)
    time, maybe_time = Column(f.instant), Column(f.instant, null=True)
    default_time = Column(f.instant, absent=True)
    model = Column(lambda v: f.text(v, 200), null=True)
    vector = Column(lambda v: f.vector(v, dim), null=True)
    words = Column(lambda v: f.words(v, MAX_WORD_CHARS), absent=True)
    prose = Column(lambda v: f.text(v, MAX_PROSE_CHARS, empty=True))
    maybe_prose = Column(prose.check, null=True)
    doc = Column(lambda v: f.document(v, MAX_LINE_CHARS), absent=True)
    turn = Column(lambda v: v)  # checked by validate_turn (_check_turn)
    return {
        "events": {
            **dict.fromkeys(("event_id", "tenant_id", "user_id", "session_id", "seq", "role"), turn),
            **dict.fromkeys(("content", "at", "metadata"), turn),
            "happened_from": maybe_time,
            "happened_to": maybe_time,
            "content_hash": Column(lambda v: f.sha256_hex(v, REDACTED_HASH)),
            "stage": Column(lambda v: f.choice(v, EventStage)),
            "importance": Column(lambda v: f.number(v, 0, MAX_IMPORTANCE), null=True),
            "extraction_reasons": words,
            "received_at": default_time,
            "done_at": maybe_time,
            "stage_at": default_time,
            "embedding": vector,
            "embedding_model": model,
            # The turn by itself (migration 0020); absent in an older export.
            "alone_vector": vector,
            "turn_indexed": Column(f.flag, absent=True),
            "window_ids": Column(_ids(limits.max_id_chars), absent=True),
            "trace_context": Column(lambda v: f.text(v, 55), null=True),
            # The UTC offset ``at`` was sent with (migration 0018); absent in an older export.
            "at_offset_s": Column(lambda v: f.integer(v, -MAX_OFFSET_S, MAX_OFFSET_S), null=True),
        },
        "event_receipts": {
            "tenant_id": ident,
            "user_id": ident,
            "event_id": ident,
            "outcome": Column(_outcome),
            "canonical_event_id": maybe_ident,
            "reason": maybe_prose,
            "payload": Column(doc.check, null=True),
            "received_at": default_time,
        },
        "memories": {
            "tenant_id": ident,
            "user_id": ident,
            "happened_from": maybe_time,
            "happened_to": maybe_time,
            "id": Column(f.uuid_text),
            "type": Column(lambda v: f.choice(v, MemoryType)),
            "content": Column(lambda v: f.text(v, content)),
            "content_hash": Column(f.sha256_hex),
            "importance": Column(lambda v: f.number(v, 0, MAX_IMPORTANCE)),
            "status": Column(lambda v: f.choice(v, MemoryStatus, IMPORTED_STATUSES)),
            "created_at": time,
            "updated_at": time,
            "last_accessed_at": time,
            "access_count": Column(lambda v: f.integer(v, 0), absent=True),
            "score": Column(lambda v: f.number(v, -MAX_SCORE, MAX_SCORE), absent=True),
            "tags": words,
            "entities": words,
            "cues": words,
            "sources": Column(_sources(limits.max_id_chars), absent=True),
            "origin_event_id": ident,
            "embedding": vector,
            "embedding_model": model,
            "version": Column(lambda v: f.integer(v, 1), absent=True),
            "indexed_version": Column(lambda v: f.integer(v, 0), absent=True),
            "valid_from": time,
            "valid_to": maybe_time,
            "superseded_by": Column(f.uuid_text, null=True),
            "slot": model,
            "status_reason": maybe_prose,
            "due_at": maybe_time,
            "indexed_score": Column(lambda v: f.number(v, -MAX_SCORE, MAX_SCORE), null=True),
        },
        "memory_history": {
            "tenant_id": ident,
            "user_id": ident,
            "memory_id": Column(f.uuid_text),
            "action": Column(lambda v: f.text(v, 32)),
            "related_id": Column(f.uuid_text, null=True),
            "reason": prose,
            "judge": Column(lambda v: f.text(v, 16)),
            "event_id": maybe_ident,
            "at": time,
            "details": doc,
            "recorded_at": default_time,
        },
    }


def _outcome(value: Any) -> str:
    if value not in RECEIPT_OUTCOMES:
        raise f.FieldProblem(f"{value!r:.40} is not one of {', '.join(RECEIPT_OUTCOMES)}")
    return str(value)


def _check_turn(row: Mapping[str, Any], limits: EventLimits) -> dict[str, Any]:
    """An event row's turn fields, through publish's validator; the time as it parsed it."""
    turn = {k: row[k] for k in ("event_id", "tenant_id", "user_id", "session_id", "seq", "role", "at")}
    turn["metadata"] = row.get("metadata")
    turn["content"] = row["content"]
    if row["content"] == "" and row.get("metadata") == REDACTED_METADATA:
        turn["content"] = "-"  # its words were erased by a privacy delete; the rest is checked
    event = validate_turn(turn, limits)
    return {"at": event.at}


def check_row(table: str, row: Mapping[str, Any], columns: Spec, limits: EventLimits) -> dict[str, Any]:
    """The row as it is stored (times parsed); raises InvalidEvent naming ``table.column``."""

    def refuse(column: str, problem: str) -> InvalidEvent:
        return InvalidEvent([FieldError(f"{table}.{column}", problem)])

    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise refuse(str(unknown[0])[:40], "is not a column of this table")
    out = dict(row)
    for name, column in columns.items():
        if name not in row:
            if not column.absent and not column.null:
                raise refuse(name, "is required")
            continue
        value = row[name]
        if value is None:
            if not column.null:
                raise refuse(name, "must not be null")
            continue
        try:
            out[name] = column.check(value)
        except f.FieldProblem as exc:
            raise refuse(name, str(exc)) from None
    if table == "events":
        try:
            out.update(_check_turn(row, limits))
        except InvalidEvent as exc:
            raise refuse(exc.errors[0].field, exc.errors[0].problem) from None
    start, end = out.get("happened_from"), out.get("happened_to")
    if (start is None) != (end is None) or (start is not None and not start < end <= start + MAX_SPAN):
        raise refuse(
            "happened_to", f"must follow happened_from by at most {MAX_SPAN.days} days (both or neither)"
        )
    return out
