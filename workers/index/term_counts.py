"""Each user's document frequencies, kept beside the embedded index so keyword search need not count them.

Keyword search scores BM25 with the IDF of the searching user's own points: a word is rare or
common by this user's texts, never by other users' (``edge.EdgeVectorIndex.search_keywords``).
Asked for that IDF (``IdfParams(corpus=<the user's filter>)``), the engine counts, on every
search, how many of the user's points hold each query term: at 200k turns of one user the search
took 5.4 ms p50, against 0.17 ms with the shard's own IDF (docs/BENCHMARKS.md). The process that
owns the shard sees every write to it, so it can keep those counts instead: :class:`TermCounts`
holds, per (tenant, user), the number of points with terms and each term's document frequency,
built from the shard on the user's first keyword search and moved by every upsert and delete after.

The search then weights each query term by the user's IDF itself and asks the engine for the IDF of
an empty corpus, which is the same ``ln 2`` for every term (:data:`EMPTY_CORPUS_IDF`); dividing by
it gives the engine's own per-user scores, to float precision, at a tenth of the cost.

Nothing here is the truth: counts are dropped whenever the shard is swapped, closed, found
vanished or a write fails (or is interrupted), and rebuilt from the shard on the next search. They
are kept only for users with at least :data:`HOLD_FROM` points (below that, the engine's count
costs about a millisecond) and bounded (:data:`MAX_TERMS` entries over all users, least recently
searched users dropped first). Counting a user takes a scroll of its points under the index's
lock: about 0.9 s at 200k points, once per user per process (while it runs, the index's other
calls wait).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence

from qdrant_edge import CountRequest, EdgeShard, Filter, HasIdCondition, SparseVector

from workers.index.edge_shards import SPARSE, scrolled

# (tenant_id, user_id)
Scope = tuple[str, str]
# A point's scope and its sparse term indices (None: the point carries no sparse vector).
PointTerms = tuple[Scope, Sequence[int] | None]

# The engine's IDF of a term over a corpus of N points, n of which hold it (Qdrant's BM25 IDF).
# An empty corpus gives ln(1 + 0.5 / 0.5) = ln 2 for every term.
EMPTY_CORPUS_IDF = math.log(2.0)
# A corpus filter that matches no point, at no cost.
EMPTY_CORPUS = Filter(must=[HasIdCondition(set())])

# About 100 bytes an entry: 100 MB at most, however many users search. Only large users are held
# (HOLD_FROM), so this is a few tens of them with a rich vocabulary.
MAX_TERMS = 1_000_000
# Below this many points the engine's own count is cheap (about 1 ms at 20k points, growing with
# the user's points: 5-14 ms at 100k-200k): the counts are kept only from this size on.
HOLD_FROM = 20_000


def idf(points: int, holding: int) -> float:
    """Qdrant's IDF: ln(1 + (N - n + 0.5) / (n + 0.5))."""
    return math.log(1.0 + (points - holding + 0.5) / (holding + 0.5))


class _UserCounts:
    __slots__ = ("df", "points")

    def __init__(self) -> None:
        self.points = 0
        self.df: dict[int, int] = {}

    def add(self, terms: Sequence[int], sign: int) -> None:
        self.points += sign
        df = self.df
        for term in terms:
            left = df.get(term, 0) + sign
            if left > 0:
                df[term] = left
            else:
                df.pop(term, None)


class TermCounts:
    """Document frequencies per (tenant, user). Not thread-safe: the index calls it under its lock."""

    def __init__(self, max_terms: int = MAX_TERMS, hold_from: int = HOLD_FROM) -> None:
        self._max_terms = max_terms
        self.hold_from = hold_from
        self._users: OrderedDict[Scope, _UserCounts] = OrderedDict()
        self._terms = 0

    def __contains__(self, scope: Scope) -> bool:
        return scope in self._users

    def any_held(self) -> bool:
        return bool(self._users)

    def query_weights(
        self, scope: Scope, indices: Sequence[int], values: Sequence[float],
        load: Callable[[], Iterable[Sequence[int]]],
    ) -> list[float]:  # fmt: skip
        """The query's term values times the user's IDF over ``EMPTY_CORPUS_IDF``: searched with an
        empty IDF corpus, these give the scores of a search with the user's own. ``load`` yields
        the term indices of every point of the user that has terms; it is called when the user's
        counts are not held."""
        user = self._users.get(scope)
        if user is None:
            user = _UserCounts()
            for terms in load():
                user.add(terms, +1)
            self._users[scope] = user  # the most recent: never the one evicted
            self._terms += len(user.df)
            self._evict()
        else:
            self._users.move_to_end(scope)
        return [
            value * idf(user.points, user.df.get(term, 0)) / EMPTY_CORPUS_IDF
            for term, value in zip(indices, values, strict=True)
        ]

    def apply(self, removed: Iterable[PointTerms], added: Iterable[PointTerms]) -> None:
        """A write that went through: the points' old terms leave their users' counts, the new come
        in. Only users whose counts are held move; the others are counted afresh when searched."""
        for sign, points in ((-1, removed), (+1, added)):
            for scope, terms in points:
                user = self._users.get(scope)
                if user is None or terms is None:
                    continue
                before = len(user.df)
                user.add(terms, sign)
                self._terms += len(user.df) - before
        self._evict()

    def clear(self) -> None:
        self._users.clear()
        self._terms = 0

    def _evict(self) -> None:
        """The least recently searched users go first; the most recent stays, even alone over the
        bound (dropping it would count it again on its next search)."""
        while self._terms > self._max_terms and len(self._users) > 1:
            _, user = self._users.popitem(last=False)
            self._terms -= len(user.df)


# ---- the keyword query, and the counts' inputs from the shard ------------------------------------


def idf_query(
    counts: TermCounts, shard: EdgeShard, scope: Scope, scope_filter: Filter,
    sparse: tuple[Sequence[int], Sequence[float]],
) -> tuple[list[float], Filter]:  # fmt: skip
    """The query's term weights and the IDF corpus to search with, for scores with the user's own
    IDF: from the held counts (weights times the user's IDF, an empty corpus) when the user is
    large enough to hold them (counted then on first use), else the engine's count over the user's
    points (the values as they are, the user's filter as the corpus). The size is the engine's
    estimate from its payload index (microseconds); it only chooses the path, not the scores."""
    indices, values = sparse
    if scope not in counts:
        estimate = shard.count(CountRequest(filter=scope_filter, exact=False))
        if estimate < counts.hold_from:
            return list(values), scope_filter
    weights = counts.query_weights(scope, indices, values, load=lambda: user_terms(shard, scope_filter))
    return weights, EMPTY_CORPUS


def user_terms(shard: EdgeShard, scope: Filter) -> Iterator[Sequence[int]]:
    """The term indices of every point in ``scope`` that has terms."""
    for record in scrolled(shard, scope, with_payload=False, with_vector=[SPARSE], page=4096):
        terms = _indices(record.vector)
        if terms is not None:
            yield terms


def stored_terms(shard: EdgeShard, point_ids: Iterable[str]) -> list[PointTerms]:
    """The scope and terms the shard holds now for these points (the ones it holds)."""
    records = shard.retrieve(list(point_ids), True, [SPARSE])
    out: list[PointTerms] = []
    for record in records:
        payload = record.payload or {}
        scope = (str(payload.get("tenant_id", "")), str(payload.get("user_id", "")))
        out.append((scope, _indices(record.vector)))
    return out


def _indices(vectors: object) -> Sequence[int] | None:
    sparse = vectors.get(SPARSE) if isinstance(vectors, dict) else None
    return sparse.indices if isinstance(sparse, SparseVector) else None
