"""The turn-alone vectors in Postgres (``events.alone_vector``, migration 0020) read and write what
the fakes do: scored for one tenant's user only, whatever ids other owners share (u1 and u10,
``a`` and ``a:b``, two tenants), cleared by a window written without one and by a privacy
delete."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.events import Role, TurnPublished
from shared.settings import Settings
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container
from workers.db.packed_vectors import cosines, pack_vector, unpack_vector

AT = datetime(2026, 11, 30, 12, tzinfo=UTC)
OWNERS = [(t, u) for t in ("acme", "beta") for u in ("u1", "u10")]
# Event ids are unique per tenant: u10's collide with u1's by prefix, and both tenants hold all six.
IDS = {"u1": ["a", "a:b", "b"], "u10": ["a:", "a:b:c", "b1"]}
EVERY_ID = [i for ids in IDS.values() for i in ids]
QUERY = [1.0, 0.0, 0.0, 0.0]


def _vector(tenant: str, user: str, n: int) -> list[float]:
    """A distinct vector per owner and turn: its cosine to QUERY tells them apart."""
    k = OWNERS.index((tenant, user)) * 3 + n + 1
    return [float(k), 1.0, float(n), 0.5]


def _load(uow: Any) -> None:
    for tenant, user in OWNERS:
        for n, event_id in enumerate(IDS[user]):
            turn = TurnPublished(event_id, tenant, user, "s1", n + 1, Role.USER, f"{user} {n}", AT, {})
            assert uow.events.insert_if_absent(turn, "embedded")
            uow.turn_index.set_vector(turn.ref, [0.1] * 4, "m", [], _vector(tenant, user, n))
    # A window written again without its turn alone leaves none ("b" of acme/u1) ...
    uow.turn_index.set_vector("acme/b", [0.2] * 4, "m", [])
    # ... and a privacy delete drops it (beta/u10's "a:b:c").
    uow.events.redact("beta", "u10", ["a:b:c"])


def _read(uow: Any) -> dict[tuple[str, str], dict[str, float]]:
    return {
        (t, u): {k: round(v, 5) for k, v in uow.turn_index.alone_scores(t, u, EVERY_ID, QUERY).items()}
        for t, u in OWNERS
    }


def test_alone_vectors_are_scored_within_their_owner_as_the_fakes_do(sql_settings: Settings) -> None:
    fake = FakeStore()
    with fake.uow() as uow:
        _load(uow)
        expected = _read(uow)
    assert set(expected[("acme", "u1")]) == {"a", "a:b"}
    assert set(expected[("acme", "u10")]) == {"a:", "a:b:c", "b1"}
    assert set(expected[("beta", "u10")]) == {"a:", "b1"}
    assert len({v for scores in expected.values() for v in scores.values()}) == 10  # all distinct
    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            _load(uow)
            uow.commit()
        with container.uow() as uow:
            assert _read(uow) == expected
    finally:
        container.close()


def test_packed_vectors_round_trip_and_score_as_cosines() -> None:
    v = [0.25, -1.5, 3.0]
    assert unpack_vector(pack_vector(v)) == v
    packed = {"same": pack_vector([2.0, 0.0]), "other": pack_vector([0.0, 1.0]), "short": pack_vector([1.0])}
    packed["zero"] = pack_vector([0.0, 0.0])
    assert cosines([3.0, 0.0], packed) == {"same": 1.0, "other": 0.0, "short": 0.0, "zero": 0.0}


def test_an_export_carries_the_alone_vectors_and_an_import_restores_them(sql_settings: Settings) -> None:
    """acme's u1 exported and imported as tenant gamma scores as acme's does; beta, holding the
    same ids, is neither exported nor touched."""
    import json

    from service.operations.transfer import export_lines, import_lines

    container = build_container(sql_settings)
    try:
        dim = container.embedder.dim
        model = container.embedder.model_name
        query = [1.0] + [0.0] * (dim - 1)
        with container.uow() as uow:
            for tenant in ("acme", "beta"):
                for n, event_id in enumerate(IDS["u1"]):
                    turn = TurnPublished(event_id, tenant, "u1", "s1", n + 1, Role.USER, f"t{n}", AT, {})
                    assert uow.events.insert_if_absent(turn, "done")
                    alone = [float(n + 1 + (tenant == "beta"))] + [1.0] * (dim - 1)
                    uow.turn_index.set_vector(turn.ref, [0.5] * dim, model, [], alone if n < 2 else None)
            uow.commit()
        lines = list(export_lines(container, "acme", "u1"))
        rows = [json.loads(line) for line in lines]
        moved = [json.dumps(r).replace('"acme"', '"gamma"') for r in rows]
        import_lines(container, moved)
        with container.uow() as uow:
            scores = {
                t: uow.turn_index.alone_scores(t, "u1", IDS["u1"], query) for t in ("acme", "beta", "gamma")
            }
        assert set(scores["acme"]) == {"a", "a:b"}
        assert {k: round(v, 5) for k, v in scores["gamma"].items()} == {
            k: round(v, 5) for k, v in scores["acme"].items()
        }
        assert scores["beta"] != scores["acme"]
    finally:
        container.close()


def _unfilled(uow: Any, limit: int) -> list[str]:
    """Every turn without its vector alone, paged ``limit`` at a time as the rebuild pages."""
    refs: list[str] = []
    while page := uow.turn_index.without_alone(refs[-1] if refs else "", limit, "m"):
        refs += [t.ref for t in page]
    return refs


def _fill(uow: Any) -> tuple[list[str], list[bool], list[str]]:
    for tenant, user in OWNERS:
        for n, event_id in enumerate(IDS[user]):
            turn = TurnPublished(event_id, tenant, user, "s1", n + 1, Role.USER, f"{user} {n}", AT, {})
            assert uow.events.insert_if_absent(turn, "embedded")
            uow.turn_index.set_vector(turn.ref, [0.1] * 4, "m", [])
    uow.turn_index.set_vector("beta/a:b", [0.1] * 4, "old", [])  # another model's window
    uow.turn_index.set_vector("acme/b1", [0.1] * 4, "m", [], [1.0] * 4)  # has one already
    uow.events.redact("acme", "u1", ["a:b"])
    before = _unfilled(uow, 2)
    kept = [uow.turn_index.set_alone(ref, _vector(*ref.split("/")[:1], "u1", 0), "m") for ref in before[:3]]
    kept += [uow.turn_index.set_alone(r, [1.0] * 4, "m") for r in ("beta/a:b", "acme/a:b")]
    return before, kept, _unfilled(uow, 3)


def test_turns_without_their_vector_alone_are_paged_and_filled_as_the_fakes_do(
    sql_settings: Settings,
) -> None:
    """The rebuild's pages of turns lacking one, across tenants whose ids collide (``a``, ``a:``,
    ``a:b``): neither a turn of another model's window, nor a blanked one, nor one that has it;
    ``set_alone`` refuses those two."""
    with FakeStore().uow() as uow:
        expected = _fill(uow)
    before, kept, after = expected
    assert len(before) == len(OWNERS) * 3 - 3 and "beta/a:b" not in before and "acme/a:b" not in before
    assert "acme/b1" not in before and kept == [True, True, True, False, False] and after == before[3:]
    container = build_container(sql_settings)
    try:
        with container.uow() as uow:
            assert _fill(uow) == expected
    finally:
        container.close()


def test_cuemem_reindex_with_the_setting_on_fills_them(sql_settings: Settings) -> None:
    """The rebuild as the CLI and the worker task run it (``index_followups.reindex``), with
    ``CUEMEM_TURN_ALONE_VECTOR`` on: each owner's turns scored alone by their own words."""
    from service.operations.index_followups import reindex
    from shared.indexing.turn_windows import alone_text
    from shared.vectors import cosine

    for alone in (False, True):
        container = build_container(sql_settings.model_copy(update={"turn_alone_vector": alone}))
        try:
            model, dim = container.embedder.model_name, container.embedder.dim
            if not alone:
                with container.uow() as uow:
                    for tenant, user in OWNERS:
                        for n, event_id in enumerate(IDS[user]):
                            turn = TurnPublished(
                                event_id,
                                tenant,
                                user,
                                "s1",
                                n + 1,
                                Role.USER,
                                f"{tenant} {user} {n} fox",
                                AT,
                                {},
                            )
                            assert uow.events.insert_if_absent(turn, "done")
                            uow.turn_index.set_vector(turn.ref, [0.5] * dim, model, [])
                    uow.commit()
            stats = reindex(container)
            assert stats.get("turns_alone") == (len(OWNERS) * 3 if alone else None)
            query = container.embedder.embed_query("acme u10 1 fox")
            with container.uow() as uow:
                for tenant, user in OWNERS:
                    scores = uow.turn_index.alone_scores(tenant, user, EVERY_ID, query)
                    if not alone:
                        assert scores == {}
                        continue
                    assert set(scores) == set(IDS[user])
                    for n, event_id in enumerate(IDS[user]):
                        own = container.embedder.embed_passages([alone_text(f"{tenant} {user} {n} fox")])[0]
                        assert round(scores[event_id], 5) == round(cosine(query, own), 5)
        finally:
            container.close()
