"""The plain recall output (`cuemem recall`, `cuemem demo`) shows each item's relevance, so that
an item recall only found closest (near 0) reads as what it is, not as an answer."""

from __future__ import annotations

from cli.recall import why_line


def test_an_item_shows_its_paths_cues_cosine_and_relevance() -> None:
    explanation = {"paths": ["cue", "vector"], "matched_cues": ["k:order"], "vector_score": 0.7912}
    line = why_line({**explanation, "relevance": 0.02431})
    assert line == "cue+vector k:order cos=0.79 relevance=0.024"


def test_the_cosine_shown_is_the_better_of_the_items_own_and_its_windows() -> None:
    # The dense list ranks by the better one: showing the memory's own made a list look unordered.
    explanation = {"paths": ["vector", "turn_vector"], "vector_score": 0.87, "turn_vector_score": 0.8875}
    assert why_line(explanation) == "vector+turn_vector cos=0.89"
    assert why_line({"paths": ["turn_vector"], "turn_vector_score": 0.8}) == "turn_vector cos=0.80"


def test_an_exact_key_with_no_model_score_shows_none() -> None:
    assert why_line({"paths": ["key"], "matched_cues": ["key:ORD-1"]}) == "key key:ORD-1"


def test_the_plain_output_prints_the_notes_that_explain_the_order(capsys) -> None:
    from cli.recall import print_recall

    note = "the query asks for profile:job: its current memory comes first"
    job = {
        "type": "profile",
        "status": "active",
        "content": "我在一家律所做会计",
        "explanation": {"relevance": 0.303},
    }
    home = {
        "type": "profile",
        "status": "active",
        "content": "我住在成都",
        "explanation": {"relevance": 0.683},
    }
    print_recall("我在哪里工作？", {"stage": "fused", "items": [job, home], "trace": {"notes": [note]}})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  1. [profile] 我在一家律所做会计") and lines[2].startswith(
        "  2. [profile] 我住在成都"
    )
    assert lines[3:] == [f"  note: {note}"]


def test_an_empty_answer_prints_its_notes_once(capsys) -> None:
    from cli.recall import print_recall

    print_recall(
        "我是什么血型？",
        {"stage": "none", "items": [], "trace": {"notes": ["nothing remembered answers this"]}},
    )
    assert capsys.readouterr().out.splitlines()[1:] == ["  (nothing found) nothing remembered answers this"]
