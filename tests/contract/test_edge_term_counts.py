"""The embedded index keeps each searched user's document frequencies itself (workers/index/term_counts.py)
instead of asking the engine to count them on every search. Its keyword scores must stay those of
the user's own IDF through every write: checked here against the in-memory fake, which counts the
user's points afresh on each search, over a seeded run of upserts, replacements, deletes, status
changes, a reset and a reopen, with look-alike tenants and users side by side."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.language.sparse import sparse_query
from shared.ports import VectorIndex
from tests.support.fake_index import FakeVectorIndex
from tests.support.index_points import DIM, MODEL, pid, text_point
from workers.index.edge import EdgeVectorIndex
from workers.index.term_counts import TermCounts, idf

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")

SCOPES = [("t1", "u1"), ("t1", "u10"), ("t1:x", "u1"), ("t1", "a:b"), ("t2", "u1")]
WORDS = ["coffee", "tea", "port", "deploy", "kiwi", "apple", "咖啡", "端口", "爬山", "拿铁"]


def _scope_of(n: int) -> tuple[str, str]:
    return SCOPES[n % len(SCOPES)]


def _text(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.1:
        return None  # no terms: outside the IDF corpus
    if roll < 0.15:
        return "the 的"  # only stopwords: no terms either
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def _same_keyword_answers(
    edge: VectorIndex, fake: VectorIndex, rng: random.Random, step: str, words: str | None = None
) -> None:
    for tenant, user in SCOPES:
        query = sparse_query(words or " ".join(rng.sample(WORDS, rng.randint(1, 3))))
        for statuses in (("active",), ("active", "superseded")):
            got = edge.search_keywords(tenant, user, query, limit=50, statuses=statuses)
            want = fake.search_keywords(tenant, user, query, limit=50, statuses=statuses)
            assert [h.id for h in got] == [h.id for h in want], (step, tenant, user)
            assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-4), (
                step,
                tenant,
                user,
            )


@pytest.mark.parametrize("hold_from", [0, 10**9], ids=["counts-held", "engine-counts"])
def test_edge_keyword_scores_follow_every_write_with_the_users_own_idf(
    tmp_path: Path, hold_from: int
) -> None:
    rng = random.Random(32)
    edge = EdgeVectorIndex(tmp_path / "shard", hold_counts_from=hold_from)
    fake = FakeVectorIndex()
    for index in (edge, fake):
        index.ensure(DIM, MODEL)
    try:
        for step in range(120):
            op = rng.random()
            if op < 0.55:
                # Ids are reused, so most upserts replace a point's terms; the last of two wins.
                ids = [rng.randint(1, 40) for _ in range(rng.randint(1, 6))]
                batch = []
                for n in ids:
                    # Now and then a point moves to another user: its terms leave the first's counts.
                    tenant, user = _scope_of(n) if rng.random() < 0.9 else rng.choice(SCOPES)
                    batch.append(text_point(n, _text(rng), tenant=tenant, user=user))
                for index in (edge, fake):
                    index.upsert(batch)
            elif op < 0.75:
                # Deletes name ids of the scope and of others (which must stay).
                tenant, user = rng.choice(SCOPES)
                ids = [pid(rng.randint(1, 40)) for _ in range(rng.randint(1, 4))]
                for index in (edge, fake):
                    index.delete(tenant, user, ids)
            elif op < 0.85:
                n = rng.randint(1, 40)
                tenant, user = _scope_of(n)
                status = rng.choice(["active", "superseded"])
                for index in (edge, fake):
                    index.set_payload(tenant, user, {pid(n): {"status": status}})
            elif op < 0.88:
                edge.close()  # counts are rebuilt from the shard on the next search
            _same_keyword_answers(edge, fake, rng, f"step {step}")
        # Every user's counts are held now, with "coffee" in most of them.
        _same_keyword_answers(edge, fake, rng, "before reset", words="coffee tea")
        assert edge.count() > 20  # the run left points to search
        edge.reset(DIM, MODEL)
        fake.reset(DIM, MODEL)
        edge.upsert(
            [text_point(1, "coffee", tenant="t1", user="u1"), text_point(6, "tea", tenant="t1", user="u1")]
        )
        fake.upsert(
            [text_point(1, "coffee", tenant="t1", user="u1"), text_point(6, "tea", tenant="t1", user="u1")]
        )
        _same_keyword_answers(edge, fake, rng, "after reset", words="coffee tea")
    finally:
        edge.close()


def test_term_counts_drop_the_least_recently_searched_user_beyond_the_bound() -> None:
    counts = TermCounts(max_terms=5)
    loads: list[str] = []

    def loader(name: str, docs: list[list[int]]) -> Callable[[], Iterator[list[int]]]:
        def load() -> Iterator[list[int]]:
            loads.append(name)
            return iter(docs)

        return load

    a, b = ("t", "a"), ("t", "b")
    load_a, load_b = loader("a", [[1, 2], [2, 3]]), loader("b", [[7], [8]])
    ln2 = idf(0, 0)
    assert counts.query_weights(a, [2, 5], [1.0, 1.0], load_a) == pytest.approx(
        [idf(2, 2) / ln2, idf(2, 0) / ln2]
    )
    assert counts.query_weights(b, [7], [3.0], load_b) == pytest.approx([3.0 * idf(2, 1) / ln2])
    assert a in counts and b in counts  # 3 + 2 terms: within the bound
    counts.apply([], [(b, [9])])  # b's new point: 6 terms, so a (searched before b) goes
    assert a not in counts
    assert counts.query_weights(b, [9, 7], [1.0, 1.0], load_b) == pytest.approx(
        [idf(3, 1) / ln2, idf(3, 1) / ln2]
    )
    # a is counted afresh when searched again, and b, now the least recent, goes.
    assert counts.query_weights(a, [1], [2.0], load_a) == pytest.approx([2.0 * idf(2, 1) / ln2])
    assert b not in counts
    counts.apply([(b, [7])], [])  # a write to a user whose counts are not held changes nothing
    assert b not in counts and loads == ["a", "b", "a"]
    counts.apply([(a, [1, 2])], [])  # a's point removed
    assert counts.query_weights(a, [2], [1.0], load_a) == pytest.approx([idf(1, 1) / ln2])
    # Alone over the bound, the most recent user stays through its writes and searches.
    counts.apply([], [(a, [10, 11, 12, 13, 14])])
    assert a in counts
    counts.query_weights(a, [10], [1.0], load_a)
    assert loads == ["a", "b", "a"]


def test_edge_keeps_counts_only_for_users_of_enough_points(tmp_path: Path) -> None:
    """Below ``hold_counts_from`` points the engine counts (cheap there); from it on, the index."""
    edge = EdgeVectorIndex(tmp_path / "shard", hold_counts_from=5)
    fake = FakeVectorIndex()
    for index in (edge, fake):
        index.ensure(DIM, MODEL)
    try:
        for n in range(1, 9):
            for index in (edge, fake):
                index.upsert([text_point(n, "coffee tea" if n % 2 else "coffee", tenant="t1", user="u1")])
            _same_keyword_answers(edge, fake, random.Random(n), f"{n} points", words="coffee tea")
            assert (("t1", "u1") in edge._counts) == (n >= 5), n
        assert ("t1", "u10") not in edge._counts
    finally:
        edge.close()


def test_a_user_of_several_pages_is_listed_and_counted_whole(tmp_path: Path) -> None:
    """The shard is read page by page (1,024 points a page for listings, 4,096 for the counts):
    a user larger than a page is listed whole and every point of it is counted."""
    edge = EdgeVectorIndex(tmp_path / "shard", hold_counts_from=0)
    fake = FakeVectorIndex()
    rng = random.Random(7)
    batch = [text_point(n, _text(rng) or "coffee", tenant="t1", user="u1") for n in range(1, 4_501)]
    batch += [text_point(n, "coffee", tenant="t1:x", user="u1") for n in range(5_001, 5_011)]
    for index in (edge, fake):
        index.ensure(DIM, MODEL)
        index.upsert(batch)
    try:
        assert edge.ids("t1", "u1") == {pid(n) for n in range(1, 4_501)}
        assert edge.ids("t1:x", "u1") == {pid(n) for n in range(5_001, 5_011)}
        _same_keyword_answers(edge, fake, rng, "4,500 points", words="coffee 爬山")
    finally:
        edge.close()
