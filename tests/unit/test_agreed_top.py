"""Do no harm: the item that both the dense and the keyword list put first is in the answer
(``shared.recall.fusion.keep_agreed_top``), whatever fusion, the cut and the floor did."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.events import Role, TurnPublished
from shared.recall.fusion import agreed_top, keep_agreed_top
from shared.recall.request import Candidate, turn_item

AT = datetime(2026, 12, 1, tzinfo=UTC)


def _cand(n: int) -> Candidate:
    turn = TurnPublished(f"e{n}", "t", "u", "s", n, Role.USER, f"turn {n}", AT, {})
    return Candidate(turn_item(turn, "turn"))


def test_the_agreed_top_takes_the_last_slot_when_fusion_lost_it() -> None:
    a, b, c, top = (_cand(n) for n in range(4))
    ranked = [a, b, top, c]  # fused order
    assert agreed_top([top, a], [top, b]) is top
    out = keep_agreed_top([a, b, c], ranked, top, k=3)
    assert [x.item.id for x in out] == ["event:e0", "event:e1", "event:e3"]  # fused order kept
    # With room left it is added, not swapped in.
    assert len(keep_agreed_top([a], ranked, top, k=3)) == 2


def test_nothing_changes_when_the_lists_disagree_or_it_is_in_already() -> None:
    a, b, top = (_cand(n) for n in range(3))
    assert agreed_top([top], [a]) is None and agreed_top([], [top]) is None
    assert keep_agreed_top([a, top], [a, top], top, k=2) == [a, top]
    # Its evidence (its source turn) is already behind an item taken before the fillers.
    assert keep_agreed_top([a], [a, top], top, k=2, taken=[top]) == [a]
