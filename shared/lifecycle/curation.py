"""Curating one user's memories on request (the HTTP API): edit, invalidate, restore, forget, and
the privacy delete; plus the checks of the API's own inputs.

Every function works in the caller's unit of work (the caller commits, then brings the index up
to date) and finds memories scoped to (tenant, user): another tenant's or user's id is simply not
found, with the same answer as an id that never existed, so ids never leak across users. Each
takes the user's advisory lock first, so a change never interleaves with conflict resolution
(``shared/ingest/resolve.py: resolve_event``) for the same user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared import fields
from shared.events import FieldError, InvalidInput, id_problem, text_problem
from shared.language.cues import cues_for_memory, entities, lexicon_tags
from shared.language.slot_rules import slot_for
from shared.language.timeexpr import happened
from shared.lifecycle.sweeps import RestoreRefused, restore_memory, save_change
from shared.models import Memory, MemoryStatus, MemoryType, memory_hash
from shared.ports import Embedder
from shared.scoring import DecayPolicy
from shared.storage import HistoryEntry, UnitOfWork

JUDGE = "api"
MAX_TAGS = 50
MAX_TAG_CHARS = 64
MAX_REASON_CHARS = 1000
# Statuses an edit may touch: a pending draft still belongs to the pipeline, a forgotten memory
# to the audit.
EDITABLE = frozenset(
    {MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED, MemoryStatus.SUPERSEDED, MemoryStatus.EXPIRED}
)
INVALIDATABLE = frozenset({MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED})
RESTORABLE = frozenset(
    {MemoryStatus.ARCHIVED, MemoryStatus.SUPERSEDED, MemoryStatus.EXPIRED, MemoryStatus.FORGOTTEN}
)


class MemoryNotFound(LookupError):
    def __init__(self, memory_id: str, user_id: str):
        self.memory_id = memory_id
        super().__init__(f"no memory {memory_id!r} for user {user_id!r}")


class Refused(ValueError):
    """The memory's state does not allow the change (the API answers 409); the message says why."""


# --- input checks (pure) ----------------------------------------------------------------------


def _short_text_problem(value: str, max_chars: int) -> str | None:
    """Why a tag or a reason is refused (blank, longer than ``max_chars``, not storable), or None."""
    if not value.strip():
        return "must not be empty"
    if len(value) > max_chars:
        return f"is longer than {max_chars} characters"
    return text_problem(value)


def check_ids(values: Mapping[str, str | None], max_chars: int) -> None:
    """Raise InvalidInput naming each id that is present and malformed."""
    errors = [
        FieldError(name, problem)
        for name, value in values.items()
        if value is not None and (problem := id_problem(value, max_chars)) is not None
    ]
    if errors:
        raise InvalidInput(errors)


def parse_statuses(raw: str | None) -> frozenset[MemoryStatus]:
    """``status`` of a listing: comma-separated statuses, or ``all``; default ``active``."""
    if raw is None or not raw.strip():
        return frozenset({MemoryStatus.ACTIVE})
    names = [part.strip() for part in raw.split(",") if part.strip()]
    if names == ["all"]:
        return frozenset(MemoryStatus)
    known = {s.value for s in MemoryStatus}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InvalidInput(
            [FieldError("status", f"{unknown[0][:40]!r} is not one of all, {', '.join(sorted(known))}")]
        )
    return frozenset(MemoryStatus(n) for n in names)


def parse_type(raw: str | None) -> MemoryType | None:
    if raw is None or not raw.strip():
        return None
    try:
        return fields.choice(raw, MemoryType)
    except fields.FieldProblem as exc:
        raise InvalidInput([FieldError("type", str(exc))]) from None


@dataclass(frozen=True)
class Edit:
    content: str | None = None
    type: MemoryType | None = None
    tags: tuple[str, ...] | None = None

    @property
    def fields(self) -> list[str]:
        return [name for name in ("content", "type", "tags") if getattr(self, name) is not None]


def check_edit(
    content: str | None, memory_type: str | None, tags: Sequence[str] | None, max_content_chars: int
) -> Edit:
    errors: list[FieldError] = []
    if content is not None:
        try:
            fields.text(content, max_content_chars)  # as an import checks a memory's content
        except fields.FieldProblem as exc:
            errors.append(FieldError("content", str(exc)))
    new_type = None
    if memory_type is not None:
        if not memory_type.strip():
            errors.append(FieldError("type", "must not be empty"))
        else:
            try:
                new_type = parse_type(memory_type)
            except InvalidInput as exc:
                errors.extend(exc.errors)
    clean_tags: tuple[str, ...] | None = None
    if tags is not None:
        if len(tags) > MAX_TAGS:
            errors.append(FieldError("tags", f"holds {len(tags)} tags; the limit is {MAX_TAGS}"))
        for i, tag in enumerate(tags):
            if problem := _short_text_problem(tag, MAX_TAG_CHARS):
                errors.append(FieldError(f"tags[{i}]", problem))
        clean_tags = tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip()))
    if content is None and memory_type is None and tags is None and not errors:
        errors.append(FieldError("body", "name at least one of content, type, tags"))
    if errors:
        raise InvalidInput(errors)
    return Edit(content.strip() if content is not None else None, new_type, clean_tags)


def check_reason(reason: str) -> str:
    if problem := _short_text_problem(reason, MAX_REASON_CHARS):
        raise InvalidInput([FieldError("reason", problem)])
    return reason.strip()


# --- changes ----------------------------------------------------------------------------------


def _load(uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str) -> Memory:
    uow.memories.lock_user(tenant_id, user_id)
    memory = uow.memories.get(tenant_id, user_id, memory_id)
    if memory is None:
        raise MemoryNotFound(memory_id, user_id)
    return memory


def _history(memory: Memory, action: str, reason: str, now: datetime, **details: Any) -> HistoryEntry:
    return HistoryEntry(
        memory.id, memory.tenant_id, memory.user_id, action, reason, JUDGE, now, details=details
    )


def edit_memory(
    uow: UnitOfWork,
    embedder: Embedder,
    tenant_id: str,
    user_id: str,
    memory_id: str,
    edit: Edit,
    now: datetime,
    policy: DecayPolicy,
) -> Memory:
    """Change content, type or tags. New content is re-embedded, and its cues, entities and slot
    recomputed (recall's deterministic stage matches on cues); without given tags, new content
    takes the lexicon's tags, since the old ones described the old text. Version + 1 (the index
    follows), a history entry ``edited`` keeping what it said before."""
    memory = _load(uow, tenant_id, user_id, memory_id)
    if memory.status not in EDITABLE:
        raise Refused(f"memory {memory_id!r} is {memory.status.value}; it cannot be edited")
    before = {"content": memory.content, "type": memory.type.value, "tags": list(memory.tags)}
    if edit.type is not None:
        memory.type = edit.type
    if edit.content is not None and edit.content != memory.content:
        memory.content = edit.content
        memory.embedding = embedder.embed_passages([edit.content])[0]
        memory.embedding_model = embedder.model_name
        memory.entities = list(entities(edit.content))
        # Event time follows the words: the new text names its own days (or none), told when
        # the memory was.
        span = happened(edit.content, memory.valid_from or memory.created_at)
        memory.happened_from, memory.happened_to = span if span is not None else (None, None)
        if edit.tags is None:
            memory.tags = list(lexicon_tags(edit.content))
    if edit.tags is not None:
        memory.tags = list(edit.tags)
    memory.cues = list(cues_for_memory(memory.content, memory.tags, memory.entities))
    memory.slot = slot_for(memory.content, memory.type, memory.tags, memory.entities)
    memory.content_hash = memory_hash(memory.type.value, memory.content)
    entry = _history(memory, "edited", f"edited on request: {', '.join(edit.fields)}", now, before=before)
    return save_change(uow, memory, now, entry, rescore=policy)


def invalidate_memory(
    uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, reason: str, now: datetime
) -> Memory:
    """No longer true: ``superseded`` with no successor (never recalled by default, still in the
    history), valid until now, the reason kept in ``status_reason``."""
    memory = _load(uow, tenant_id, user_id, memory_id)
    if memory.status not in INVALIDATABLE:
        raise Refused(
            f"memory {memory_id!r} is {memory.status.value}; only active or archived memories can be "
            "invalidated"
        )
    memory.status = MemoryStatus.SUPERSEDED
    memory.superseded_by = None
    memory.valid_to = now
    memory.status_reason = f"invalidated: {reason}"
    return save_change(uow, memory, now, _history(memory, "invalidated", reason, now))


def restore(
    uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, now: datetime, policy: DecayPolicy
) -> Memory:
    """Active again. Archived memories take the lifecycle's restore (a restore is a use);
    superseded, expired and forgotten ones lose their end of validity and successor."""
    memory = _load(uow, tenant_id, user_id, memory_id)
    if memory.status is MemoryStatus.ARCHIVED:
        try:
            return restore_memory(uow, tenant_id, user_id, memory_id, now, policy)
        except RestoreRefused as exc:  # raced with another change under the same lock: cannot be
            raise Refused(str(exc)) from None
    if memory.status not in RESTORABLE:
        raise Refused(
            f"memory {memory_id!r} is {memory.status.value}; only "
            f"{', '.join(sorted(s.value for s in RESTORABLE))} memories can be restored"
        )
    previous = memory.status.value
    memory.status = MemoryStatus.ACTIVE
    memory.status_reason = f"restored on request (was {previous})"
    memory.valid_to = None
    memory.superseded_by = None
    return save_change(
        uow, memory, now, _history(memory, "restored", f"restored on request (was {previous})", now)
    )


def forget(uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, now: datetime) -> Memory:
    """Soft delete: ``forgotten``, never recalled or listed by default; the row and its history
    stay for the audit. Forgetting a forgotten memory changes nothing."""
    memory = _load(uow, tenant_id, user_id, memory_id)
    if memory.status is MemoryStatus.FORGOTTEN:
        return memory
    if memory.status is MemoryStatus.PENDING:
        raise Refused(f"memory {memory_id!r} is still being processed; try again in a moment")
    previous = memory.status.value
    memory.status = MemoryStatus.FORGOTTEN
    memory.status_reason = "forgotten on request"
    return save_change(
        uow, memory, now, _history(memory, "forgotten", f"forgotten on request (was {previous})", now)
    )


@dataclass(frozen=True)
class Purged:
    """What a privacy delete removed: memory ids (their index points are the caller's to delete,
    after commit) and the source turns blanked in the event log (their conversation-log points
    and working-memory entries likewise)."""

    memories: list[str]
    turns: list[tuple[str, str]]  # (event id, session id)
    # Turns whose context window quoted a blanked turn: their vectors are dropped (their points
    # must go too; ``cuemem reindex`` embeds them again without it).
    windows: list[str] = field(default_factory=list)


def purge(uow: UnitOfWork, tenant_id: str, user_id: str, memory_id: str, now: datetime) -> Purged:
    """Privacy delete: the memory and every memory made from it (merges, consolidations, and what
    was made from those) are removed with their history rows, and the turns they came from are
    blanked in the event log (content, metadata, vector), or the conversation log would still
    return the words; one audit row per removed id says when and why, without any content."""
    root = _load(uow, tenant_id, user_id, memory_id)
    ids = {root.id}
    frontier = [root.id]
    while frontier:
        found = uow.curation.derived_from(tenant_id, user_id, frontier) - ids
        ids |= found
        frontier = sorted(found)
    sources = sorted(
        {s["event_id"] for m in uow.memories.get_many(tenant_id, user_id, sorted(ids)) for s in m.sources}
    )
    deleted = uow.curation.purge(tenant_id, user_id, sorted(ids))
    turns = uow.events.redact(tenant_id, user_id, sources)
    windows = uow.turn_index.unembed_windows(tenant_id, user_id, [event_id for event_id, _ in turns])
    for gone in deleted:
        uow.history.add(
            HistoryEntry(
                gone,
                tenant_id,
                user_id,
                "purged",
                "deleted on request (privacy): content, vectors, history and source turns removed",
                JUDGE,
                now,
                related_id=None if gone == root.id else root.id,
                details={"derived_from": root.id, "turns_redacted": len(turns)}
                if gone != root.id
                else {"turns_redacted": len(turns)},
            )
        )
    return Purged(deleted, turns, windows)
