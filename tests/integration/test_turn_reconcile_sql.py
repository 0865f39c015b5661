"""Reconciliation of the conversation-log index on real parts: the event log in Postgres against
the embedded Qdrant engine. Drift made by hand is repaired with ``turns_*`` counts, a second run
finds nothing, the memory index is untouched, and ``cuemem maintain`` reports the same keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.main import app as cli_app
from shared.events import EventLimits, TurnPublished, validate_turn
from shared.indexing.collections import MEMORIES, TURNS
from shared.indexing.points import turn_payload
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.sync import push_unindexed
from shared.models import turn_point_id
from shared.ports import IndexPoint
from shared.queues import IndexKind
from shared.settings import Settings
from tests.support.services import hash_cli_env
from workers.bootstrap import Container

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
STRAY = "00000000-0000-4000-8000-999999999999"


@pytest.fixture
def sql_settings(sql_settings: Settings) -> Settings:
    return sql_settings.model_copy(update={"index_turns": True})  # and the turns' index


def _turn(user: str, seq: int, content: str) -> TurnPublished:
    return validate_turn(
        {
            "event_id": f"e-{user}-{seq}",
            "user_id": user,
            "session_id": "s1",
            "seq": seq,
            "role": "user" if seq % 2 else "assistant",
            "content": content,
            # An offset other than UTC: the payload's time must survive the Postgres round trip.
            "at": (NOW + timedelta(minutes=seq)).astimezone(timezone(timedelta(hours=8))).isoformat(),
        },
        EventLimits(),
    )


def _record(c: Container, turns: list[TurnPublished], *, stage: str = "done", embed: bool = True) -> None:
    with c.uow() as uow:
        for t in turns:
            assert uow.events.insert_if_absent(t, stage)
            if embed:
                [vector] = c.embedder.embed_passages([" ".join(t.content.split())])
                uow.turn_index.set_vector(t.event_id, vector, c.embedder.model_name)
        uow.commit()


def _agree(c: Container, index: Any, user: str) -> None:
    with c.uow() as uow:
        states = uow.turn_index.index_states("default", user)
    rows = {turn_point_id("default", user, s.event.event_id): s for s in states if s.embedding_model}
    points = index.payloads("default", user)
    assert set(points) == set(rows)
    for pid, payload in points.items():
        expected = turn_payload(rows[pid].event)
        assert {k: payload[k] for k in expected} == expected
        assert rows[pid].turn_indexed


def test_turn_index_drift_is_repaired_on_the_embedded_engine_and_by_cuemem_maintain(c, sql_settings):
    turns = {
        u: [_turn(u, i, f"{u} said thing number {i} about port {8000 + i}") for i in range(1, 9)]
        for u in ("ta", "tb")
    }
    for user_turns in turns.values():
        _record(c, user_turns)
    index, dim = c.index(IndexKind.TURNS), c.embedder.dim
    assert index is not None
    with c.uow() as uow:
        assert sum(push_unindexed(uow, TURNS, index, c.embedder, "default", u) for u in turns) == 16
        uow.commit()
    memory_points = c.index().count()

    clean = reconcile_indexes(c.uow, {MEMORIES: c.index(), TURNS: index}, c.embedder)
    assert {k: clean[k] for k in TURNS.report_keys} == dict.fromkeys(TURNS.report_keys, 0)
    assert clean["turns_users"] == 2 and clean["turns_points"] == 16

    # Drift: two points deleted by hand, a stray point, a stale payload, a point of a turn still
    # in the pipeline (no vector), and a turn done before turns were indexed (never embedded).
    index.delete(
        "default", "ta", [turn_point_id("default", "ta", "e-ta-1"), turn_point_id("default", "ta", "e-ta-2")]
    )
    index.upsert([IndexPoint(STRAY, "default", "tb", [1.0] * dim, {"status": "active", "seq": 1})])
    index.set_payload(
        "default", "tb", {turn_point_id("default", "tb", "e-tb-3"): {"role": "system", "seq": 42}}
    )
    _record(c, [_turn("ta", 20, "in flight")], stage="extracted", embed=False)
    index.upsert(
        [
            IndexPoint(
                turn_point_id("default", "ta", "e-ta-20"), "default", "ta", [1.0] * dim, {"status": "active"}
            )
        ]
    )
    _record(c, [_turn("tb", 21, "from before the turn index")], stage="done", embed=False)

    stats = reconcile_indexes(c.uow, {MEMORIES: c.index(), TURNS: index}, c.embedder)
    assert {k: stats[k] for k in TURNS.report_keys} == {
        "turns_missing": 2,
        "turns_extra": 2,
        "turns_stale": 1,
        "turns_bookkept": 0,
        "turns_foreign": 0,
        "turns_unembedded": 1,
    }
    assert all(stats[k] == 0 for k in MEMORIES.report_keys) and c.index().count() == memory_points
    _agree(c, index, "ta")
    _agree(c, index, "tb")
    again = reconcile_indexes(c.uow, {MEMORIES: c.index(), TURNS: index}, c.embedder)
    assert {k: again[k] for k in TURNS.report_keys} == {
        **dict.fromkeys(TURNS.report_keys, 0),
        "turns_unembedded": 1,  # still there: embedding it is `cuemem reindex`'s job
    }
    assert again["turns_points"] == 16

    # `cuemem maintain` reconciles the turn index too, in its own process.
    index.delete("default", "tb", [turn_point_id("default", "tb", "e-tb-8")])
    c.close()  # the CLI opens the embedded indexes itself
    env = hash_cli_env(sql_settings)
    out = CliRunner().invoke(cli_app, ["maintain", "--now", NOW.isoformat()], env=env)
    assert out.exit_code == 0, (out.output, out.exception)
    summary = json.loads(out.output)
    assert summary["reconcile"]["turns_missing"] == 1 and summary["reconcile"]["turns_points"] == 16, summary


def test_windows_in_postgres_context_rows_and_a_privacy_delete(c: Container) -> None:
    """The window methods on real Postgres: the context before a seq (oldest first, no redacted
    turn), the rows with their context texts, and a redaction dropping exactly the vectors of the
    windows that quote the blanked turn, for that user only."""
    turns = [_turn("w", seq, f"turn number {seq}") for seq in range(1, 6)]
    _record(c, turns, embed=False)
    _record(c, [_turn("x", 1, "someone else")], embed=False)
    with c.uow() as uow:
        for t in turns:
            context = uow.events.context_before("default", "w", "s1", t.seq, 2)
            ids = [s.event.event_id for s in context]
            assert ids == [f"e-w-{s}" for s in range(max(1, t.seq - 2), t.seq)]
            uow.turn_index.set_vector(t.event_id, [0.1] * 16, c.embedder.model_name, ids)
        uow.commit()
    with c.uow() as uow:
        [row] = uow.turn_index.rows("default", "w", ["e-w-4"])
        assert row.context == ("turn number 2", "turn number 3")
        assert uow.turn_index.rows("default", "x", ["e-w-4"]) == []  # another user's: absent
        assert uow.turn_index.unembed_windows("default", "x", ["e-w-3"]) == []
        blanked = uow.events.redact("default", "w", ["e-w-3"])
        assert uow.turn_index.unembed_windows("default", "w", [e for e, _ in blanked]) == ["e-w-4", "e-w-5"]
        uow.commit()
    with c.uow() as uow:
        assert [s.event.event_id for s in uow.events.context_before("default", "w", "s1", 5, 2)] == [
            "e-w-2",
            "e-w-4",
        ]  # the blanked turn is no context any more
        left = {r.event.event_id for r in uow.turn_index.rows("default", "w", [t.event_id for t in turns])}
        assert left == {"e-w-1", "e-w-2"}
