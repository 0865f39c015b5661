"""A dialogue as the query: searched by its last lines when ``query_lines`` says so."""

from __future__ import annotations

from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.pipeline import ASKED, TurnHarness

DIALOGUE = "user: hi there\nassistant: hello! how can I help?\n\nuser: where do I work these days?"


def test_the_last_lines_of_a_dialogue_are_what_is_searched() -> None:
    request = RecallRequest("default", "u1", DIALOGUE, now=ASKED)
    assert request.searched == DIALOGUE
    one = RecallRequest("default", "u1", DIALOGUE, now=ASKED, query_lines=1)
    assert one.searched == "user: where do I work these days?"
    two = RecallRequest("default", "u1", DIALOGUE, now=ASKED, query_lines=2)
    assert two.searched == "assistant: hello! how can I help?\nuser: where do I work these days?"
    assert RecallRequest("default", "u1", "one line", now=ASKED, query_lines=3).searched == "one line"


def test_recall_embeds_and_matches_only_the_searched_lines() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital")
    asked: list[str] = []
    embed = h.embedder.embed_query
    h.embedder.embed_query = lambda text: asked.append(text) or embed(text)  # type: ignore[method-assign]
    request = RecallRequest("default", "u1", DIALOGUE, now=ASKED, query_lines=1)
    with h.store.uow() as uow:
        out = recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns
        )
    assert asked == ["user: where do I work these days?"]
    assert "hello" not in out.trace["cues"]["keywords"] and "work" in out.trace["cues"]["keywords"]
