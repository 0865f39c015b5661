"""The pure parts of the inspector's reads: a memory's score curve rebuilt from its history, whose
tenant a dead letter is, the overview's shapes, and what `cuemem serve` says about the inspector."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import pytest

from service.http.serve import inspector_hint
from shared.insight import EventStats, MemoryStats
from shared.lifecycle.dead_letters import dead_letter_tenants, event_ids_named
from shared.lifecycle.score_history import reinforcements, score_curve
from shared.models import Memory, MemoryStatus, MemoryType
from shared.scoring import DecayPolicy, score
from shared.storage import HistoryEntry

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _memory(access_count: int = 0, last: datetime = T0, kind: MemoryType = MemoryType.PREFERENCE) -> Memory:
    return Memory(
        id="m1", tenant_id="t", user_id="u", type=kind, content="x", importance=8.0,
        status=MemoryStatus.ACTIVE, created_at=T0, updated_at=T0, last_accessed_at=last,
        access_count=access_count,
    )  # fmt: skip


def _repeat(at: datetime, memory_id: str = "m1") -> HistoryEntry:
    return HistoryEntry(memory_id, "t", "u", "reinforced", "repeated", "rules", at, None, f"ev-{at.day}")


def test_a_memory_never_used_decays_by_its_types_gamma_per_day():
    curve = score_curve(_memory(), [], T0 + timedelta(days=10), points=11)
    values = [p["score"] for p in curve["points"]]
    # Documented in shared/scoring.py: a preference keeps 0.97 of its weight per day.
    assert values == pytest.approx([8.0 * 0.97**d for d in range(11)], abs=1e-6)
    assert curve["reinforcements"] == [] and curve["gamma"] == 0.97


def test_reinforcements_come_from_repeats_then_the_uses_the_count_holds_beyond_them():
    m = _memory(access_count=4, last=T0 + timedelta(days=6))
    history = [
        _repeat(T0 + timedelta(days=2)),
        _repeat(T0 + timedelta(days=4)),
        _repeat(T0 + timedelta(days=1), "m2"),
    ]
    moments = reinforcements(m, history)
    assert [(r.at.day, r.uses, r.source) for r in moments] == [
        (3, 1, "repeat"),
        (5, 1, "repeat"),
        (7, 2, "recall"),
    ]
    # More repeats in the history than the count holds (a count edited down): only the count's.
    assert [r.uses for r in reinforcements(_memory(access_count=1), history)] == [1]


def test_the_curve_jumps_at_each_reinforcement_and_ends_at_the_stored_formula():
    now = T0 + timedelta(days=9)
    m = _memory(access_count=2, last=T0 + timedelta(days=5))
    policy = DecayPolicy()
    curve = score_curve(m, [_repeat(T0 + timedelta(days=3))], now, policy, points=10)
    by_at = {p["at"]: p["score"] for p in curve["points"]}
    for day, uses in ((3, 1), (5, 2)):
        at = T0 + timedelta(days=day)
        before = by_at[(at - timedelta(microseconds=1)).isoformat()]
        assert by_at[at.isoformat()] == pytest.approx(8.0 + policy.base * math.log1p(uses), abs=1e-6)
        assert by_at[at.isoformat()] > before
    assert curve["points"][-1]["score"] == pytest.approx(
        score(8.0, m.type, m.last_accessed_at, 2, now, policy), abs=1e-6
    )
    with pytest.raises(ValueError, match="points"):
        score_curve(m, [], now, points=1)


def test_a_dead_letter_belongs_to_a_tenant_only_when_its_arguments_name_that_one_alone():
    events = {"e1": "acme", "e2": "acme", "e3": "beta"}
    assert dead_letter_tenants("memory.extract", ["e1"], events) == {"acme"}
    assert dead_letter_tenants("memory.extract", ["unknown"], events) is None
    assert dead_letter_tenants("memory.record", [{"tenant_id": "beta", "user_id": "u"}], events) == {"beta"}
    assert dead_letter_tenants("memory.record", ["not a turn"], events) is None
    assert dead_letter_tenants("memory.sync_index", ["acme", "u1"], events) == {"acme"}
    assert dead_letter_tenants("memory.reinforce", ["r1", "beta", "u1", ["m"], "now"], events) == {"beta"}
    assert dead_letter_tenants("memory.index", [["e1", "e3"]], events) == {"acme", "beta"}
    assert dead_letter_tenants("memory.index", [["e1", "nope"]], events) is None
    assert dead_letter_tenants("memory.reconcile", [], events) is None
    assert dead_letter_tenants("not.a.task", ["e1"], events) is None
    # A stage's pipeline key names its tenant itself (event ids are unique per tenant only).
    assert dead_letter_tenants("memory.extract", ["beta/e1"], events) == {"beta"}
    assert dead_letter_tenants("memory.index", [["beta/e1", "acme/e9"]], events) == {"acme", "beta"}
    assert event_ids_named("memory.index", [["beta/e1", "e3"]]) == ["e3"]
    assert event_ids_named("memory.index", [["e1", 3, "e3"]]) == ["e1", "e3"]
    assert (
        event_ids_named("memory.persist", ["e2"]) == ["e2"] and event_ids_named("memory.record", [{}]) == []
    )


def test_the_overview_shapes_add_up():
    stats = MemoryStats(
        {"fact": {"active": 2, "archived": 1}, "profile": {"superseded": 1}},
        [(date(2026, 1, 2), 3)],
        [0, 0, 0, 0, 0, 1, 0, 2, 0, 1],
    )
    public = stats.to_public()
    assert public["total"] == 4 and public["by_status"] == {"active": 2, "archived": 1, "superseded": 1}
    assert public["per_day"] == [{"day": "2026-01-02", "memories": 3}]
    assert [(b["from"], b["to"]) for b in public["importance"]][-1] == (9.0, 10.0)
    assert EventStats({"done": 3, "embedded": 1}, 1).to_public() == {
        "by_stage": {"done": 3, "embedded": 1}, "total": 4, "stalled": 1,
    }  # fmt: skip


def test_serve_prints_the_inspectors_url_and_how_to_get_a_key():
    lines = inspector_hint("127.0.0.1", 8080, auth=True, tenant_id="default", data_dir=None)
    assert lines[0] == "Inspector: http://127.0.0.1:8080/inspector/"
    assert "    cuemem keys create --tenant default --name inspector" in lines
    assert any("cuemem serve --no-auth" in line for line in lines)
    custom = inspector_hint("0.0.0.0", 9000, auth=True, tenant_id="acme", data_dir="/srv/cm")
    assert custom[0] == "Inspector: http://127.0.0.1:9000/inspector/"
    assert "    cuemem keys create --tenant acme --name inspector --data-dir /srv/cm" in custom
    assert inspector_hint("::1", 8080, auth=False, tenant_id="default", data_dir=None) == [
        "Inspector: http://[::1]:8080/inspector/ (no key needed: auth is off)"
    ]
