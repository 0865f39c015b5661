"""One contract for every VectorIndex: the embedded engine, the server client and the test fake.

The server adapter runs against qdrant-client's local mode (":memory:"), which shares the client
API with a real server; it is a compatibility check, not an engine test.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient, models
from qdrant_edge import Distance, EdgeConfig, EdgeShard, EdgeVectorParams

from shared.ports import EmbeddingModelMismatch, IndexPoint, IndexUnavailable, SparseTerms, VectorIndex
from shared.recall.sparse import AVERAGE_LENGTH, K1, B, sparse_document, sparse_query
from tests.support.fake_index import FakeVectorIndex
from workers.index import UNRECORDED
from workers.index.edge import EdgeVectorIndex
from workers.index.server import QdrantServerIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

DIM = 8
MODEL = "test-model-a"
OTHER_MODEL = "test-model-b"
TENANT = "t1"
USER = "alice"
REPO_ROOT = Path(__file__).resolve().parents[2]


def pid(n: int) -> str:
    """A readable, sortable point id: pid(1) < pid(2) < ... as UUID text."""
    return str(uuid.UUID(int=n))


def basis(i: int, scale: float = 1.0) -> list[float]:
    return [scale if k == i else 0.0 for k in range(DIM)]


def point(
    n: int,
    vector: list[float],
    *,
    tenant: str = TENANT,
    user: str = USER,
    status: str = "active",
    type_: str = "fact",
) -> IndexPoint:
    return IndexPoint(
        id=pid(n), tenant_id=tenant, user_id=user, vector=vector, payload={"status": status, "type": type_}
    )


def _edge(tmp_path: Path) -> EdgeVectorIndex:
    return EdgeVectorIndex(tmp_path / "shard")


def _server(tmp_path: Path) -> QdrantServerIndex:
    return QdrantServerIndex(QdrantClient(":memory:"), "test")


def _fake(tmp_path: Path) -> FakeVectorIndex:
    return FakeVectorIndex()


FACTORIES: dict[str, Callable[[Path], VectorIndex]] = {"edge": _edge, "server": _server, "fake": _fake}


@pytest.fixture(params=sorted(FACTORIES))
def blank(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    """An index that was never ensured."""
    index = FACTORIES[request.param](tmp_path)
    yield index
    index.close()


@pytest.fixture
def index(blank: VectorIndex) -> VectorIndex:
    blank.ensure(DIM, MODEL)
    return blank


# ---- the contract ---------------------------------------------------------------------------------


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


# Users and tenants that must never see each other's points: look-alikes differ by one character,
# by case or by a trailing space; the last looks like a query injection and must just match nothing.
SCOPES = [
    ("t1", "alice"),
    ("t1", "alice2"),
    ("t1", "Alice"),
    ("t1", "alice "),
    ("t2", "alice"),
    ("t10", "alice"),
]


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
    [
        ("t1", "* OR 1=1"),
        ("t1", "alice' OR '1'='1"),
        ("t1", "al"),
        ("t1", "ALICE"),
        ("t", "alice"),
        ("*", "*"),
    ],
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


# ---- keyword search: sparse BM25 terms, IDF by the index ------------------------------------------


def text_point(
    n: int,
    text: str | None,
    *,
    tenant: str = TENANT,
    user: str = USER,
    status: str = "active",
) -> IndexPoint:
    """A point whose keyword terms come from ``text`` (None: a point without terms)."""
    return IndexPoint(
        id=pid(n),
        tenant_id=tenant,
        user_id=user,
        vector=basis(n % DIM),
        payload={"status": status, "type": "fact"},
        sparse=None if text is None else sparse_document(text),
    )


def keyword_ids(
    index: VectorIndex, text: str, *, tenant: str = TENANT, user: str = USER, **kw: object
) -> list[str]:
    return [h.id for h in index.search_keywords(tenant, user, sparse_query(text), limit=10, **kw)]  # type: ignore[arg-type]


def idf(df: int, n: int) -> float:
    """Qdrant's IDF modifier."""
    return math.log((n - df + 0.5) / (df + 0.5) + 1)


def tf_weight(tf: int, length: int) -> float:
    return tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / AVERAGE_LENGTH))


DOCS = {
    1: "我喜欢喝咖啡，尤其是拿铁",
    2: "生产环境部署端口是8443",
    3: "I love drinking coffee every morning",
    4: "The staging deploy port is 9000",
    5: "周末去爬山",
}


def test_keywords_find_chinese_and_english_words(index: VectorIndex) -> None:
    index.upsert([text_point(n, text) for n, text in DOCS.items()])

    assert keyword_ids(index, "咖啡") == [pid(1)]
    assert keyword_ids(index, "拿铁咖啡") == [pid(1)]
    assert keyword_ids(index, "端口") == [pid(2)]
    assert keyword_ids(index, "8443") == [pid(2)]
    assert keyword_ids(index, "Coffee?") == [pid(3)]
    assert keyword_ids(index, "which deploy port") == [pid(4)]
    assert set(keyword_ids(index, "coffee 咖啡")) == {pid(1), pid(3)}
    assert keyword_ids(index, "爬山") == [pid(5)]
    assert keyword_ids(index, "tea 茶") == []
    [hit] = index.search_keywords(TENANT, USER, sparse_query("咖啡"), limit=10)
    assert hit.payload == {"tenant_id": TENANT, "user_id": USER, "status": "active", "type": "fact"}
    assert hit.score > 0


def test_keywords_rarer_term_ranks_higher_with_idf_of_this_user_only(index: VectorIndex) -> None:
    # For alice "apple" is common (4 of 5 points) and "kiwi" rare (1 of 5); for bob (same tenant)
    # and for alice of another tenant it is the reverse. A corpus wider than the tenant's user
    # would make kiwi the common word and put the apple points first.
    alice = [text_point(1, "apple"), text_point(2, "kiwi")]
    alice += [text_point(n, f"apple {extra}") for n, extra in [(3, "pie"), (4, "juice"), (5, "tree")]]
    bob = [text_point(100 + n, "kiwi", user="bob") for n in range(20)]
    elsewhere = [text_point(200 + n, "kiwi", tenant="t2") for n in range(20)]
    index.upsert([*alice, *bob, *elsewhere])

    hits = index.search_keywords(TENANT, USER, sparse_query("apple kiwi"), limit=10)

    assert [h.id for h in hits] == [pid(2), pid(1), pid(3), pid(4), pid(5)]
    # The exact BM25 score, the same in every implementation: IDF over alice's 5 points.
    assert hits[0].score == pytest.approx(idf(1, 5) * tf_weight(1, 1), rel=1e-5)
    assert hits[1].score == pytest.approx(idf(4, 5) * tf_weight(1, 1), rel=1e-5)
    # Longer texts weigh a term less (length normalisation): "apple pie" < "apple".
    assert hits[2].score == pytest.approx(idf(4, 5) * tf_weight(1, 2), rel=1e-5)
    # For bob, kiwi is everywhere: still found, with bob's own statistics.
    assert len(keyword_ids(index, "kiwi", user="bob")) == 10


def test_keywords_repeated_term_saturates(index: VectorIndex) -> None:
    index.upsert([text_point(1, "coffee"), text_point(2, "coffee coffee coffee"), text_point(3, "tea")])

    hits = index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=10)

    assert [h.id for h in hits] == [pid(2), pid(1)]
    assert hits[0].score / hits[1].score == pytest.approx(tf_weight(3, 3) / tf_weight(1, 1), rel=1e-5)
    assert hits[0].score < 3 * hits[1].score


def test_keywords_never_cross_users_or_tenants(index: VectorIndex) -> None:
    # The same text for everyone, so only the filter can keep them apart.
    index.upsert([text_point(n, "咖啡 coffee", tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    for n, (tenant, user) in enumerate(SCOPES, start=1):
        hits = index.search_keywords(tenant, user, sparse_query("coffee"), limit=10)
        assert [h.id for h in hits] == [pid(n)], (tenant, user)
        assert (hits[0].payload["tenant_id"], hits[0].payload["user_id"]) == (tenant, user)
        assert keyword_ids(index, "咖啡", tenant=tenant, user=user) == [pid(n)]


@pytest.mark.parametrize(
    ("tenant", "user"),
    [
        ("t1", "* OR 1=1"),
        ("t1", "alice' OR '1'='1"),
        ("t1", "al"),
        ("t1", "ALICE"),
        ("t", "alice"),
        ("*", "*"),
    ],
)
def test_keywords_unknown_or_injection_looking_scope_finds_nothing(
    index: VectorIndex, tenant: str, user: str
) -> None:
    index.upsert([text_point(n, "coffee", tenant=t, user=u) for n, (t, u) in enumerate(SCOPES, start=1)])

    assert keyword_ids(index, "coffee", tenant=tenant, user=user, statuses=("active", "superseded")) == []


def test_keywords_status_filter(index: VectorIndex) -> None:
    index.upsert(
        [
            text_point(1, "coffee", status="active"),
            text_point(2, "coffee", status="superseded"),
            text_point(3, "coffee", status="deleted"),
        ]
    )

    assert keyword_ids(index, "coffee") == [pid(1)]
    assert keyword_ids(index, "coffee", statuses=("active", "superseded")) == [pid(1), pid(2)]
    assert keyword_ids(index, "coffee", statuses="superseded") == [pid(2)]
    assert keyword_ids(index, "coffee", statuses=()) == []


def test_keywords_ties_are_ordered_by_id_and_limit_caps(index: VectorIndex) -> None:
    index.upsert([text_point(n, "coffee beans") for n in range(9, 0, -1)])

    first = index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=4)
    assert [h.id for h in first] == [pid(n) for n in range(1, 5)]
    everything = index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=20)
    assert [h.id for h in everything] == [pid(n) for n in range(1, 10)]
    assert index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=20) == everything
    assert index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=0) == []


def test_keywords_skip_points_without_terms(index: VectorIndex) -> None:
    index.upsert(
        [
            text_point(1, "coffee"),
            text_point(2, None),  # no sparse vector at all
            text_point(3, "the 的 我"),  # only stopwords: no terms either
            text_point(4, "coffee"),
        ]
    )
    assert keyword_ids(index, "coffee") == [pid(1), pid(4)]
    # Points without terms are outside the IDF corpus too: N = 2, df = 2.
    [hit, _] = index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=10)
    assert hit.score == pytest.approx(idf(2, 2) * tf_weight(1, 1), rel=1e-5)

    # Re-upserting without terms drops the terms (the vector search still finds the point).
    index.upsert([text_point(4, None)])
    assert keyword_ids(index, "coffee") == [pid(1)]
    assert pid(4) in {h.id for h in index.search(TENANT, USER, basis(4), limit=10)}
    [hit] = index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=10)
    assert hit.score == pytest.approx(idf(1, 1) * tf_weight(1, 1), rel=1e-5)


def test_keywords_empty_query_finds_nothing(index: VectorIndex) -> None:
    index.upsert([text_point(1, "the coffee 的咖啡")])

    assert index.search_keywords(TENANT, USER, SparseTerms((), ()), limit=10) == []
    assert index.search_keywords(TENANT, USER, sparse_query(""), limit=10) == []
    assert index.search_keywords(TENANT, USER, sparse_query("the 的 ?!"), limit=10) == []


def test_keywords_delete_removes_the_point(index: VectorIndex) -> None:
    index.upsert([text_point(1, "coffee"), text_point(2, "coffee", user="bob")])

    index.delete(TENANT, "bob", [pid(1)])
    assert keyword_ids(index, "coffee") == [pid(1)]
    index.delete(TENANT, USER, [pid(1)])
    assert keyword_ids(index, "coffee") == []
    assert keyword_ids(index, "coffee", user="bob") == [pid(2)]


def test_keywords_malformed_terms_are_rejected(index: VectorIndex) -> None:
    bad_terms = [
        SparseTerms((1, 2), (1.0,)),
        SparseTerms((-1,), (1.0,)),
        SparseTerms((2**32,), (1.0,)),
        SparseTerms((3, 3), (1.0, 1.0)),
        SparseTerms((3,), (float("nan"),)),
    ]
    for terms in bad_terms:
        with pytest.raises(ValueError, match="sparse"):
            index.upsert(
                [IndexPoint(id=pid(1), tenant_id=TENANT, user_id=USER, vector=basis(0), sparse=terms)]
            )
        with pytest.raises(ValueError, match="sparse"):
            index.search_keywords(TENANT, USER, terms, limit=5)
    assert index.count() == 0


def test_keywords_accept_unsorted_terms_and_lists(index: VectorIndex) -> None:
    # A SparseTerms that crossed JSON arrives as two lists; order of the pairs does not matter.
    terms = sparse_document("coffee beans")
    shuffled = SparseTerms(tuple(reversed(terms.indices)), tuple(reversed(terms.values)))
    index.upsert(
        [
            IndexPoint(
                id=pid(1),
                tenant_id=TENANT,
                user_id=USER,
                vector=basis(0),
                payload={"status": "active"},
                sparse=shuffled,
            )
        ]
    )

    query = sparse_query("beans")
    as_lists = SparseTerms(list(query.indices), list(query.values))  # type: ignore[arg-type]
    assert [h.id for h in index.search_keywords(TENANT, USER, as_lists, limit=5)] == [pid(1)]


def test_edge_keyword_terms_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([text_point(1, "我喜欢喝咖啡"), text_point(2, "coffee")])
    first.close()

    second = EdgeVectorIndex(path)
    try:
        assert keyword_ids(second, "咖啡") == [pid(1)]
    finally:
        second.close()


def test_edge_shard_without_sparse_vector_asks_for_reindex(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    # A shard as an older cuemem made it: dense vectors only.
    EdgeShard.create(
        str(path), EdgeConfig(vectors={"dense": EdgeVectorParams(size=DIM, distance=Distance.Cosine)})
    ).close()
    (tmp_path / "shard.meta.json").write_text(json.dumps({"model": MODEL, "dim": DIM}))
    index = EdgeVectorIndex(path)
    try:
        index.ensure(DIM, MODEL)
        index.upsert([text_point(1, "coffee")])  # stored without its terms, not refused
        assert index.ids(TENANT, USER) == {pid(1)}
        with pytest.raises(IndexUnavailable, match="cuemem reindex"):
            index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=5)

        index.reset(DIM, MODEL)
        index.upsert([text_point(1, "coffee")])
        assert keyword_ids(index, "coffee") == [pid(1)]
    finally:
        index.close()


# ---- embedded engine: ownership and persistence ---------------------------------------------------

_PROBE = """
import json, sys
from pathlib import Path
from shared.ports import IndexUnavailable
from workers.index.edge import EdgeVectorIndex
index = EdgeVectorIndex(Path(sys.argv[1]))
try:
    print(json.dumps({"count": index.count(), "ids": sorted(index.ids("t1", "alice"))}))
except IndexUnavailable as exc:
    print(json.dumps({"unavailable": str(exc)}))
finally:
    index.close()
"""


def _probe_other_process(path: Path) -> dict[str, object]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_edge_second_process_is_refused_and_owner_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    owner = EdgeVectorIndex(path)
    try:
        owner.ensure(DIM, MODEL)
        owner.upsert([point(1, basis(0))])

        refused = _probe_other_process(path)

        message = str(refused["unavailable"])
        assert f"{path}.lock" in message
        assert f"pid {os.getpid()}" in message
        # The refused attempt never touched the shard, so the owner's next flush still works.
        owner.upsert([point(2, basis(1))])
        assert owner.ids(TENANT, USER) == {pid(1), pid(2)}
    finally:
        owner.close()

    assert _probe_other_process(path) == {"count": 2, "ids": [pid(1), pid(2)]}


def test_edge_second_instance_in_same_process_is_refused(tmp_path: Path) -> None:
    first = EdgeVectorIndex(tmp_path / "shard")
    second = EdgeVectorIndex(tmp_path / "shard")
    try:
        first.ensure(DIM, MODEL)
        with pytest.raises(IndexUnavailable, match="owned by another process"):
            second.count()
    finally:
        first.close()
        second.close()


def test_edge_opens_lazily_and_close_releases(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    idle = EdgeVectorIndex(path)  # constructed, never used: must not own anything yet
    try:
        writer = EdgeVectorIndex(path)
        writer.ensure(DIM, MODEL)
        writer.upsert([point(1, basis(0))])
        writer.close()
        assert idle.ids(TENANT, USER) == {pid(1)}
    finally:
        idle.close()


def test_edge_data_and_model_persist_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([point(1, basis(0)), point(2, basis(1), status="superseded")])
    first.delete(TENANT, USER, [pid(2)])
    first.close()

    second = EdgeVectorIndex(path)
    try:
        # No ensure(): a reopened shard serves reads and writes with the recorded dim.
        assert [h.id for h in second.search(TENANT, USER, basis(0), limit=5)] == [pid(1)]
        with pytest.raises(ValueError, match="dimensions"):
            second.upsert([IndexPoint(id=pid(3), tenant_id=TENANT, user_id=USER, vector=[1.0] * (DIM + 1))])
        with pytest.raises(EmbeddingModelMismatch):
            second.ensure(DIM, OTHER_MODEL)
        second.ensure(DIM, MODEL)
        assert second.count() == 1
    finally:
        second.close()
    assert json.loads((tmp_path / "shard.meta.json").read_text()) == {"model": MODEL, "dim": DIM}


def test_edge_shard_without_meta_is_adopted_only_when_empty(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    meta = tmp_path / "shard.meta.json"
    index = EdgeVectorIndex(path)
    try:
        index.ensure(DIM, MODEL)
        meta.unlink()
        index.ensure(DIM, OTHER_MODEL)  # empty: nothing to mix up
        index.upsert([point(1, basis(0))])
        meta.unlink()
        with pytest.raises(EmbeddingModelMismatch) as excinfo:
            index.ensure(DIM, OTHER_MODEL)
        assert excinfo.value.stored == UNRECORDED
    finally:
        index.close()


def test_edge_never_creates_in_or_wipes_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("precious")
    index = EdgeVectorIndex(foreign)
    try:
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.ensure(DIM, MODEL)
        with pytest.raises(IndexUnavailable, match="neither an empty directory"):
            index.reset(DIM, MODEL)
    finally:
        index.close()
    assert sorted(p.name for p in foreign.iterdir()) == ["keep.txt"]


# ---- the embedded index's files deleted under it (docs/RELIABILITY.md, "Consistency") -------------


class Losses:
    """What the adapter reports through ``on_lost`` (the composition root sends a reconcile)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def __call__(self, note: str) -> None:
        self.notes.append(note)


def _meta(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "shard.meta.json").read_text())


def test_edge_files_deleted_under_the_open_index_are_noticed_and_never_answered_from_memory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shard"
    losses = Losses()
    index = EdgeVectorIndex(path, on_lost=losses)
    try:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])
        assert len(index.search(TENANT, USER, basis(0), limit=5)) == 3
        shutil.rmtree(path)
        # The engine would go on answering the three points from memory; the index says it lost them.
        with pytest.raises(IndexUnavailable, match="missing .*vanished while pid"):
            index.search(TENANT, USER, basis(0), limit=5)
        with pytest.raises(IndexUnavailable, match="missing .*vanished while pid"):
            index.search_keywords(TENANT, USER, SparseTerms((1,), (1.0,)), limit=5)
        [note] = losses.notes
        assert "vanished while pid" in note and _meta(tmp_path)["lost"] == note
        assert index.lost() == note
        # Reads that feed a repair see what is left: nothing.
        assert index.ids(TENANT, USER) == set() and index.payloads(TENANT, USER) == {}
        # Writes go on into a new shard; the loss is reported once.
        index.ensure(DIM, MODEL)
        index.upsert([point(4, basis(3))])
        assert index.count() == 1 and losses.notes == [note]
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(3), limit=5)
        # A reconciliation that ran to its end after the note clears it, not after another one.
        assert index.mark_rebuilt("an older note") is False
        index.upsert([point(1, basis(0)), point(2, basis(1)), point(3, basis(2))])
        assert index.mark_rebuilt(note) is True
        assert [h.id for h in index.search(TENANT, USER, basis(3), limit=1)] == [pid(4)]
        assert index.lost() is None and _meta(tmp_path) == {"model": MODEL, "dim": DIM}
    finally:
        index.close()
    reopened = EdgeVectorIndex(path)
    try:
        assert reopened.ids(TENANT, USER) == {pid(1), pid(2), pid(3), pid(4)}
    finally:
        reopened.close()


def test_edge_write_into_vanishing_files_is_transient_not_an_engine_error(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    losses = Losses()
    index = EdgeVectorIndex(path, on_lost=losses)
    try:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0))])
        # Halfway through a deletion: the segments' files are gone, the directories still there.
        for segment in (path / "segments").iterdir():
            shutil.rmtree(segment)
            segment.mkdir()
        with pytest.raises(IndexUnavailable, match="could not write"):
            index.upsert([point(2, basis(1))])
        shutil.rmtree(path)  # the deletion finishes; the task's retry:
        index.ensure(DIM, MODEL)
        index.upsert([point(2, basis(1))])
        assert index.ids(TENANT, USER) == {pid(2)} and len(losses.notes) == 1
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(1), limit=5)
    finally:
        index.close()  # a close after the loss releases the lock (no flush into vanished files)
    reopened = EdgeVectorIndex(path)
    try:
        assert reopened.ids(TENANT, USER) == {pid(2)}
    finally:
        reopened.close()


def test_edge_set_payload_delete_and_close_after_the_files_vanished(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    index = EdgeVectorIndex(path)
    index.ensure(DIM, MODEL)
    index.upsert([point(1, basis(0))])
    shutil.rmtree(path)
    index.set_payload(TENANT, USER, {pid(1): {"score": 2.0}})  # no shard: nothing to update
    index.delete(TENANT, USER, [pid(1)])
    index.close()  # before the fix: the flush into vanished files raised and kept the lock
    other = EdgeVectorIndex(path)
    try:
        with pytest.raises(IndexUnavailable, match="missing although shard.meta.json records it"):
            other.search(TENANT, USER, basis(0), limit=5)
    finally:
        other.close()


def test_edge_directory_replaced_under_the_open_index_is_reloaded_and_noted(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    index = EdgeVectorIndex(path)
    try:
        index.ensure(DIM, MODEL)
        index.upsert([point(1, basis(0))])
        index.close()
        shutil.copytree(path, tmp_path / "backup")
        index.upsert([point(2, basis(1))])
        # A backup restored under the running owner: an older copy, in a new directory.
        shutil.rmtree(path)
        shutil.copytree(tmp_path / "backup", path)
        assert index.ids(TENANT, USER) == {pid(1)}
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(0), limit=5)
    finally:
        index.close()


def test_edge_meta_without_its_shard_is_noted_at_ensure_and_cleared_by_reset(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.upsert([point(1, basis(0))])
    first.close()
    shutil.rmtree(path)  # deleted while no process had it open
    losses = Losses()
    index = EdgeVectorIndex(path, on_lost=losses)
    try:
        index.ensure(DIM, MODEL)  # the index worker starting: an empty shard, and the loss noted
        [note] = losses.notes
        assert "was missing although shard.meta.json records it" in note and index.lost() == note
        index.upsert([point(2, basis(1))])
        with pytest.raises(IndexUnavailable, match="incomplete"):
            index.search(TENANT, USER, basis(1), limit=5)
        index.reset(DIM, MODEL)  # `cuemem reindex` starts from an empty index and fills it all
        assert index.lost() is None and index.search(TENANT, USER, basis(1), limit=5) == []
        assert len(losses.notes) == 1
    finally:
        index.close()


def test_edge_lost_notes_a_missing_shard_for_the_reconciliation_about_to_run(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    first = EdgeVectorIndex(path)
    first.ensure(DIM, MODEL)
    first.close()
    shutil.rmtree(path)
    index = EdgeVectorIndex(path)
    try:
        note = index.lost()
        assert note is not None and _meta(tmp_path)["lost"] == note
        index.ensure(DIM, MODEL)  # the reconciliation writes: the note stays until it finished
        assert index.lost() == note and index.mark_rebuilt(note)
        assert EdgeVectorIndex(tmp_path / "never").lost() is None
    finally:
        index.close()


def test_edge_loss_noticed_by_a_container_sends_a_reconciliation(tmp_path: Path) -> None:
    from shared.queues import TaskName
    from shared.settings import Settings
    from shared.storage import FollowUp
    from workers.bootstrap import build_container

    sent: list[FollowUp] = []
    settings = Settings(
        data_dir=tmp_path, broker_url="redis://127.0.0.1:1/0", database_url="postgresql://x/y"
    )
    c = build_container(settings, uow=lambda: None, dispatch=sent.extend)  # type: ignore[arg-type,return-value]
    try:
        c.index().ensure(DIM, MODEL)
        c.index().upsert([point(1, basis(0))])
        shutil.rmtree(tmp_path / "qdrant")
        with pytest.raises(IndexUnavailable, match="vanished while pid"):
            c.index().search(TENANT, USER, basis(0), limit=5)
        assert sent == [FollowUp(TaskName.RECONCILE.value, ())]
    finally:
        c.close()


def _count_in_forked_child(index: EdgeVectorIndex, out: multiprocessing.Queue[str]) -> None:
    try:
        index.count()
        out.put("opened")
    except IndexUnavailable as exc:
        out.put(f"unavailable: {exc}")


@pytest.mark.skipif(sys.platform != "linux", reason="fork() semantics")
def test_edge_index_opened_before_fork_is_refused_in_child(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "shard")
    index.ensure(DIM, MODEL)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[str] = ctx.Queue()
    child = ctx.Process(target=_count_in_forked_child, args=(index, out))
    try:
        child.start()
        answer = out.get(timeout=30)
        child.join(timeout=30)
        assert answer.startswith("unavailable:") and "before a fork" in answer
        index.upsert([point(1, basis(0))])
        assert index.count() == 1
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        index.close()


# ---- server client: the model record in collection metadata ---------------------------------------


def _bare_collection(client: QdrantClient, dim: int = DIM) -> None:
    """A collection made by hand, without cuemem's metadata record."""
    client.create_collection(
        "test", vectors_config={"dense": models.VectorParams(size=dim, distance=models.Distance.COSINE)}
    )


def test_server_records_model_in_collection_metadata() -> None:
    client = QdrantClient(":memory:")
    index = QdrantServerIndex(client, "test")
    index.ensure(DIM, MODEL)

    assert client.get_collection("test").config.metadata == {"model": MODEL, "dim": DIM}
    index.close()


def test_server_adopts_only_an_empty_unrecorded_collection() -> None:
    client = QdrantClient(":memory:")
    _bare_collection(client)
    index = QdrantServerIndex(client, "test")
    index.ensure(DIM, MODEL)
    assert client.get_collection("test").config.metadata == {"model": MODEL, "dim": DIM}

    client.delete_collection("test")
    _bare_collection(client)
    client.upsert("test", [models.PointStruct(id=pid(1), vector={"dense": basis(0)}, payload={})])
    with pytest.raises(EmbeddingModelMismatch) as excinfo:
        QdrantServerIndex(client, "test").ensure(DIM, MODEL)
    assert excinfo.value.stored == UNRECORDED
    index.close()


def test_server_collection_without_sparse_vector_asks_for_reindex() -> None:
    client = QdrantClient(":memory:")
    _bare_collection(client)  # as an older cuemem (or a hand) made it: dense vectors only
    index = QdrantServerIndex(client, "test")
    index.ensure(DIM, MODEL)

    index.upsert([text_point(1, "coffee")])  # stored without its terms, not refused
    assert index.ids(TENANT, USER) == {pid(1)}
    with pytest.raises(IndexUnavailable, match="cuemem reindex"):
        index.search_keywords(TENANT, USER, sparse_query("coffee"), limit=5)

    index.reset(DIM, MODEL)
    index.upsert([text_point(1, "coffee")])
    assert keyword_ids(index, "coffee") == [pid(1)]
    index.close()


def test_server_declares_the_sparse_vector_with_idf() -> None:
    client = QdrantClient(":memory:")
    QdrantServerIndex(client, "test").ensure(DIM, MODEL)

    sparse = client.get_collection("test").config.params.sparse_vectors or {}
    assert sparse["bm25"].modifier == models.Modifier.IDF


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
