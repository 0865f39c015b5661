"""Recall on fakes: an assistant's question never outranks the user's answer (unless the query asks
what the assistant said), and the relevance floor leaves chit-chat out of the answer, and
everything when nothing reaches the minimum relevance, never an exact key, and says so in the
trace (with what it left just below the cut)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from shared.events import Role, TurnPublished
from shared.models import MemoryStatus
from shared.recall import floor
from shared.recall.cascade import recall
from shared.recall.explain import Scored, Trace
from shared.recall.features import FEATURES
from shared.recall.filler import is_filler_text
from shared.recall.relevance import RelevanceModel
from shared.recall.request import Candidate, RecallRequest, turn_item
from shared.recall.roles import asks_assistant, is_assistant_question
from tests.support.pipeline import ASKED, NOW, TurnHarness, ask, turn


def _said(h: TurnHarness, *turns: tuple[str, str], days_ago: float = 0) -> None:
    for seq, (role, content) in enumerate(turns, 1):
        at = (NOW - timedelta(days=days_ago, minutes=-seq)).isoformat()
        h.drain({**turn(seq, content), "role": role, "at": at})


def _recall(h: TurnHarness, query: str, **fields: object):
    request = dataclasses.replace(RecallRequest("default", "u1", query, now=ASKED), **fields)
    with h.store.uow() as uow:
        return recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns
        )


# --- roles ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "about"),
    [
        ("what did you recommend me?", True),
        ("you said something about dinner", True),
        ("你推荐了什么？", True),
        ("你之前说过什么", True),
        ("我有什么忌口？", False),
        ("where do I work?", False),
        ("what do you think I should eat?", False),
    ],
)
def test_a_query_asks_what_the_assistant_said(query: str, about: bool) -> None:
    assert asks_assistant(query) is about


def _turn_candidate(role: Role, content: str) -> Candidate:
    event = TurnPublished("e1", "default", "u1", "s1", 1, role, content, NOW, {})
    return Candidate(turn_item(event, "turn"))


def test_an_assistant_turn_that_only_asks_is_marked_as_a_question() -> None:
    assert is_assistant_question(_turn_candidate(Role.ASSISTANT, "好呀，你有什么忌口吗？"))
    assert not is_assistant_question(_turn_candidate(Role.ASSISTANT, "那可以试试西湖醋鱼。"))
    assert not is_assistant_question(_turn_candidate(Role.USER, "你有什么推荐吗？"))


def test_the_users_answer_outranks_the_assistants_question_on_the_same_words() -> None:
    h = TurnHarness()
    # The user's answer does not follow the question at once: it ranks by its own words only.
    _said(h, ("assistant", "好呀，你有什么忌口吗？"), ("user", "嗯"), ("user", "我不吃香菜，也不太能吃辣。"))
    out = ask(h, "我有什么忌口？")
    contents = [i.content for i in out.items]
    assert contents[0] == "我不吃香菜，也不太能吃辣", out.trace
    assert "好呀，你有什么忌口吗？" in contents  # still searchable, only lower
    question = next(i for i in out.items if i.content == "好呀，你有什么忌口吗？")
    assert question.explanation["role"] == "assistant"
    assert question.explanation["features"]["assistant_question"] == 1.0
    about = ask(h, "你问过我什么忌口？")
    asked = next(i for i in about.items if i.content == "好呀，你有什么忌口吗？")
    assert asked.explanation["features"]["query_about_assistant"] == 1.0


def test_an_assistant_question_never_answers_before_the_users_answer_on_the_same_cues() -> None:
    h = TurnHarness()
    _said(h, ("assistant", "你的订单 ORD-7781 收到了吗？"), ("user", "我的订单 ORD-7781 昨天到了"))
    out = _recall(h, "ORD-7781 收到了吗", session_id="s1")  # the session's turns are working memory
    assert out.stage == "ranked"
    assert out.items[0].content == "我的订单 ORD-7781 昨天到了", out.items
    assert all(not i.content.startswith("你的订单") for i in out.items), out.items


# --- the relevance floor --------------------------------------------------------------------------


def test_chit_chat_is_left_out_and_the_trace_counts_it() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital", "lol ok", "好的，谢谢！", "哈哈")
    out = ask(h, "where do I work?")
    assert [i.content for i in out.items] == ["I work as a nurse at the city hospital"]
    assert out.trace["floor"]["cut"] == {"chit_chat": 3}
    assert any("3 items left out by the relevance floor: 3 chit-chat" in n for n in out.trace["notes"])


@pytest.mark.parametrize("text", ["lol ok", "好的，谢谢！", "哈哈哈", "ok!!", "so so"])
def test_filler_text_has_no_cue_at_all(text: str) -> None:
    assert is_filler_text(text)


@pytest.mark.parametrize("text", ["我不吃香菜", "yes, the blue one", "E42", "lol we saw a red fox"])
def test_a_text_with_content_is_no_filler(text: str) -> None:
    assert not is_filler_text(text)


def _by_dense(min_relevance: float = 0.5) -> RelevanceModel:
    """A fake model: the probability is the sigmoid of 10 x (the dense cosine - 0.5), calibrated
    for the harness's embedder."""
    weights = [10.0 if name == "dense" else 0.0 for name in FEATURES]
    n = len(FEATURES)
    embedder = TurnHarness().embedder.model_name
    return RelevanceModel(
        FEATURES, (0.0,) * n, (1.0,) * n, tuple(weights), -5.0, min_relevance, "fake-dense", embedder
    )


def _recall_by(h: TurnHarness, query: str, model: RelevanceModel):
    """Recall with ``model`` as the relevance model, the floor left to its defaults."""
    with h.store.uow() as uow:
        request = RecallRequest("default", "u1", query, now=ASKED, k=5)
        return recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns,
            relevance=model,
        )  # fmt: skip


def _cand(key: str, scored: Scored, probability: float) -> Candidate:
    c = _turn_candidate(Role.USER, f"the {key} statement about gardening")
    c.item.id = key
    scored.probabilities[key] = probability
    return c


def _fill(cands: list[Candidate], min_relevance: float) -> tuple[list[str], list[str], Trace]:
    request = RecallRequest("default", "u1", "gardening", now=ASKED, k=3, min_relevance=min_relevance)
    trace = Trace(request)
    kept, below = floor.fill(cands, request, Scored(_by_dense()), _no_cues(), [], trace)
    return [c.item.id for c in kept], [c.item.id for c in below], trace


def _no_cues():
    from shared.language.cues import query_cues

    return query_cues("gardening")


def test_the_minimum_relevance_decides_whether_there_is_an_answer_not_how_long_it_is() -> None:
    scored = Scored(_by_dense())
    cands = [
        _cand("a", scored, 0.9),
        _cand("b", scored, 0.3),
        _cand("c", scored, 0.6),
        _cand("d", scored, 0.1),
    ]
    request = RecallRequest("default", "u1", "gardening", now=ASKED, k=3, min_relevance=0.5)
    trace = Trace(request)
    kept, below = floor.fill(cands, request, scored, _no_cues(), [], trace)
    # The best clears the minimum: the items after it are not cut for their own probability.
    assert [c.item.id for c in kept] == ["a", "b", "c"] and below == [] and trace.cut == {}
    # Nothing clears it: no answer, and what would have been in it is shown below the cut.
    scored = Scored(_by_dense())
    cands = [_cand("b", scored, 0.3), _cand("c", scored, 0.45), _cand("d", scored, 0.1)]
    trace = Trace(request)
    kept, below = floor.fill(cands, request, scored, _no_cues(), [], trace)
    assert kept == [] and [c.item.id for c in below] == ["b", "c", "d"]
    assert trace.cut == {"below_min_relevance": 3}
    assert scored.reasons == dict.fromkeys("bcd", "below_min_relevance")
    # A minimum of 0 cuts nothing.
    request = dataclasses.replace(request, min_relevance=0.0)
    kept, below = floor.fill(cands, request, Scored(_by_dense()), _no_cues(), [], Trace(request))
    assert [c.item.id for c in kept] == ["b", "c", "d"] and below == []


def test_chit_chat_never_makes_an_answer_of_what_clears_nothing() -> None:
    scored = Scored(_by_dense())
    chat = _turn_candidate(Role.USER, "lol ok")
    chat.item.id = "chat"
    scored.probabilities["chat"] = 0.95  # chit-chat is left out whatever it scores
    cands = [chat, _cand("b", scored, 0.3)]
    request = RecallRequest("default", "u1", "gardening", now=ASKED, k=3, min_relevance=0.5)
    trace = Trace(request)
    kept, _ = floor.fill(cands, request, scored, _no_cues(), [], trace)
    assert kept == [] and trace.cut == {"chit_chat": 1, "below_min_relevance": 1}


def test_an_empty_answer_says_what_was_tried_and_the_best_relevance_seen() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital", "I prefer green tea in the morning")
    out = _recall_by(h, "what is my blood type?", _by_dense(min_relevance=0.999))
    assert out.items == [] and out.stage == "none"
    assert out.trace["floor"]["min_relevance"] == 0.999  # the model's default, as no setting overrides it
    best = out.trace["best_relevance"]
    assert 0 < best < 0.999
    assert any(n.startswith("nothing remembered answers this: the best of") and f"{best:.3f}" in n
               for n in out.trace["notes"]), out.trace["notes"]  # fmt: skip
    assert [b["reason"] for b in out.trace["floor"]["below_cut"]] == ["below_min_relevance"] * len(
        out.trace["floor"]["below_cut"]
    ) and out.trace["floor"]["below_cut"]


def test_a_model_calibrated_for_another_embedder_sets_no_default_floor() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital")
    strict = dataclasses.replace(_by_dense(min_relevance=0.999), embedding_model="another/model")
    out = _recall_by(h, "where do I work?", strict)
    assert out.items and out.trace["floor"]["min_relevance"] == 0.0
    assert any("calibrated for another/model" in n for n in out.trace["notes"]), out.trace["notes"]


def test_a_pool_gets_the_floor_chosen_for_its_size_and_none_under_the_smallest_checked() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital")
    # (the training questions' fewest candidates, the small stores' floor and their fewest) ->
    # the floor applied, and the note that says why (None: no note of the pool's size).
    cases = (
        ((1, 0.0, 0), 0.999, None),
        ((1, 0.3, 1), 0.999, None),
        ((1000, 0.0, 0), 0.0, "no relevance floor: 1 candidates, fewer than the 1000 "),
        ((1000, 0.3, 1), 0.3, "a small store's relevance floor: 1 candidates, fewer than the 1000 "),
        ((1000, 0.3, 500), 0.0, "no relevance floor: 1 candidates, fewer than the 500 "),
    )
    for (fewest, small_floor, small_fewest), applied, note in cases:
        model = dataclasses.replace(
            _by_dense(min_relevance=0.999),
            min_candidates=fewest,
            small_min_relevance=small_floor,
            small_min_candidates=small_fewest,
        )
        out = _recall_by(h, "where do I work?", model)
        assert out.trace["floor"]["min_relevance"] == applied, (fewest, small_floor, small_fewest)
        about_size = [n for n in out.trace["notes"] if "candidates, fewer than" in n]
        if note is None:
            assert about_size == [], out.trace["notes"]
        else:
            assert len(about_size) == 1 and about_size[0].startswith(note), out.trace["notes"]


def test_a_dialogue_as_the_query_gets_no_default_floor() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital")
    strict = _by_dense(min_relevance=0.999)
    for query, floored in (
        ("what is my blood type?", True),
        ("user: hi\nassistant: hello\nuser: what is my blood type?", False),
    ):
        out = _recall_by(h, query, strict)
        assert (out.trace["floor"]["min_relevance"] == 0.999) is floored, query
        assert bool(out.items) is not floored, query
        assert any("calibrated on one-line questions" in n for n in out.trace["notes"]) is not floored


def test_the_floor_never_cuts_an_exact_key() -> None:
    h = TurnHarness()
    h.say("My order ORD-7781-XK was shipped yesterday", "I prefer green tea in the morning")
    memory = next(m for m in h.state.memories.values() if "green tea" in m.content)
    exact = _recall(h, memory.id, min_relevance=1.0)  # every other item is cut
    assert [i.id for i in exact.items] == [memory.id] and exact.trace["exact_key"]
    assert _recall(h, "ORD-7781-XK", min_relevance=1.0).items == []


def test_a_query_that_names_only_a_time_range_answers_from_it_or_not_at_all() -> None:
    h = TurnHarness()
    h.say("I work as a nurse at the city hospital", "My order ORD-7781-XK was shipped")
    day = (ASKED - timedelta(days=3)).date()
    query = f"what did I do on {day.isoformat()}?"
    out = ask(h, query)
    assert out.items == [] and out.stage == "none"
    assert out.trace["floor"]["cut"].get("outside_time_range", 0) >= 2
    assert any("left out" in n for n in out.trace["notes"])
    h.drain(
        {
            **turn(9, "I planted tomatoes in the garden", session="s2"),
            "at": f"{day.isoformat()}T10:00:00+00:00",
        }
    )
    again = ask(h, query)
    assert [i.content for i in again.items] == ["I planted tomatoes in the garden"]


def test_an_assistant_question_answered_above_it_is_left_out_unless_the_query_asks_about_it() -> None:
    h = TurnHarness()
    _said(h, ("assistant", "好呀，你有什么忌口吗？"), ("user", "我不吃香菜，也不太能吃辣。"))
    out = ask(h, "我有什么忌口？")
    assert [i.content for i in out.items] == ["我不吃香菜，也不太能吃辣"], out.trace
    assert out.trace["floor"]["cut"] == {"question_answered": 1}
    about = ask(h, "你问过我什么忌口？")
    assert "好呀，你有什么忌口吗？" in [i.content for i in about.items]


def test_the_current_value_of_the_slot_a_question_asks_comes_first_and_is_never_floored() -> None:
    h = TurnHarness()
    h.say(
        "I live in Boston near the harbour",
        "I love hiking on weekends",
        "I now live in Seattle",
        "I have a cat named Mochi",
    )
    strict = _by_dense(min_relevance=0.999)  # every item is under it
    out = _recall_by(h, "where do I live?", strict)
    assert [i.content for i in out.items][:1] == ["I now live in Seattle"], out.items
    assert "the query asks for profile:home: its current memory comes first" in out.trace["notes"]
    # With history included, the superseded home keeps the model's place (here, on the harbour's
    # words, above Seattle's): it is not the current value.
    with h.store.uow() as uow:
        request = RecallRequest(
            "default", "u1", "where do I live, near the harbour?", now=ASKED, k=5,
            statuses=frozenset({MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED}),
        )  # fmt: skip
        out = recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns
        )
    assert out.items[0].content == "I now live in Seattle", [i.content for i in out.items]
    # Only history asked for: no current value, so nothing is put first for the slot.
    with h.store.uow() as uow:
        request = dataclasses.replace(request, statuses=frozenset({MemoryStatus.SUPERSEDED}))
        out = recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns
        )
    assert [i.content for i in out.items] == ["I live in Boston near the harbour"]
    assert not [n for n in out.trace["notes"] if "comes first" in n], out.trace["notes"]
    # Someone else's home, or a past one, asks for no slot: nothing is put first.
    out = _recall_by(h, "where did I live before?", strict)
    assert out.items == [] and not [n for n in out.trace["notes"] if "asks for" in n]


def _against_range(in_range_weight: float) -> RelevanceModel:
    """A fake model that scores what lies in the query's named range lower than the rest: the
    sigmoid of 3 + ``in_range_weight`` in it, of 3 (0.95) outside it."""
    weights = [in_range_weight if name == "in_time_range" else 0.0 for name in FEATURES]
    n = len(FEATURES)
    embedder = TurnHarness().embedder.model_name
    return RelevanceModel(FEATURES, (0.0,) * n, (1.0,) * n, tuple(weights), 3.0, 0.0, "fake-range", embedder)


@pytest.mark.parametrize(
    ("in_range_weight", "min_relevance", "answer", "model_order"),
    [
        (-2.0, 0.5, ["Hangzhou"], False),  # 0.73 in the range clears 0.5: it comes first
        (-6.0, 0.5, ["Lisbon"], True),  # 0.05 does not, 0.95 outside it does
        (-6.0, 0.99, [], False),  # nothing clears anywhere: no answer
    ],
)
def test_what_lies_in_a_named_range_comes_first_unless_nothing_there_clears_the_minimum(
    in_range_weight: float, min_relevance: float, answer: list[str], model_order: bool
) -> None:
    """Put first, a range that holds no answer ("last week" for a trip six weeks ago) filled the k
    slots and emptied the answer while the model had one: then recall answers in the model's
    order, and says so."""
    h = TurnHarness()
    for seq, (place, days) in enumerate((("Lisbon", 40), ("Hangzhou", 6)), 1):
        at = (ASKED - timedelta(days=days)).isoformat()
        h.drain({**turn(seq, f"I travelled to {place} for work", session=f"s{seq}"), "at": at})
    request = RecallRequest(
        "default", "u1", "where did I travel last week?", now=ASKED, k=1, min_relevance=min_relevance
    )
    with h.store.uow() as uow:
        out = recall(
            uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns,
            relevance=_against_range(in_range_weight),
        )  # fmt: skip
    assert [i.content.split()[3] for i in out.items] == answer
    said = "nothing in the named time range clears the minimum relevance: answered in the model's order"
    assert (said in out.trace["notes"]) is model_order


@pytest.mark.parametrize(
    ("state", "other", "tonight", "that_day"),
    [
        ("I work as a nurse at the city hospital, night shifts this month",
         "I don't eat coriander and can't handle spicy food", "what should I eat tonight?",
         "Where was I working on December 2?"),
        ("我在市医院当护士，这个月都上夜班", "我不吃香菜，也不太能吃辣", "今晚吃什么好？",
         "我12月2号在哪儿上班？"),
    ],
)  # fmt: skip
def test_a_standing_state_around_a_range_of_the_present_is_not_put_first(
    state: str, other: str, tonight: str, that_day: str
) -> None:
    """ "Night shifts this month" holds tonight, but "what should I eat tonight?" does not ask for
    it: the range rule puts first what lies in the range, not a state around it (the model, here
    scoring the range's items lower, orders the rest). Of a day in the past the state is what
    happened then, and comes first."""
    h = TurnHarness()
    december = NOW + timedelta(days=1)  # 2026-12-01: the state's month is December
    h.drain({**turn(1, other, session="s1"), "at": (december - timedelta(days=20)).isoformat()})
    h.drain({**turn(1, state, session="s2"), "at": december.isoformat()})
    model = _against_range(-2.0)

    def order(query: str, now: datetime) -> list[str]:
        request = RecallRequest("default", "u1", query, now=now, k=2, min_relevance=0.0)
        with h.store.uow() as uow:
            out = recall(
                uow, request, embedder=h.embedder, index=h.index, working_memory=None,
                turn_index=h.turns, relevance=model,
            )  # fmt: skip
        return [i.content for i in out.items]

    assert order(tonight, december + timedelta(days=2))[0] == other  # 12-03, "tonight" not ended
    assert order(that_day, december + timedelta(days=9))[0] == state  # 12-02, past: it lies in it
