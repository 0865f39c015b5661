"""The plain recall output (`cuemem recall`, `cuemem demo`) shows each item's relevance, so that
an item recall only found closest (near 0) reads as what it is, not as an answer."""

from __future__ import annotations

from cli.recall import why_line


def test_an_item_shows_its_paths_cues_cosine_and_relevance() -> None:
    explanation = {"paths": ["cue", "vector"], "matched_cues": ["k:order"], "vector_score": 0.7912}
    line = why_line({**explanation, "relevance": 0.02431})
    assert line == "cue+vector k:order cos=0.79 relevance=0.024"


def test_an_exact_key_with_no_model_score_shows_none() -> None:
    assert why_line({"paths": ["key"], "matched_cues": ["key:ORD-1"]}) == "key key:ORD-1"
