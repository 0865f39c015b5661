"""Recall's read of the conversation log's hits and of the turns their context windows hold, in
one statement (``events.of_user(..., windows_of=...)``), against the in-memory fake: the same
turns, and never a turn of another user or tenant, though event ids repeat across tenants and a
window names bare event ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.events import Role, TurnPublished
from shared.settings import Settings
from tests.support.fakes import FakeStore
from tests.support.plans import plans_of
from workers.bootstrap import build_container

NOW = datetime(2026, 12, 6, 9, tzinfo=UTC)
# (tenant, user): the prefix of its event ids (<prefix>-<seq>; ids are unique per tenant, so
# a-1.. repeats in every tenant) and its turns' contents, seq 1..n.
# A turn's window: the WINDOW turns before it, three in tenant t2 (so that its a-4 names a-1,
# which t1's a-4 does not).
OWNERS = {
    ("t1", "u1"): ("a", "abcd"),
    ("t1", "u10"): ("a:b", "efgh"),
    ("t1:x", "u1"): ("a", "ijkl"),
    ("t2", "u1"): ("a", "mnop"),
}
WINDOW = {"t2": 3}


def _load(uow) -> None:  # type: ignore[no-untyped-def]
    for (tenant, user), (prefix, contents) in OWNERS.items():
        for seq, letter in enumerate(contents, start=1):
            turn = TurnPublished(
                f"{prefix}-{seq}", tenant, user, "s1", seq, Role.USER, f"{tenant}/{user} {letter}",
                NOW + timedelta(minutes=seq), {},
            )  # fmt: skip
            assert uow.events.insert_if_absent(turn, "recorded")
            window = [f"{prefix}-{n}" for n in range(max(1, seq - WINDOW.get(tenant, 2)), seq)]
            uow.turn_index.set_vector(turn.ref, [1.0] + [0.0] * 15, "hash", window)
    uow.commit()


ASKS = [
    ("t1", "u1", ["a-1"], ["a-4"]),  # a hit and a lending hit's window (a-2, a-3)
    ("t1", "u1", [], ["a-3", "a-4"]),  # windows only: a-1, a-2, a-3
    ("t1", "u1", [], ["a-4"]),  # a-2, a-3: not a-1, which another tenant's a-4 window names
    ("t1", "u1", ["a-4"], []),  # no window asked: the hit alone
    ("t1", "u10", ["a-1"], ["a-4"]),  # another user's ids: nothing
    ("t1", "u10", ["a:b-1"], ["a:b-4"]),  # its own
    ("t1:x", "u1", [], ["a-4"]),  # a tenant id with a colon
    ("t2", "u1", ["a-9"], ["a-9"]),  # ids this user has not: nothing
]


def _answers(uow) -> list[list[tuple[str, str, str]]]:  # type: ignore[no-untyped-def]
    out = []
    for tenant, user, hits, lending in ASKS:
        found = uow.events.of_user(tenant, user, hits, lending)
        out.append(sorted((s.event.tenant_id, s.event.user_id, s.event.content) for s in found))
    return out


def test_hits_and_their_windows_in_one_read_agree_with_the_fake(sql_settings: Settings) -> None:
    fake = FakeStore()
    with fake.uow() as uow:
        _load(uow)
        expected = _answers(uow)
    assert [len(a) for a in expected] == [3, 3, 2, 1, 0, 3, 2, 0]
    for (tenant, user, _, _), answer in zip(ASKS, expected, strict=True):
        assert all((t, u) == (tenant, user) for t, u, _ in answer)
    assert [c for _, _, c in expected[0]] == ["t1/u1 a", "t1/u1 b", "t1/u1 c"]
    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            _load(uow)
        with container.uow() as uow:
            assert _answers(uow) == expected
    finally:
        container.close()


def test_hits_and_their_windows_are_read_by_the_primary_key(sql_settings: Settings) -> None:
    """The read looks the ids up in the primary key, never scans the user's events: written as
    "the hit ids OR in the windows' subquery", Postgres read all 220k turns of the latency
    benchmark (720 ms). Five thousand more turns make a scan cost what it would."""
    from sqlalchemy import text

    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            _load(uow)
            uow.session.execute(  # type: ignore[attr-defined]
                text(
                    "INSERT INTO events (tenant_id, event_id, user_id, session_id, seq, role, content,"
                    " content_hash, at, metadata, stage, extraction_reasons)"
                    " SELECT 't1', 'f-' || g, 'u1', 's2', g, 'user', 'filler', 'h', now(), '{}', 'done', '{}'"
                    " FROM generate_series(1, 5000) g"
                )
            )
            uow.commit()
        with container.uow() as uow:
            session = uow.session  # type: ignore[attr-defined]
            session.execute(text("ANALYZE events"))
            [plan] = plans_of(session, lambda: _assert_hits_and_windows(uow))
    finally:
        container.close()
    scan = plan.splitlines()[:2]  # the outer scan and its index condition
    assert "events_pkey" in scan[0] and "event_id" in scan[1], plan


def _assert_hits_and_windows(uow) -> None:  # type: ignore[no-untyped-def]
    assert len(uow.events.of_user("t1", "u1", ["a-1"], ["a-4"])) == 3
