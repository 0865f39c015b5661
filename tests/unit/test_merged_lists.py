"""``shared.recall.fusion.merged``: the memory and conversation-log searches as one list, whose
order the relevance model reads as each candidate's rank."""

from __future__ import annotations

from shared.recall.fusion import merged
from shared.recall.request import Candidate, RecallItem

OWN, LOG = "memory_dense", "log_dense"


def _cand(id_: str, **scores: float) -> Candidate:
    c = Candidate(RecallItem(id_, f"text {id_}", "fact", 0.0, "active", [], {}, "2026-01-01T00:00:00+00:00"))
    c.scores.update({OWN if k == "own" else LOG: v for k, v in scores.items()})
    return c


def test_memories_tied_on_their_windows_score_are_ordered_by_their_own_vectors() -> None:
    # One window's hit (0.83) stands for three memories; the smallest id has the farthest vector.
    dog, home, food = (
        _cand("1dog", own=0.77, log=0.83),
        _cand("7home", own=0.80, log=0.83),
        _cand("afood", own=0.82, log=0.83),
    )
    found = {OWN: [food, home, dog], LOG: [dog, home, food]}
    assert [c.item.id for c in merged(found, OWN, LOG)] == ["afood", "7home", "1dog"]


def test_turns_tied_on_one_window_keep_the_order_their_path_gave_them() -> None:
    # Turns have no vector of their own: the log's order (the words shared with the query, then
    # the window's own turn) decides, not the ids.
    later, earlier = _cand("a-turn", log=0.9), _cand("b-turn", log=0.9)
    found = {OWN: [], LOG: [earlier, later]}
    assert [c.item.id for c in merged(found, OWN, LOG)] == ["b-turn", "a-turn"]


def test_the_better_score_still_decides_first_and_ids_only_last() -> None:
    a, b, c = _cand("c", own=0.95), _cand("b", log=0.9, own=0.5), _cand("a", log=0.9, own=0.5)
    found = {OWN: [a, b, c], LOG: [b, c]}
    assert [x.item.id for x in merged(found, OWN, LOG)] == ["c", "b", "a"]
    found = {OWN: [a, c, b], LOG: [c, b]}
    assert [x.item.id for x in merged(found, OWN, LOG)] == ["c", "a", "b"]
