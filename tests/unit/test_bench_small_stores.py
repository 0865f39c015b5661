"""`cuemem bench small-stores`: a store per question, its evidence and a few other sessions, in an
order where no question is asked, as a foreign question, of a store that holds its evidence."""

from __future__ import annotations

from typing import Any

import pytest

from bench.locomo_data import parse_conversation
from bench.small_stores import small_stores


def sample(sample_id: str, sessions: int, qa: list[tuple[str, list[str]]], **extra: Any) -> dict[str, Any]:
    conv: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    for n in range(1, sessions + 1):
        conv[f"session_{n}"] = [
            {"speaker": "Ann", "dia_id": f"D{n}:{t}", "text": f"{sample_id} session {n} turn {t}"}
            for t in (1, 2)
        ]
        conv[f"session_{n}_date_time"] = f"1:00 pm on {n} May, 2023"
    return {
        "sample_id": sample_id,
        "conversation": conv,
        "qa": [{"question": q, "answer": "x", "evidence": ev, "category": 1} for q, ev in qa],
        **extra,
    }


def sessions_of(store: dict[str, Any]) -> set[int]:
    return {t.session for t in parse_conversation(store).turns}


def test_each_question_gets_its_evidence_and_extra_sessions_of_its_own_sample() -> None:
    u1 = sample("u1", 8, [("q0", ["D2:1"]), ("q1", ["D5:2; D7:1"]), ("no evidence", [])])
    u10 = sample("u10", 8, [("q0", ["D3:1"])], question_date="2023/06/01 (Thu) 10:00")
    stores, counts = small_stores([u1, u10], extra=2, seed=30)
    assert [s["sample_id"] for s in stores] == ["u1-q0", "u1-q1", "u10-q0"]
    assert counts == {"questions": 3, "left_out": 0, "sessions": 3 + 4 + 3}
    by_id = {s["sample_id"]: s for s in stores}
    assert {2} < sessions_of(by_id["u1-q0"]) and len(sessions_of(by_id["u1-q0"])) == 3
    assert {5, 7} < sessions_of(by_id["u1-q1"]) and len(sessions_of(by_id["u1-q1"])) == 4
    # Every turn is the source's own, under its own dia id; the question and its date go along.
    for store in stores:
        source = u1 if store["sample_id"].startswith("u1-") else u10
        for key, turns in store["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                assert turns == source["conversation"][key]
                assert store["conversation"][f"{key}_date_time"] == source["conversation"][f"{key}_date_time"]
    assert by_id["u1-q1"]["qa"] == [u1["qa"][1]]
    assert by_id["u10-q0"]["question_date"] == "2023/06/01 (Thu) 10:00"
    assert "question_date" not in by_id["u1-q0"]
    # The draw is the seed's: the same again, another seed another draw somewhere.
    assert small_stores([u1, u10], extra=2, seed=30)[0] == stores
    assert any(small_stores([u1, u10], extra=2, seed=s)[0] != stores for s in range(31, 40))


def test_no_question_is_asked_of_a_store_that_holds_its_evidence() -> None:
    # One user, questions sharing sessions: the order keeps neighbours apart, and a store's extra
    # sessions never hold the previous question's evidence (the no-answer protocol asks each
    # store's question of the next store, the last's of the first).
    qa = [
        ("a", ["D1:1"]),
        ("b", ["D1:2"]),
        ("c", ["D2:1"]),
        ("d", ["D2:2; D3:1"]),
        ("e", ["D4:1"]),
        ("f", ["D5:1"]),
    ]
    for seed in range(20):
        stores, counts = small_stores([sample("a:b", 6, qa)], extra=3, seed=seed)
        assert counts["questions"] + counts["left_out"] == len(qa)
        assert counts["questions"] >= 4
        for i, store in enumerate(stores):
            asked_of = stores[(i + 1) % len(stores)]
            evidence = {d for e in store["qa"][0]["evidence"] for d in e.replace(";", " ").split()}
            held = {t.dia_id for t in parse_conversation(asked_of).turns}
            assert not evidence & held, (seed, store["sample_id"], asked_of["sample_id"])


def test_two_users_stores_are_never_barred_by_each_other() -> None:
    # The same session numbers in two users are different sessions: u10's store may hold its D1,
    # though u1's question before it names u1's D1 (and u1's its D2, though u10's names u10's).
    stores, counts = small_stores(
        [sample("u1", 2, [("q", ["D1:1"])]), sample("u10", 2, [("q", ["D2:1"])])], extra=1, seed=1
    )
    assert counts["left_out"] == 0
    assert [sessions_of(s) for s in stores] == [{1, 2}, {1, 2}]


def test_negative_extra_is_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        small_stores([sample("u1", 2, [("q", ["D1:1"])])], extra=-1, seed=1)
