"""The ingest benchmarks' yardstick (``bench/ingest_embedding.py: embedded_texts``) names exactly
the texts the embed stage hands the model, with the turn alone on and off: a ratio to the raw
embedder then compares like with like."""

from __future__ import annotations

import pytest

from bench.ingest_embedding import drafts_of, embedded_texts
from shared.settings import Settings
from tests.support.pipeline import TurnHarness, turn

TURNS = [
    turn(1, "My sister Ana lives in Porto and teaches piano"),
    turn(2, "lol ok"),
    turn(3, "我下周三要去上海出差，住在静安区"),
    turn(1, "haha sure", session="s2"),
    turn(2, "I switched from coffee to green tea last month", session="s2"),
]


@pytest.mark.parametrize("alone", [False, True])
def test_the_yardstick_names_what_the_embed_stage_embeds(alone: bool) -> None:
    h = TurnHarness(window=3, alone=alone)
    sent: list[str] = []
    embed = h.embedder.embed_passages
    h.embedder.embed_passages = lambda batch: sent.extend(batch) or embed(batch)  # type: ignore[method-assign]
    for t in TURNS:
        h.drain(t)
    settings = Settings(turn_window=3, index_turns=True, turn_alone_vector=alone)
    assert sorted(embedded_texts(TURNS, drafts_of(TURNS), settings)) == sorted(sent)
    assert any("\n" in t for t in sent) and (alone == ("lol ok" in sent))
