"""The LoCoMo harness plumbing on a hand-made two-session sample (no benchmark data is read)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import locomo_baselines, locomo_data, locomo_report, metrics
from shared.events import Role, validate_turn


def mini_sample() -> dict[str, Any]:
    return {
        "sample_id": "conv-99",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
                {
                    "speaker": "Bo",
                    "dia_id": "D1:2",
                    "text": "Look at my garden!",
                    "blip_caption": "a photo of tomatoes on a vine",
                    "img_url": ["http://example.invalid/x.jpg"],
                },
            ],
            "session_2_date_time": "10:04 am on 21 June, 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "My sister runs marathons in Oslo."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Pixel knocked over my coffee again."},
                {"speaker": "Bo", "dia_id": "D2:3", "text": "Cats will be cats."},
            ],
            # A date with no session list (as in conv-26): ignored.
            "session_3_date_time": "9:00 am on 1 July, 2023",
        },
        "qa": [
            {"question": "What is Ann's cat called?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
            {
                "question": "What does Bo grow?",
                "answer": "tomatoes",
                "evidence": ["D1:2; D9:9"],
                "category": 1,
            },
            {"question": "Who runs?", "answer": "sister", "evidence": ["D:2:1"], "category": 2},
            {"question": "Would Ann like dogs?", "answer": "maybe", "evidence": [], "category": 3},
            {
                "question": "What is Bo's cat called?",
                "adversarial_answer": "Pixel",
                "evidence": ["D"],
                "category": 5,
            },
        ],
        "observation": {"ignored": True},
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:04 am on 21 June, 2023", datetime(2023, 6, 21, 10, 4, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
    ],
)
def test_session_time(text: str, expected: datetime) -> None:
    assert locomo_data.parse_session_time(text) == expected


def test_bad_session_time_is_a_data_error() -> None:
    with pytest.raises(locomo_data.LocomoDataError, match="yesterday"):
        locomo_data.parse_session_time("yesterday")


def test_turns_map_to_events() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    assert conv.sample_id == "conv-99"
    assert conv.speakers == ("Ann", "Bo")
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1", "D2:2", "D2:3"]

    first, photo, later = conv.turns[0], conv.turns[1], conv.turns[4]
    assert first.event() == {
        "event_id": "conv-99.D1:1",
        "user_id": "conv-99",
        "session_id": "session_1",
        "seq": 1,
        "role": "user",
        "content": "Ann: I adopted a grey cat named Pixel.",
        "at": "2023-05-08T13:56:01+00:00",
        "metadata": {"speaker": "Ann", "dia_id": "D1:1", "source": "locomo"},
    }
    assert photo.content == "Bo: Look at my garden! [shares a photo: a photo of tomatoes on a vine]"
    assert (later.session_id, later.event()["seq"]) == ("session_2", 3)
    assert later.at == datetime(2023, 6, 21, 10, 4, 3, tzinfo=UTC)


def test_every_event_passes_the_products_validation() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    for turn in conv.turns:
        event = validate_turn(turn.event())
        assert event.event_id == turn.event_id
        assert event.role is Role.USER
        assert event.seq == turn.position
        assert event.at == turn.at


def test_questions_and_their_evidence() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    ev = {q.text: q.evidence for q in conv.questions}
    assert [q.category for q in conv.questions] == [4, 1, 2, 3, 5]
    assert ev["What is Ann's cat called?"].ids == ("D1:1",)
    assert ev["What does Bo grow?"].ids == ("D1:2",)
    assert ev["What does Bo grow?"].dropped == ("D9:9",)  # names no turn of this conversation
    assert ev["Who runs?"].ids == ("D2:1",)  # normalised from "D:2:1"
    assert ev["Would Ann like dogs?"].ids == ()
    assert ev["What is Bo's cat called?"].dropped == ("D",)


def test_now_is_just_after_the_last_turn_and_sources_map_back_to_turns() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    assert conv.now == datetime(2023, 6, 21, 10, 5, 3, tzinfo=UTC)
    assert conv.dia_of_event("conv-99.D2:2") == "D2:2"
    assert conv.dia_of_event("conv-9.D2:2") is None
    assert conv.dia_of_event("demo-001") is None


@pytest.mark.parametrize(
    ("question_date", "now"),
    [
        # LongMemEval asks a question weeks after its last session: asked then, "a month ago"
        # counts back from that date, not from the last session.
        ("2023/07/25 (Tue) 18:34", datetime(2023, 7, 25, 18, 34, tzinfo=UTC)),
        # ... or hours before the last session of the same day: never before the last turn.
        ("2023/06/21 (Wed) 09:00", datetime(2023, 6, 21, 10, 5, 3, tzinfo=UTC)),
    ],
)
def test_questions_are_asked_at_the_samples_question_date(question_date: str, now: datetime) -> None:
    later = locomo_data.parse_conversation({**mini_sample(), "question_date": question_date})
    assert later.now == now
    # The no-answer protocol's copies keep it.
    assert dataclasses.replace(later, questions=later.questions[:1]).now == now


@pytest.mark.parametrize(
    "question_date", ["2023-07-25 18:34", "2023/13/25 (Tue) 18:34", "2023/07/25 (Tue) 18:34\n", 20230725]
)
def test_a_question_date_that_does_not_read_is_a_data_error_naming_the_field(question_date: object) -> None:
    with pytest.raises(locomo_data.LocomoDataError, match="conv-99: question_date"):
        locomo_data.parse_conversation({**mini_sample(), "question_date": question_date})


def test_load_locomo_reports_unusable_files(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps([mini_sample()]))
    assert [c.sample_id for c in locomo_data.load_locomo(good)] == ["conv-99"]

    broken = tmp_path / "broken.json"
    broken.write_text("[{")
    with pytest.raises(locomo_data.LocomoDataError, match="not readable JSON"):
        locomo_data.load_locomo(broken)
    not_a_list = tmp_path / "object.json"
    not_a_list.write_text("{}")
    with pytest.raises(locomo_data.LocomoDataError, match="non-empty JSON list"):
        locomo_data.load_locomo(not_a_list)
    with pytest.raises(locomo_data.LocomoDataError, match="cannot read"):
        locomo_data.load_locomo(tmp_path / "missing.json")
    no_turns = tmp_path / "no_turns.json"
    no_turns.write_text(json.dumps([{"sample_id": "x", "conversation": {}, "qa": []}]))
    with pytest.raises(locomo_data.LocomoDataError, match="no turns"):
        locomo_data.load_locomo(no_turns)


def test_rrf_fuses_rankings_with_turn_order_as_tie_break() -> None:
    assert locomo_baselines.rrf([[2, 0, 1], [0, 2, 1]], k=3) == [0, 2, 1]  # 0 and 2 tie: lower index first
    assert locomo_baselines.rrf([[5], [7, 5]], k=1) == [5]


def test_baselines_rank_turns() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    texts = [t.content for t in conv.turns]

    # A fake embedding: one dimension per word of interest, so "dense" is checkable by hand.
    vocab = ["cat", "garden", "marathons", "coffee"]

    def embed(items: list[str] | tuple[str, ...]) -> list[list[float]]:
        return [[1.0 if w in t.lower() else 0.0 for w in vocab] + [0.01] for t in items]

    base = locomo_baselines.Baselines(texts, embed)
    ranks = base.rank("who runs marathons", embed(["marathons"])[0], k=2)
    assert ranks["bm25"] == [2]  # only the turn sharing a token
    assert ranks["dense"][0] == 2
    assert ranks["hybrid"][0] == 2
    assert base.rank("", embed(["coffee"])[0], k=3)["bm25"] == []


def test_report_states_targets_met_or_not() -> None:
    def results_for(any5: float) -> dict[str, Any]:
        hit, miss = [metrics.Item(frozenset({"D1:1"}), 10)], [metrics.Item(frozenset({"D9:9"}), 10)]
        n_hit = round(any5 * 10)
        scores = [metrics.score_question(4, ["D1:1"], hit if i < n_hit else miss) for i in range(10)]
        agg = metrics.aggregate(scores)
        return {
            "machine": {
                "command": "cuemem bench locomo",
                "when": "now",
                "cores": 2,
                "memory_gib": 1,
                "platform": "test",
                "python": "3",
                "versions": {},
            },
            "data": {"path": "x.json", "conversations": ["conv-99"]},
            "questions": 10,
            "evidence": {
                "questions_without_evidence": 0,
                "dropped_ids": 0,
                "dropped": [],
                "normalised_ids": 0,
            },
            "settings": {
                "embedding_model": "m",
                "k_max": 20,
                "budget_rule": "prefix",
                "importance_threshold": 5.0,
            },
            "timings": {"ingest": {"turns": 5, "total_s": 1.0}, "recall_ms": {"p50": 1.0, "p95": 2.0}},
            "systems": {"cuemem": agg, "bm25": agg},
            "cuemem": {
                "stages": {"vector": 10},
                "items_returned": {"mean": 1.0, "fewer_than_k": 10},
                "ceiling": {g: {"recall_any": 1.0, "recall_all": 1.0, "fraction": 1.0} for g in agg},
                "ceiling_note": "note",
                "memory": {},
            },
            "reference_bm25": locomo_report.REFERENCE_BM25,
        }

    good = locomo_report.render_report(results_for(1.0), [])
    assert "| recall_any@5 ≥ 0.90 | 1.000 | **met** |" in good
    bad = locomo_report.render_report(results_for(0.5), [])
    assert "| recall_any@5 ≥ 0.90 | 0.500 | **not met** |" in bad
    assert "**not met**" in bad.split("within 1,000 tokens")[1].splitlines()[0]


def test_turns_over_the_event_limit_are_cut_to_fit_and_counted() -> None:
    conv = locomo_data.parse_conversation(mini_sample())
    longest = max(len(t.content) for t in conv.turns)
    untouched = [t.content for t in conv.turns]
    assert locomo_data.fit_turns([conv], longest) == 0 and [t.content for t in conv.turns] == untouched
    limit = longest - 5
    cut = locomo_data.fit_turns([conv], limit)
    assert cut == sum(1 for c in untouched if len(c) > limit) >= 1
    assert all(len(t.content) <= limit for t in conv.turns)
    assert [t.content for t in conv.turns if len(t.content) < limit] == [
        c for c in untouched if len(c) < limit
    ]


def test_plots_are_drawn_for_a_file_with_a_single_category(tmp_path: Path) -> None:
    """A LoCoMo-shaped file whose questions are all of one category (MADial-Bench, say) leaves
    the other panels empty: they say so instead of failing to log-scale nothing."""
    item = metrics.Item(frozenset({"D1:1"}), 10)
    scores = [metrics.score_question(4, ("D1:1",), [item]) for _ in range(3)]
    by_system = {"cuemem": metrics.aggregate(scores), "bm25": metrics.aggregate(scores)}
    assert by_system["cuemem"]["1"]["scored"] == 0  # the empty groups this is about
    assert locomo_report.write_plots(by_system, tmp_path) == ["recall_by_k.png", "recall_by_budget.png"]
    assert (tmp_path / "recall_by_k.png").stat().st_size > 0
