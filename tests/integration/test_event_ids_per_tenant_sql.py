"""The SQL event log keyed by (tenant, event id) (migration 0017) reads and writes what the fakes
do: each lookup by event id names the tenant, a bare id is taken only while one tenant holds it,
reindex pages every tenant's turns, and an import meets another tenant's id without a clash."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.events import Role, TurnPublished, event_ref
from shared.settings import Settings
from shared.storage import Receipt
from tests.support.fakes import FakeStore
from workers.bootstrap import Container, build_container

AT = datetime(2026, 11, 30, 12, tzinfo=UTC)


def _turn(tenant: str, content: str, event_id: str = "order-1001") -> TurnPublished:
    return TurnPublished(event_id, tenant, "u1", "s1", 1, Role.USER, content, AT, {})


def _load(uow) -> None:
    for tenant in ("acme", "beta"):
        turn = _turn(tenant, f"{tenant}'s words")
        assert uow.events.insert_if_absent(turn, "recorded")
        uow.receipts.add_if_absent(Receipt(turn.event_id, tenant, "u1", "accepted"))
        uow.turn_index.set_vector(turn.ref, [0.5] * 16, "m")
    uow.events.set_stage(event_ref("beta", "order-1001"), "extracted")


def _read(uow) -> dict[str, object]:
    return {
        "acme": uow.events.get(event_ref("acme", "order-1001")).event.content,
        "beta": uow.events.get(event_ref("beta", "order-1001")).event.content,
        "bare": uow.events.get("order-1001"),  # two tenants hold it: neither is guessed
        "stages": uow.events.stages([event_ref("acme", "order-1001"), event_ref("beta", "order-1001")]),
        "stalled": uow.events.stalled(datetime.now(UTC) + timedelta(minutes=1), 10),
        "receipts": {t: sorted(uow.receipts.get_many(t, ["order-1001"])) for t in ("acme", "beta", "gamma")},
        # One turn a page: the cursor (tenant, event id) must not skip the second tenant's row.
        "pages": [_page(uow, ""), _page(uow, event_ref("acme", "order-1001"))],
    }


def _page(uow, after: str) -> list[str]:
    return [row.event.ref for row in uow.turn_index.page_for_reindex(after, 1)]


def test_sql_event_log_keys_each_turn_by_tenant_and_event_id_as_the_fakes_do(sql_settings: Settings) -> None:
    fake = FakeStore()
    with fake.uow() as uow:
        _load(uow)
        expected = _read(uow)
    assert expected["acme"] == "acme's words" and expected["beta"] == "beta's words"
    assert expected["bare"] is None
    assert expected["stages"] == {"acme/order-1001": "recorded", "beta/order-1001": "extracted"}
    assert sorted(expected["stalled"]) == [("acme/order-1001", "recorded"), ("beta/order-1001", "extracted")]
    assert expected["receipts"] == {"acme": ["order-1001"], "beta": ["order-1001"], "gamma": []}
    assert expected["pages"] == [["acme/order-1001"], ["beta/order-1001"]]
    with _sql_log(sql_settings, _load) as container, container.uow() as uow:
        found = _read(uow)
    assert {k: v for k, v in found.items() if k != "stalled"} == {
        k: v for k, v in expected.items() if k != "stalled"
    }
    assert sorted(found["stalled"]) == sorted(expected["stalled"])  # type: ignore[arg-type]


@contextmanager
def _sql_log(settings: Settings, load: Callable[[Any], None]) -> Iterator[Container]:
    """A container whose SQL store holds what ``load`` writes, closed on exit."""
    container = build_container(settings)
    try:
        with container.uow() as uow:
            load(uow)
            uow.commit()
        yield container
    finally:
        container.close()


def test_an_import_meets_another_tenants_event_id_without_a_clash(sql_settings: Settings) -> None:
    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            beta = _turn("beta", "beta's words")
            uow.events.insert_if_absent(beta, "done")
            uow.turn_index.mark_indexed([beta.ref])
            uow.commit()
        row = {
            "event_id": "order-1001", "tenant_id": "acme", "user_id": "u1", "session_id": "s1", "seq": 1,
            "role": "user", "content": "acme's words", "content_hash": "h", "at": AT.isoformat(),
            "metadata": {}, "stage": "done", "extraction_reasons": [],
        }  # fmt: skip
        with container.uow() as uow:
            assert uow.transfer.import_rows("events", [(2, row)]) == {"order-1001"}
            assert uow.transfer.import_rows("events", [(2, row)]) == set()  # idempotent
            uow.transfer.mark_unindexed("acme", [], ["order-1001"])
            uow.commit()
        with container.uow() as uow:
            states = {t: uow.turn_index.index_states(t, "u1")[0] for t in ("acme", "beta")}
        assert states["acme"].event.content == "acme's words" and not states["acme"].turn_indexed
        assert states["beta"].event.content == "beta's words" and states["beta"].turn_indexed  # untouched
    finally:
        container.close()


def test_erasing_a_user_removes_only_its_llm_usage_not_another_tenants_with_the_same_event_id(
    sql_settings: Settings,
) -> None:
    from sqlalchemy import text

    from shared.llm import LLMUsage
    from workers.db.erasure import SqlUserData

    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            _load(uow)
            usage = LLMUsage("extract", "m", 10, 5, True, None, 1.0)
            # Usage rows name the turn's pipeline key; an old row (before 0017) its bare id, whose
            # event id another tenant now also holds: it is no longer known whose it is, so it stays.
            uow.llm_calls.add(usage, event_ref("acme", "order-1001"))
            uow.llm_calls.add(usage, event_ref("beta", "order-1001"))
            uow.llm_calls.add(usage, "order-1001")
            uow.commit()
        with container.uow() as uow:
            data = SqlUserData(uow.session)  # type: ignore[attr-defined]
            # The report counts the caller's tenant only: beta's row is beta's, and the bare id
            # both tenants hold is neither's, so acme sees its user's one row and no other.
            assert data.count("acme", "u1")["llm_calls"] == (1, 0)
            data.erase("acme", "u1")
            uow.commit()
        with container.uow() as uow:
            left = sorted(uow.session.execute(text("SELECT event_id FROM llm_calls")).scalars())  # type: ignore[attr-defined]
        assert left == ["beta/order-1001", "order-1001"]
    finally:
        container.close()


def _mixed_log(uow) -> None:
    # Tenants whose names could collide in a careless key ("a" / "a:b"), ids that do too
    # ("e1" / "e10"), and an id only one tenant holds ("solo", for the bare lookup).
    for n, (tenant, event_id) in enumerate(
        [("a", "e1"), ("a", "e10"), ("a:b", "e1"), ("a:b", "e10"), ("b", "e1"), ("b", "solo")]
    ):
        turn = TurnPublished(event_id, tenant, "u1", "s1", n + 1, Role.USER, f"{tenant} {event_id}", AT, {})
        assert uow.events.insert_if_absent(turn, "recorded")
        uow.turn_index.set_vector(turn.ref, [0.5] * 16, "m")
        uow.events.set_stage(turn.ref, f"stage-{n}")


ASKED = [event_ref("a", "e1"), event_ref("a:b", "e10"), event_ref("b", "e10"), event_ref("c", "e1"), "solo"]


def test_lookups_by_many_keys_take_each_tenants_own_ids_as_the_fakes_do(sql_settings: Settings) -> None:
    fake = FakeStore()
    with fake.uow() as uow:
        _mixed_log(uow)
        expected = uow.events.stages(ASKED)
    assert expected == {"a/e1": "stage-0", "a:b/e10": "stage-3", "solo": "stage-5"}
    with _sql_log(sql_settings, _mixed_log) as container:
        with container.uow() as uow:
            assert uow.events.stages(ASKED) == expected
            uow.turn_index.mark_indexed(ASKED[:3])
            uow.commit()
        with container.uow() as uow:
            indexed = {
                s.event.ref
                for tenant in ("a", "a:b", "b")
                for s in uow.turn_index.index_states(tenant, "u1")
                if s.turn_indexed
            }
    assert indexed == {"a/e1", "a:b/e10"}
