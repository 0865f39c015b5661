"""A dialogue as the query: searched by what the user said in it (the assistant's lines left out),
and by its last lines when ``query_lines`` says so."""

from __future__ import annotations

from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.pipeline import ASKED, TurnHarness

DIALOGUE = "user: hi there\nassistant: hello! how can I help?\n\nuser: where do I work these days?"


def test_the_last_lines_of_a_dialogue_are_what_is_searched() -> None:
    request = RecallRequest("default", "u1", DIALOGUE, now=ASKED)
    assert request.searched == "user: hi there\n\nuser: where do I work these days?"
    one = RecallRequest("default", "u1", DIALOGUE, now=ASKED, query_lines=1)
    assert one.searched == "user: where do I work these days?"
    two = RecallRequest("default", "u1", DIALOGUE, now=ASKED, query_lines=2)
    assert two.searched == request.searched  # the user said two lines: both
    assert RecallRequest("default", "u1", "one line", now=ASKED, query_lines=3).searched == "one line"


def test_a_dialogue_is_searched_by_what_the_user_said_in_it() -> None:
    def searched(query: str) -> str:
        return RecallRequest("default", "u1", query, now=ASKED).searched

    # MADial's shape: a marker line, then labelled lines in angle brackets with quoted text.
    madial = '<BOD>\n<Bart>:"元旦晚会我要表演魔术！"\n<Assistant>:"真是太棒了！"\n<Bart>:"我有点紧张"\n'
    assert searched(madial) == '<BOD>\n<Bart>:"元旦晚会我要表演魔术！"\n<Bart>:"我有点紧张"'
    # Full-width colons, Chinese and other assistant labels, any case; an unlabelled line stays.
    assert (
        searched("助手：你好！\n我：我住杭州\nAI: noted\nSYSTEM: be brief\nsee you")
        == "我：我住杭州\nsee you"
    )
    # No user label anywhere: the user's own text that starts a line with such a word stays whole.
    assert (
        searched("System: Ubuntu 22.04\nwhy does docker fail?")
        == "System: Ubuntu 22.04\nwhy does docker fail?"
    )
    # A user who goes by an assistant's name: nothing labelled would stay, so the whole dialogue.
    named_ai = '<BOD>\n<AI>:"我下周考试"\n<Assistant>:"加油"'
    assert searched(named_ai) == named_ai
    # A line that only holds a colon in its text is no assistant's.
    assert searched("user: note to self: buy milk\nassistant: ok") == "user: note to self: buy milk"
    # Nothing but the assistant's lines: nothing else to read, so the whole query.
    assert searched("assistant: what is your name?\nbot: and your job?") == (
        "assistant: what is your name?\nbot: and your job?"
    )
    # One line is never cut, whoever it names.
    assert searched("Assistant: what did you recommend me?") == "Assistant: what did you recommend me?"


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


def test_recall_searches_a_dialogue_without_the_assistants_words() -> None:
    h = TurnHarness()
    h.say("I play the guitar in a band", "I cook pasta every Sunday")
    asked: list[str] = []
    embed = h.embedder.embed_query
    h.embedder.embed_query = lambda text: asked.append(text) or embed(text)  # type: ignore[method-assign]
    dialogue = (
        "user: we have a gig tonight\nassistant: nice! will you cook pasta after?\nuser: my band is nervous"
    )
    request = RecallRequest("default", "u1", dialogue, now=ASKED)
    with h.store.uow() as uow:
        out = recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns
        )
    assert asked == ["user: we have a gig tonight\nuser: my band is nervous"]
    keywords = out.trace["cues"]["keywords"]
    assert "pasta" not in keywords and "band" in keywords, keywords
    assert "guitar" in out.items[0].content, [i.content for i in out.items]
