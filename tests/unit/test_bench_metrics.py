"""The LoCoMo retrieval metrics on hand-made rankings with known answers."""

from __future__ import annotations

import pytest

from bench.metrics import (
    Item,
    aggregate,
    coverage,
    cut,
    normalise_dia_id,
    parse_evidence,
    score_question,
)


def item(*dia_ids: str, tokens: int = 10) -> Item:
    return Item(frozenset(dia_ids), tokens)


# --- evidence parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", "D1:3"),
        ("D:11:26", "D11:26"),
        ("D30:05", "D30:5"),
        ("D04:007", "D4:7"),
        (" D2:1 ", "D2:1"),
        ("D", None),
        ("D10", None),
        ("1:3", None),
        ("", None),
    ],
)
def test_normalise_dia_id(raw: str, expected: str | None) -> None:
    assert normalise_dia_id(raw) == expected


def test_evidence_strings_holding_several_ids_are_split_on_semicolon_comma_and_whitespace() -> None:
    ev = parse_evidence(["D8:6; D9:17", "D1:1,D1:2", "D9:1 D4:4  D4:6"])
    assert ev.ids == ("D8:6", "D9:17", "D1:1", "D1:2", "D9:1", "D4:4", "D4:6")
    assert ev.dropped == ()


def test_malformed_ids_are_normalised_and_recorded() -> None:
    ev = parse_evidence(["D:11:26", "D30:05"])
    assert ev.ids == ("D11:26", "D30:5")
    assert ev.normalised == (("D:11:26", "D11:26"), ("D30:05", "D30:5"))


def test_ids_that_name_no_turn_are_dropped_and_counted() -> None:
    known = {"D1:18", "D1:20", "D10:11"}
    ev = parse_evidence(["D1:18", "D", "D1:20", "D10:19"], known)
    assert ev.ids == ("D1:18", "D1:20")
    assert ev.dropped == ("D", "D10:19")


def test_a_normalised_id_is_still_checked_against_the_turns() -> None:
    assert parse_evidence(["D30:05"], {"D30:5"}).ids == ("D30:5",)
    ev = parse_evidence(["D30:05"], {"D30:4"})
    assert ev.ids == () and ev.dropped == ("D30:05",)


def test_duplicate_evidence_counts_once() -> None:
    assert parse_evidence(["D1:1", "D1:1; D01:1"]).ids == ("D1:1",)


def test_no_evidence() -> None:
    assert parse_evidence([]).ids == ()


# --- cuts and coverage ------------------------------------------------------------------------


def test_cut_at_k_takes_the_first_k_and_tolerates_short_lists() -> None:
    ranked = [item("a"), item("b"), item("c")]
    assert cut(ranked, k=2) == ranked[:2]
    assert cut(ranked, k=20) == ranked


def test_budget_cut_stops_at_the_first_item_that_does_not_fit() -> None:
    ranked = [item("a", tokens=100), item("b", tokens=600), item("c", tokens=50)]
    # "b" does not fit in 500: it is skipped and the cut stops, so "c" is not taken although it fits.
    assert cut(ranked, budget=500) == ranked[:1]
    assert cut(ranked, budget=700) == ranked[:2]  # exactly the budget fits
    assert cut(ranked, budget=2000) == ranked
    assert cut([item("big", tokens=501)], budget=500) == []


def test_budget_and_k_together() -> None:
    ranked = [item(str(i), tokens=100) for i in range(20)]
    assert len(cut(ranked, k=10, budget=1000)) == 10
    assert len(cut(ranked, k=10, budget=550)) == 5
    assert len(cut(ranked, k=3, budget=1000)) == 3


def test_coverage_any_all_fraction() -> None:
    cov = coverage({"D1:1", "D2:2", "D3:3", "D4:4"}, [item("D1:1"), item("D9:9", "D2:2")])
    assert cov is not None
    assert (cov.recall_any, cov.recall_all, cov.fraction) == (1.0, 0.0, 0.5)
    full = coverage({"D1:1"}, [item("D1:1", "D1:2")])
    assert full is not None and (full.recall_any, full.recall_all, full.fraction) == (1.0, 1.0, 1.0)


def test_no_credit_for_neighbouring_turns() -> None:
    cov = coverage({"D1:3"}, [item("D1:2", "D1:4"), item("D2:3")])
    assert cov is not None and (cov.recall_any, cov.recall_all, cov.fraction) == (0.0, 0.0, 0.0)


def test_no_evidence_has_no_coverage() -> None:
    assert coverage(set(), [item("D1:1")]) is None


def test_score_question_at_each_k() -> None:
    ranked = [item("x"), item("D1:1"), item("y"), item("z"), item("w"), item("D5:5")]
    s = score_question(1, ["D1:1", "D5:5"], ranked, ks=(1, 5, 10), budgets=())
    at = {k: s.at_k[k].coverage for k in (1, 5, 10)}
    assert at[1] is not None and (at[1].recall_any, at[1].recall_all, at[1].fraction) == (0, 0, 0)
    assert at[5] is not None and (at[5].recall_any, at[5].recall_all, at[5].fraction) == (1, 0, 0.5)
    assert at[10] is not None and (at[10].recall_any, at[10].recall_all, at[10].fraction) == (1, 1, 1)
    assert (s.at_k[5].tokens, s.at_k[5].items) == (50, 5)
    assert (s.at_k[10].tokens, s.at_k[10].items) == (60, 6)


def test_a_big_item_cannot_cover_everything_within_a_budget() -> None:
    ranked = [item("D1:1", "D2:2", "D3:3", tokens=1500), item("D1:1", tokens=40)]
    s = score_question(4, ["D1:1", "D2:2", "D3:3"], ranked, ks=(1,), budgets=(1000, 2000))
    at_k1 = s.at_k[1].coverage
    assert at_k1 is not None and at_k1.recall_all == 1.0  # by rank alone it covers everything
    assert s.at_budget[1000].coverage is not None
    assert s.at_budget[1000].coverage.recall_any == 0.0  # but it does not fit; the cut stops there
    assert s.at_budget[1000].items == 0
    two = s.at_budget[2000].coverage
    assert two is not None and two.recall_all == 1.0 and s.at_budget[2000].tokens == 1540


# --- aggregation ------------------------------------------------------------------------------


def test_aggregate_per_category_and_overall() -> None:
    hit = [item("D1:1", tokens=20)]
    miss = [item("D9:9", tokens=40)]
    scores = [
        score_question(1, ["D1:1"], hit, ks=(1,), budgets=(500,)),  # cat 1: hit
        score_question(1, ["D1:1"], miss, ks=(1,), budgets=(500,)),  # cat 1: miss
        score_question(2, ["D1:1", "D2:2"], hit, ks=(1,), budgets=(500,)),  # cat 2: half
        score_question(3, [], hit, ks=(1,), budgets=(500,)),  # cat 3: no evidence
        score_question(5, ["D1:1"], hit, ks=(1,), budgets=(500,)),  # cat 5: hit
    ]
    agg = aggregate(scores)

    c1 = agg["1"]
    assert (c1["questions"], c1["scored"], c1["skipped_no_evidence"]) == (2, 2, 0)
    assert c1["at_k"]["1"]["recall_any"] == 0.5
    assert c1["at_k"]["1"]["tokens"] == 30.0

    c2 = agg["2"]["at_k"]["1"]
    assert (c2["recall_any"], c2["recall_all"], c2["fraction"]) == (1.0, 0.0, 0.5)

    c3 = agg["3"]
    assert (c3["questions"], c3["scored"], c3["skipped_no_evidence"]) == (1, 0, 1)
    assert c3["at_k"]["1"]["recall_any"] is None  # nothing to score
    assert c3["at_k"]["1"]["tokens"] == 20.0  # its context still counts

    assert agg["4"]["questions"] == 0 and agg["4"]["at_k"]["1"]["recall_any"] is None

    o14 = agg["1-4"]
    assert (o14["questions"], o14["scored"], o14["skipped_no_evidence"]) == (4, 3, 1)
    # any: (1 + 0 + 1) / 3 scored questions; all: (1 + 0 + 0) / 3; fraction: (1 + 0 + 0.5) / 3
    assert o14["at_k"]["1"]["recall_any"] == pytest.approx(2 / 3, abs=1e-6)
    assert o14["at_k"]["1"]["recall_all"] == pytest.approx(1 / 3, abs=1e-6)
    assert o14["at_k"]["1"]["fraction"] == pytest.approx(0.5, abs=1e-6)
    assert o14["at_k"]["1"]["tokens"] == pytest.approx((20 + 40 + 20 + 20) / 4)

    o15 = agg["1-5"]
    assert (o15["questions"], o15["scored"]) == (5, 4)
    assert o15["at_k"]["1"]["recall_any"] == 0.75
    assert o15["at_budget"]["500"]["recall_any"] == 0.75


def test_aggregate_reports_the_k_budget_cut() -> None:
    ranked = [item(f"D1:{i}", tokens=150) for i in range(1, 11)]
    s = score_question(4, ["D1:1", "D1:8"], ranked, ks=(10,), budgets=(), k_budgets=((10, 1000),))
    agg = aggregate([s])
    assert agg["4"]["at_k"]["10"]["recall_all"] == 1.0
    # within 1,000 tokens only 6 items of 150 fit: D1:8 is cut off
    assert agg["4"]["at_k_budget"]["10@1000"]["recall_all"] == 0.0
    assert agg["4"]["at_k_budget"]["10@1000"]["items"] == 6.0


def test_a_group_without_questions_has_every_cut_with_none() -> None:
    """A run whose questions are all of one category (the first LongMemEval samples are all
    category 5) still reports the headline group 1-4, empty: its report read the 10@1000 cut."""
    s = score_question(5, ["D1:1"], [item("D1:1")], ks=(5, 10), budgets=(1000,), k_budgets=((10, 1000),))
    agg = aggregate([s])
    empty = agg["1-4"]
    assert (empty["questions"], empty["scored"]) == (0, 0)
    assert set(empty["at_k"]) == {"5", "10"} and set(empty["at_budget"]) == {"1000"}
    assert empty["at_k_budget"]["10@1000"] == {
        "recall_any": None, "recall_all": None, "fraction": None, "tokens": None, "items": None
    }  # fmt: skip
    assert agg["5"]["at_k_budget"]["10@1000"]["recall_all"] == 1.0
