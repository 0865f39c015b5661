"""One contract for every VectorIndex: the embedded engine, the server client and the test fake
(the ``index`` and ``blank`` fixtures of tests/contract/conftest.py run each test on all three).

The server adapter runs against qdrant-client's local mode (":memory:"), which shares the client
API with a real server; it is a compatibility check, not an engine test.
"""

from __future__ import annotations

import pytest

from shared.language.sparse import sparse_query
from shared.ports import EmbeddingModelMismatch, IndexPoint, IndexUnavailable, VectorIndex
from tests.support.index_points import (
    DIM,
    FOREIGN_SCOPES,
    MODEL,
    OTHER_MODEL,
    SCOPES,
    TENANT,
    USER,
    basis,
    pid,
    point,
)

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


def test_search_returns_nearest_point_first_with_payload(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])

    hits = index.search(TENANT, USER, [0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], limit=3)

    assert [h.id for h in hits] == [pid(2), pid(1), pid(3)]
    assert hits[0].score == pytest.approx(0.9 / (0.82**0.5), abs=1e-5)
    assert hits[0].score > hits[1].score > hits[2].score
    assert hits[0].payload == {"tenant_id": TENANT, "user_id": USER, "status": "active", "type": "fact"}


def test_limit_caps_results(index: VectorIndex) -> None:
    index.upsert([point(n, basis(n)) for n in range(5)])

    assert len(index.search(TENANT, USER, basis(0), limit=2)) == 2
    assert index.search(TENANT, USER, basis(0), limit=0) == []


def test_search_and_ids_never_cross_users_or_tenants(index: VectorIndex) -> None:
    # The same vector for everyone, so only the filter can keep them apart.
    index.upsert([point(n, basis(0), tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    for n, (tenant, user) in enumerate(SCOPES, start=1):
        hits = index.search(tenant, user, basis(0), limit=10)
        assert [h.id for h in hits] == [pid(n)], (tenant, user)
        assert hits[0].payload["tenant_id"] == tenant
        assert hits[0].payload["user_id"] == user
        assert index.ids(tenant, user) == {pid(n)}


@pytest.mark.parametrize(
    ("tenant", "user"),
    FOREIGN_SCOPES,
)
def test_unknown_or_injection_looking_scope_finds_nothing(index: VectorIndex, tenant: str, user: str) -> None:
    index.upsert([point(n, basis(0), tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    assert index.search(tenant, user, basis(0), limit=10, statuses=("active", "superseded")) == []
    assert index.ids(tenant, user) == set()


def test_status_filter(index: VectorIndex) -> None:
    index.upsert(
        [
            point(1, basis(0), status="active"),
            point(2, basis(0), status="superseded"),
            point(3, basis(0), status="deleted"),
        ]
    )

    assert [h.id for h in index.search(TENANT, USER, basis(0), limit=10)] == [pid(1)]
    both = index.search(TENANT, USER, basis(0), limit=10, statuses=("active", "superseded"))
    assert [h.id for h in both] == [pid(1), pid(2)]
    assert [h.id for h in index.search(TENANT, USER, basis(0), limit=10, statuses="superseded")] == [pid(2)]
    assert index.search(TENANT, USER, basis(0), limit=10, statuses=()) == []


def test_upsert_replaces_point_with_same_id(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0), status="active")])
    index.upsert([point(1, basis(1), status="superseded")])

    assert index.count() == 1
    assert index.search(TENANT, USER, basis(0), limit=10) == []
    [hit] = index.search(TENANT, USER, basis(1), limit=10, statuses=("superseded",))
    assert hit.id == pid(1)
    assert hit.score == pytest.approx(1.0, abs=1e-5)


def test_ids_are_canonical_uuid_text(index: VectorIndex) -> None:
    index.upsert([IndexPoint(id=pid(7).upper(), tenant_id=TENANT, user_id=USER, vector=basis(0), payload={})])

    assert index.ids(TENANT, USER) == {pid(7)}


def test_delete_is_scoped_to_the_user(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0), user="alice"), point(2, basis(0), user="bob"), point(3, basis(1))])

    # Bob guesses Alice's id; nothing happens to Alice's point.
    index.delete(TENANT, "bob", [pid(1)])
    index.delete("t2", "alice", [pid(1)])
    assert index.ids(TENANT, "alice") == {pid(1), pid(3)}

    index.delete(TENANT, "alice", [pid(1), pid(99)])
    assert index.ids(TENANT, "alice") == {pid(3)}
    assert index.ids(TENANT, "bob") == {pid(2)}
    assert index.count() == 2

    index.delete(TENANT, "alice", [])
    assert index.count() == 2


def test_ids_and_count(index: VectorIndex) -> None:
    assert index.count() == 0
    assert index.ids(TENANT, USER) == set()

    index.upsert([point(n, basis(n % DIM), status="superseded" if n % 2 else "active") for n in range(1, 6)])
    index.upsert([point(10, basis(0), user="bob")])

    # ids() lists every status: it is what reconciliation compares with the database.
    assert index.ids(TENANT, USER) == {pid(n) for n in range(1, 6)}
    assert index.ids(TENANT, "bob") == {pid(10)}
    assert index.count() == 6
    # Per tenant (the privacy delete's report counts within the caller's tenant only); a tenant
    # whose id prefixes another's, or holds ':', counts its own points alone.
    index.upsert([point(20, basis(0), tenant=f"{TENANT}:x"), point(21, basis(0), tenant=TENANT[:-1])])
    assert index.count(TENANT) == 6 and index.count(f"{TENANT}:x") == 1 and index.count(TENANT[:-1]) == 1
    assert index.count("nobody") == 0 and index.count() == 8


def test_reset_drops_everything_and_switches_model(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0)), point(2, basis(1), user="bob")])

    index.reset(DIM * 2, OTHER_MODEL)

    assert index.count() == 0
    assert index.ids(TENANT, USER) == set()
    index.ensure(DIM * 2, OTHER_MODEL)
    with pytest.raises(EmbeddingModelMismatch):
        index.ensure(DIM, MODEL)
    index.upsert(
        [IndexPoint(id=pid(3), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM * 2), payload={})]
    )
    assert index.ids(TENANT, USER) == {pid(3)}


def test_ensure_is_idempotent_and_keeps_points(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0))])

    index.ensure(DIM, MODEL)

    assert index.ids(TENANT, USER) == {pid(1)}


def test_other_model_raises_mismatch(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0))])

    with pytest.raises(EmbeddingModelMismatch) as excinfo:
        index.ensure(DIM, OTHER_MODEL)
    assert (excinfo.value.stored, excinfo.value.configured) == (MODEL, OTHER_MODEL)
    assert "reindex" in str(excinfo.value)

    with pytest.raises(EmbeddingModelMismatch):
        index.ensure(DIM + 1, MODEL)
    # A refused ensure changes nothing.
    assert index.ids(TENANT, USER) == {pid(1)}


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_tenant_or_user_is_rejected(index: VectorIndex, bad: str) -> None:
    index.upsert([point(1, basis(0))])

    for call in (
        lambda t, u: index.search(t, u, basis(0), limit=5),
        lambda t, u: index.ids(t, u),
        lambda t, u: index.delete(t, u, [pid(1)]),
        lambda t, u: index.upsert([point(2, basis(0), tenant=t, user=u)]),
        lambda t, u: index.search_keywords(t, u, sparse_query("coffee"), limit=5),
    ):
        with pytest.raises(ValueError, match="tenant_id"):
            call(bad, USER)
        with pytest.raises(ValueError, match="user_id"):
            call(TENANT, bad)
    assert index.count() == 1


def test_malformed_points_are_rejected(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="UUID"):
        index.upsert([IndexPoint(id="alice", tenant_id=TENANT, user_id=USER, vector=basis(0))])
    with pytest.raises(ValueError, match="dimensions"):
        index.upsert([IndexPoint(id=pid(1), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM - 1))])
    with pytest.raises(ValueError, match="contradicts"):
        index.upsert(
            [
                IndexPoint(
                    id=pid(1), tenant_id=TENANT, user_id=USER, vector=basis(0), payload={"user_id": "bob"}
                )
            ]
        )
    with pytest.raises(ValueError, match="dimensions"):
        index.search(TENANT, USER, [1.0] * (DIM + 1), limit=1)
    assert index.count() == 0


def test_ties_are_ordered_by_id(index: VectorIndex) -> None:
    # Inserted in reverse id order, with equal scores reached through different vectors too.
    tied = [point(n, basis(0, scale=float(n))) for n in range(9, 0, -1)]
    index.upsert([*tied, point(20, basis(1)), point(21, [1.0, 1.0, 0, 0, 0, 0, 0, 0])])

    first = index.search(TENANT, USER, basis(0), limit=4)
    assert [h.id for h in first] == [pid(n) for n in range(1, 5)]
    assert all(h.score == pytest.approx(1.0, abs=1e-5) for h in first)

    everything = index.search(TENANT, USER, basis(0), limit=20)
    assert [h.id for h in everything] == [*(pid(n) for n in range(1, 10)), pid(21), pid(20)]
    assert index.search(TENANT, USER, basis(0), limit=20) == everything


def test_unensured_index_reads_empty_and_refuses_writes(blank: VectorIndex) -> None:
    assert blank.search(TENANT, USER, basis(0), limit=5) == []
    assert blank.search_keywords(TENANT, USER, sparse_query("coffee"), limit=5) == []
    assert blank.ids(TENANT, USER) == set()
    assert blank.count() == 0
    blank.delete(TENANT, USER, [pid(1)])
    with pytest.raises(IndexUnavailable, match="ensure"):
        blank.upsert([point(1, basis(0))])


def test_optimize_keeps_every_answer(index: VectorIndex) -> None:
    index.upsert([point(i, basis(i % DIM)) for i in range(1, 40)])
    query = [0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    before = index.search(TENANT, USER, query, limit=10)
    assert isinstance(index.optimize(), bool)
    after = index.search(TENANT, USER, query, limit=10)
    assert [h.id for h in after] == [h.id for h in before]
    assert index.count() == 39


def test_payloads_list_one_users_points_and_set_payload_merges_keys(index: VectorIndex) -> None:
    index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2), user="bob")])
    assert index.payloads(TENANT, USER) == {
        pid(1): {"status": "active", "type": "fact", "tenant_id": TENANT, "user_id": USER},
        pid(2): {"status": "active", "type": "fact", "tenant_id": TENANT, "user_id": USER},
    }
    # Merged into the payload; vectors and other keys stay; a missing id, another user's point and
    # an attempt to move a point to another user are all ignored.
    index.set_payload(
        TENANT,
        USER,
        {pid(1): {"score": 1.5, "user_id": "mallory"}, pid(3): {"score": 9.0}, pid(9): {"score": 2.0}},
    )
    mine = index.payloads(TENANT, USER)
    assert mine[pid(1)] == {
        "status": "active",
        "type": "fact",
        "score": 1.5,
        "tenant_id": TENANT,
        "user_id": USER,
    }
    assert "score" not in mine[pid(2)] and pid(9) not in mine
    assert "score" not in index.payloads(TENANT, "bob")[pid(3)]
    assert [h.id for h in index.search(TENANT, USER, basis(0), limit=1)] == [pid(1)]
    assert index.payloads(TENANT, "nobody") == {}


def test_payloads_of_a_blank_index_are_empty(blank: VectorIndex) -> None:
    assert blank.payloads(TENANT, USER) == {}
    blank.set_payload(TENANT, USER, {pid(1): {"score": 1.0}})  # nothing to update, no error
