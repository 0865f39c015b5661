"""Curation on request (what the HTTP API calls), on the in-memory fakes: each change stores the
memory with ``updated_at`` now, its version one up and a history entry, and the input checks name
each problem in the words the API answers with."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.lifecycle import curation
from shared.models import Memory, MemoryStatus, MemoryType
from shared.scoring import DecayPolicy, score
from tests.support.pipeline import NOW, Harness, turn

LATER = NOW + timedelta(days=40)
POLICY = DecayPolicy()


def _stored() -> tuple[Harness, Memory]:
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    [memory] = [m for m in h.state.memories.values() if m.content == "我不吃香菜"]
    return h, memory


def _history(h: Harness, memory_id: str) -> list[tuple[str, str, str]]:
    return [(e.action, e.reason, e.judge) for e in h.state.history if e.memory_id == memory_id]


def test_an_edit_is_rescored_versioned_and_recorded_with_what_it_said_before() -> None:
    h, memory = _stored()
    version = memory.version
    with h.store.uow() as uow:
        edited = curation.edit_memory(
            uow,
            h.embedder,
            "default",
            "u1",
            memory.id,
            curation.Edit(type=MemoryType.FACT, tags=("food",)),
            LATER,
            POLICY,
        )
        uow.commit()
    stored = h.state.memories[memory.id]
    assert (stored.type, stored.tags, stored.updated_at) == (MemoryType.FACT, ["food"], LATER)
    assert stored.version == edited.version == version + 1
    assert stored.score == score(
        stored.importance, MemoryType.FACT, stored.last_accessed_at, stored.access_count, LATER, POLICY
    )
    assert _history(h, memory.id)[-1] == ("edited", "edited on request: type, tags", "api")
    [entry] = [e for e in h.state.history if e.action == "edited"]
    assert entry.details["before"]["type"] == memory.type.value


def test_invalidate_restore_and_forget_each_move_the_version_and_leave_a_history_entry() -> None:
    h, memory = _stored()
    version = memory.version
    steps = [
        (
            lambda uow: curation.invalidate_memory(uow, "default", "u1", memory.id, "not true", NOW),
            "superseded",
        ),
        (lambda uow: curation.restore(uow, "default", "u1", memory.id, NOW, POLICY), "active"),
        (lambda uow: curation.forget(uow, "default", "u1", memory.id, LATER), "forgotten"),
    ]
    for i, (step, status) in enumerate(steps, start=1):
        with h.store.uow() as uow:
            step(uow)
            uow.commit()
        stored = h.state.memories[memory.id]
        assert (stored.status.value, stored.version) == (status, version + i)
    assert stored.updated_at == LATER
    assert _history(h, memory.id)[-3:] == [
        ("invalidated", "not true", "api"),
        ("restored", "restored on request (was superseded)", "api"),
        ("forgotten", "forgotten on request (was active)", "api"),
    ]
    assert h.state.memories[memory.id].status is MemoryStatus.FORGOTTEN


def test_restoring_an_archived_memory_is_the_lifecycle_restore() -> None:
    h, memory = _stored()
    h.state.memories[memory.id].status = MemoryStatus.ARCHIVED
    with h.store.uow() as uow:
        restored = curation.restore(uow, "default", "u1", memory.id, LATER, POLICY)
        uow.commit()
    assert (restored.status, restored.last_accessed_at, restored.updated_at) == (
        MemoryStatus.ACTIVE,
        LATER,
        LATER,
    )
    assert restored.score == score(
        restored.importance, restored.type, LATER, restored.access_count, LATER, POLICY
    )
    assert _history(h, memory.id)[-1] == ("restored", "restored on request", "operator")


def _problems(exc: pytest.ExceptionInfo[curation.InvalidInput]) -> dict[str, str]:
    return {e.field: e.problem for e in exc.value.errors}


def test_tags_and_reasons_are_refused_blank_too_long_or_unstorable() -> None:
    with pytest.raises(curation.InvalidInput) as exc:
        curation.check_edit(None, None, ["ok", " ", "x" * 65, "a\x00b", "bad \ud800"], 1000)
    assert _problems(exc) == {
        "tags[1]": "must not be empty",
        "tags[2]": "is longer than 64 characters",
        "tags[3]": "contains a NUL character",
        "tags[4]": "is not valid UTF-8 (it holds a lone surrogate)",
    }
    for reason, problem in [
        ("  ", "must not be empty"),
        ("r" * 1001, "is longer than 1000 characters"),
        ("a\x00", "contains a NUL character"),
    ]:
        with pytest.raises(curation.InvalidInput) as exc:
            curation.check_reason(reason)
        assert _problems(exc) == {"reason": problem}
    assert curation.check_reason(" why ") == "why"


def test_ids_are_refused_in_the_words_of_the_event_checks() -> None:
    with pytest.raises(curation.InvalidInput) as exc:
        curation.check_ids({"user_id": "", "session_id": "a b", "memory_id": "x" * 9, "other": None}, 8)
    assert _problems(exc) == {
        "user_id": "must not be empty",
        "session_id": "'a b' has characters outside letters, digits and . _ @ : - (starting with a "
        "letter or digit)",
        "memory_id": "is 9 characters long; the limit is 8",
    }
