"""The keyword-search part of the VectorIndex contract: sparse BM25 terms, with the IDF computed
by the index over one user's points, on every VectorIndex (and the embedded shard's persistence).
"""

from __future__ import annotations

import json
import math
from contextlib import closing
from pathlib import Path

import pytest
from qdrant_edge import Distance, EdgeConfig, EdgeShard, EdgeVectorParams

from shared.language.sparse import sparse_document, sparse_query
from shared.ports import IndexPoint, SparseTerms, VectorIndex
from tests.support.index_points import (
    DIM,
    FOREIGN_SCOPES,
    MODEL,
    SCOPES,
    TENANT,
    USER,
    basis,
    check_dense_only_collection_asks_for_reindex,
    keyword_ids,
    pid,
    text_point,
)
from workers.index.edge import EdgeVectorIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")


def idf(df: int, n: int) -> float:
    """Qdrant's IDF modifier."""
    return math.log((n - df + 0.5) / (df + 0.5) + 1)


def tf_weight(tf: int, length: int) -> float:
    # BM25 as documented in docs/ARCHITECTURE.md: k1 = 1.2, b = 0.75, an average of 12 terms
    # (literals, so a wrong parameter in shared/language/sparse.py fails here).
    return tf * (1.2 + 1) / (tf + 1.2 * (1 - 0.75 + 0.75 * length / 12.0))


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
    FOREIGN_SCOPES,
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
    with closing(EdgeVectorIndex(path)) as index:
        check_dense_only_collection_asks_for_reindex(index)
