"""The JSON-ready dicts of the domain values, pinned key by key and byte by byte.

``cuemem ... --json`` prints them and the HTTP API answers with them: their keys, the keys' order
and the rendering of each value (ISO 8601 times, enum values, rounded scores) are contracts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from typing import Any

import pytest

from service.operations.dead_letters import DeadLetterView
from shared.api_keys import ApiKey
from shared.events import Role, TurnPublished
from shared.models import Memory, MemoryStatus, MemoryType
from shared.public import json_ready, public_fields
from shared.recall.request import RecallItem, RecallResult

AT = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
LATER = datetime(2026, 3, 5, 8, 0, tzinfo=timezone(timedelta(hours=8)))


def _dumped(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def test_api_key_shows_its_fields_in_order_without_the_secret() -> None:
    active = ApiKey("k1", "acme", "ci key", "0a1b2c3d", AT)
    revoked = ApiKey("k2", "acme", "old", "deadbeef", AT, revoked_at=LATER)

    assert _dumped(active.to_public()) == (
        '{"id": "k1", "tenant_id": "acme", "name": "ci key", "prefix": "0a1b2c3d", '
        '"created_at": "2026-03-04T05:06:07.890123+00:00", "revoked_at": null}'
    )
    assert revoked.to_public()["revoked_at"] == "2026-03-05T08:00:00+08:00"


def test_turn_message_carries_every_field_with_the_role_and_time_as_text() -> None:
    turn = TurnPublished("e1", "acme", "u1", "s1", 3, Role.ASSISTANT, "你好", AT, {"k": [1, "v"]})

    message = turn.to_message()

    assert _dumped(message) == (
        '{"event_id": "e1", "tenant_id": "acme", "user_id": "u1", "session_id": "s1", "seq": 3, '
        '"role": "assistant", "content": "你好", "at": "2026-03-04T05:06:07.890123+00:00", '
        '"metadata": {"k": [1, "v"]}}'
    )
    assert message["metadata"] is turn.metadata  # the broker serialises it; no copy is made


def _memory(**overrides: Any) -> Memory:
    fields: dict[str, Any] = {
        "id": "m1",
        "tenant_id": "acme",
        "user_id": "u1",
        "type": MemoryType.PREFERENCE,
        "content": "likes oat milk",
        "importance": 0.87654,
        "status": MemoryStatus.ACTIVE,
        "created_at": AT,
        "updated_at": LATER,
        "last_accessed_at": AT,
        "access_count": 2,
        "score": 1.234567,
        "tags": ["drink"],
        "entities": ["oat milk"],
        "cues": ["milk"],
        "sources": [{"event_id": "e1", "at": AT.isoformat()}],
        "embedding": [0.1, 0.2],
        "embedding_model": "hash-64",
    }
    fields.update(overrides)
    return Memory(**fields)


def test_memory_public_view_rounds_scores_and_copies_its_lists() -> None:
    memory = _memory(
        valid_to=LATER, superseded_by="m2", slot="drink.milk", status_reason="why", due_at=LATER,
        happened_from=LATER, happened_to=LATER + timedelta(days=1),
    )  # fmt: skip

    public = memory.to_public()

    assert _dumped(public) == (
        '{"id": "m1", "tenant_id": "acme", "user_id": "u1", "content": "likes oat milk", '
        '"type": "preference", "status": "active", "importance": 0.877, "access_count": 2, '
        '"score": 1.2346, "tags": ["drink"], "entities": ["oat milk"], '
        '"sources": [{"event_id": "e1", "at": "2026-03-04T05:06:07.890123+00:00"}], '
        '"created_at": "2026-03-04T05:06:07.890123+00:00", "updated_at": "2026-03-05T08:00:00+08:00", '
        '"last_accessed_at": "2026-03-04T05:06:07.890123+00:00", '
        '"valid_from": "2026-03-04T05:06:07.890123+00:00", "valid_to": "2026-03-05T08:00:00+08:00", '
        '"superseded_by": "m2", "slot": "drink.milk", "status_reason": "why", '
        '"due_at": "2026-03-05T08:00:00+08:00", "happened_from": "2026-03-05T08:00:00+08:00", '
        '"happened_to": "2026-03-06T08:00:00+08:00", "embedding_model": "hash-64"}'
    )
    # Copies: a caller editing the view does not edit the memory.
    assert public["tags"] is not memory.tags
    assert public["entities"] is not memory.entities
    assert public["sources"] is not memory.sources


def test_memory_public_view_shows_unset_times_as_null() -> None:
    public = _memory(embedding_model=None).to_public()

    unset = ("valid_to", "superseded_by", "slot", "status_reason", "due_at", "happened_from", "happened_to")
    assert [public[k] for k in unset] == [None] * len(unset)
    assert public["valid_from"] == public["created_at"]  # valid_from defaults to created_at
    assert public["embedding_model"] is None


def test_recall_item_and_result_keep_their_order_and_round_the_score() -> None:
    item = RecallItem(
        id="m1",
        content="likes oat milk",
        type="preference",
        score=0.123456789,
        status="active",
        sources=[{"event_id": "e1"}],
        explanation={"paths": ["dense"]},
        created_at="2026-03-04T05:06:07+00:00",
        importance=0.9,
        slot="drink.milk",
    )
    result = RecallResult("hybrid", [item], {"ms": 3})

    assert _dumped(result.to_public()) == (
        '{"stage": "hybrid", "items": [{"id": "m1", "content": "likes oat milk", "type": "preference", '
        '"status": "active", "score": 0.123457, "importance": 0.9, '
        '"created_at": "2026-03-04T05:06:07+00:00", "sources": [{"event_id": "e1"}], '
        '"explanation": {"paths": ["dense"]}}], "trace": {"ms": 3}}'
    )


def test_dead_letter_view_shows_its_fields_in_order() -> None:
    waiting = DeadLetterView(7, "memory.embed", "t-1", "e1", "boom", 5, AT, None, ["e1"])
    replayed = DeadLetterView(8, "memory.record", None, None, "bad", 1, AT, LATER, [{"x": 1}])

    assert _dumped(waiting.to_public()) == (
        '{"id": 7, "task_name": "memory.embed", "task_id": "t-1", "event_id": "e1", "reason": "boom", '
        '"deliveries": 5, "created_at": "2026-03-04T05:06:07.890123+00:00", "replayed_at": null, '
        '"args": ["e1"]}'
    )
    assert replayed.to_public()["replayed_at"] == "2026-03-05T08:00:00+08:00"
    assert replayed.to_public()["task_id"] is None


class _Colour(StrEnum):
    RED = "red"


class _Thing:
    def __init__(self) -> None:
        self.name = "thing"
        self.colour = _Colour.RED
        self.at = AT
        self.gone: datetime | None = None
        self.size = 2.5


def test_json_ready_renders_times_and_enums_and_passes_the_rest() -> None:
    assert json_ready(AT) == "2026-03-04T05:06:07.890123+00:00"
    assert json_ready(_Colour.RED) == "red" and type(json_ready(_Colour.RED)) is str
    assert json_ready(None) is None
    listed = [1]
    assert json_ready(listed) is listed


def test_public_fields_follow_the_order_given_and_take_given_values() -> None:
    view = public_fields(_Thing(), "size at gone colour name", size=3)

    assert list(view.items()) == [
        ("size", 3),
        ("at", "2026-03-04T05:06:07.890123+00:00"),
        ("gone", None),
        ("colour", "red"),
        ("name", "thing"),
    ]


def test_public_fields_refuse_a_given_value_for_a_field_not_shown() -> None:
    with pytest.raises(ValueError, match="sizes"):
        public_fields(_Thing(), "name size", sizes=3)
