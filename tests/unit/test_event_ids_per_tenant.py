"""Event ids are the producer's and unique within a tenant only (issue 18): two tenants' turns
with one id are two turns, each recorded and recalled in its own tenant; an id reused inside a
tenant for another turn is refused with the reason, not dropped."""

from __future__ import annotations

import pytest

from shared.events import InvalidEvent, event_ref
from shared.ingest.record import record_event, record_events
from shared.models import turn_point_id
from shared.queues import TaskName
from tests.support.pipeline import LIMITS, TurnHarness, ask, turn

ACME_TURN = {**turn(1, "我不吃香菜", event_id="order-1001"), "tenant_id": "acme"}
BETA_TURN = {**turn(1, "生产环境部署端口是8443", event_id="order-1001"), "tenant_id": "beta"}


def test_two_tenants_publishing_one_event_id_both_get_their_turn_recorded_and_recalled():
    h = TurnHarness()
    h.drain(BETA_TURN)
    h.drain(ACME_TURN)  # the same id, user, session and seq, in another tenant

    with h.store.uow() as uow:
        acme = [s.event.content for s in uow.events.timeline("acme", "u1", "s1")]
        beta = [s.event.content for s in uow.events.timeline("beta", "u1", "s1")]
        stages = uow.events.stages([event_ref("acme", "order-1001"), event_ref("beta", "order-1001")])
        receipts = {t: uow.receipts.get_many(t, ["order-1001"])["order-1001"] for t in ("acme", "beta")}
    assert (acme, beta) == (["我不吃香菜"], ["生产环境部署端口是8443"])
    assert set(stages.values()) == {"done"}  # each went the whole way, on its own row
    assert {r.outcome for r in receipts.values()} == {"accepted"}
    assert [m.tenant_id for m in h.state.memories.values()].count("acme") >= 1
    assert [m.tenant_id for m in h.state.memories.values()].count("beta") >= 1

    # Each tenant's recall finds its own turn's memory only.
    acme_recall = [i.content for i in ask(h, "香菜", tenant="acme").items]
    beta_recall = [i.content for i in ask(h, "端口 8443", tenant="beta").items]
    assert acme_recall and all("8443" not in c for c in acme_recall)
    assert beta_recall and all("香菜" not in c for c in beta_recall)
    # The turns' points differ: the point id names the tenant.
    assert h.turns.ids("acme", "u1") == {turn_point_id("acme", "u1", "order-1001")}
    assert h.turns.ids("beta", "u1") == {turn_point_id("beta", "u1", "order-1001")}


def test_an_event_id_reused_in_a_tenant_for_other_content_is_refused_with_the_reason():
    h = TurnHarness()
    h.drain(ACME_TURN)
    reused = {**turn(2, "我住在杭州", event_id="order-1001"), "tenant_id": "acme"}
    with h.store.uow() as uow, pytest.raises(InvalidEvent) as refused:
        record_event(uow, reused, LIMITS)
    assert "event_id" in str(refused.value) and "cannot be reused" in str(refused.value)
    assert "seq 1 of conversation u1/s1" in str(refused.value)
    # In a batch the turn is handed back with its reason (the task dead-letters it alone).
    with h.store.uow() as uow:
        followups, refused_batch = record_events(uow, [reused], LIMITS)
    assert followups == [] and "cannot be reused" in refused_batch[0][1]
    assert h.state.events[event_ref("acme", "order-1001")]["event"].content == "我不吃香菜"


def test_an_event_id_another_user_of_the_tenant_holds_is_refused():
    h = TurnHarness()
    h.drain(ACME_TURN)
    other_user = {**turn(1, "我不吃香菜", event_id="order-1001", user="u2"), "tenant_id": "acme"}
    with h.store.uow() as uow, pytest.raises(InvalidEvent, match="another user"):
        record_event(uow, other_user, LIMITS)


def test_the_same_turn_delivered_again_is_still_a_quiet_redelivery():
    h = TurnHarness()
    h.drain(ACME_TURN)
    with h.store.uow() as uow:
        assert record_event(uow, ACME_TURN, LIMITS) == []  # done: nothing to re-send
    h.state.events[event_ref("acme", "order-1001")]["stage"] = "recorded"  # as if extract was lost
    with h.store.uow() as uow:
        out = record_event(uow, ACME_TURN, LIMITS)
    assert [(f.task, f.args) for f in out] == [(TaskName.EXTRACT.value, (event_ref("acme", "order-1001"),))]


def test_a_stage_message_of_a_bare_event_id_is_taken_only_while_one_tenant_holds_the_id():
    h = TurnHarness()
    h.drain(ACME_TURN)
    h.state.events["order-1001"]["stage"] = "recorded"
    # A message queued before the upgrade names the event id alone: still found, carried on.
    assert [f.task for f in h.run(TaskName.EXTRACT, ("order-1001",))] == [TaskName.EMBED.value]
    h.drain(BETA_TURN)
    with h.store.uow() as uow:
        assert uow.events.get("order-1001") is None  # two tenants: neither is guessed
        assert uow.events.get(event_ref("beta", "order-1001")) is not None
