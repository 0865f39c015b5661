"""Recall on fakes: an assistant's question never outranks the user's answer (unless the query asks
what the assistant said), and the relevance floor leaves chit-chat and far-off fillers out of the
answer, never an exact key or a confident cue hit, and says so in the trace."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from shared.events import Role, TurnPublished
from shared.recall import floor
from shared.recall.cascade import recall
from shared.recall.explain import Fused, Trace
from shared.recall.fusion import prior
from shared.recall.request import Candidate, RecallRequest, turn_item
from shared.recall.roles import asks_assistant, may_answer_first
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


def test_an_assistant_question_weighs_half_unless_the_query_asks_about_the_assistant() -> None:
    question = _turn_candidate(Role.ASSISTANT, "好呀，你有什么忌口吗？")
    advice = _turn_candidate(Role.ASSISTANT, "那可以试试西湖醋鱼。")
    asked = _turn_candidate(Role.USER, "你有什么推荐吗？")
    # 0.5: an assistant turn that only asks (docs/ARCHITECTURE.md, "Who said it").
    assert prior(question) == pytest.approx(0.5 * prior(asked))
    assert prior(question, about_assistant=True) == prior(advice) == prior(asked)
    assert not may_answer_first(question, False) and may_answer_first(question, True)
    assert may_answer_first(advice, False)


def test_the_users_answer_outranks_the_assistants_question_on_the_same_words() -> None:
    h = TurnHarness()
    # The user's answer does not follow the question at once: it ranks by its own words only.
    _said(h, ("assistant", "好呀，你有什么忌口吗？"), ("user", "嗯"), ("user", "我不吃香菜，也不太能吃辣。"))
    out = ask(h, "我有什么忌口？")
    contents = [i.content for i in out.items]
    assert contents[0] == "我不吃香菜，也不太能吃辣", out.trace
    assert "好呀，你有什么忌口吗？" in contents  # still searchable, only lower
    question = next(i for i in out.items if i.content == "好呀，你有什么忌口吗？")
    assert question.explanation["role"] == "assistant" and question.explanation["prior"] < 0.6
    about = ask(h, "你问过我什么忌口？")
    asked = next(i for i in about.items if i.content == "好呀，你有什么忌口吗？")
    assert asked.explanation["prior"] > 0.9


def test_an_assistant_question_never_answers_first_as_a_confident_cue_hit() -> None:
    h = TurnHarness()
    _said(h, ("assistant", "你的订单 ORD-7781 收到了吗？"), ("user", "我的订单 ORD-7781 昨天到了"))
    out = _recall(h, "ORD-7781 收到了吗", session_id="s1")  # the session's turns are working memory
    assert out.stage == "deterministic"
    assert out.items[0].content == "我的订单 ORD-7781 昨天到了", out.items
    assert all(i.explanation["ranked_by"] != "cue" for i in out.items if i.content.startswith("你的订单"))


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
    assert floor.is_filler_text(text)


@pytest.mark.parametrize("text", ["我不吃香菜", "yes, the blue one", "E42", "lol we saw a red fox"])
def test_a_text_with_content_is_no_filler(text: str) -> None:
    assert not floor.is_filler_text(text)


def _cand(key: str, fused: Fused, score: float, dense: float | None) -> Candidate:
    c = _turn_candidate(Role.USER, f"the {key} statement about gardening")
    c.item.id = key
    if dense is not None:
        c.scores["turn_vector"] = dense
    fused.fused[key] = score
    return c


def _fill(cands: list[Candidate], fused: Fused, **fields: object) -> tuple[list[str], Trace]:
    request = dataclasses.replace(RecallRequest("default", "u1", "gardening", now=ASKED, k=5), **fields)
    trace = Trace(request)
    kept = floor.fill(cands, request, [], fused, _no_cues(), [], trace)
    return [c.item.id for c in kept], trace


def _no_cues():
    from shared.cues import query_cues

    return query_cues("gardening")


@pytest.mark.parametrize("fused_scale", [1.0, 0.1], ids=["fused-x1", "fused-x0.1"])
@pytest.mark.parametrize("dense_scale", [1.0, 0.5], ids=["dense-x1", "dense-x0.5"])
def test_the_relative_floor_cuts_only_what_is_far_below_by_fused_score_and_by_meaning(
    fused_scale: float, dense_scale: float
) -> None:
    """The floor is a fraction of the best match's scores, whatever their scale: the same answer
    for scores ten times smaller (few paths agreeing) or cosines half as large (another model).
    No fixed floor passes every scale: ``far`` must be cut at 0.04 and ``mid`` kept at 0.006, a
    cosine of 0.5 must not save ``far`` while one of 0.425 saves ``near``."""
    fused = Fused()
    f, d = fused_scale, dense_scale
    best = _cand("best", fused, 0.5 * f, 0.9 * d)
    far = _cand("far", fused, 0.04 * f, 0.5 * d)  # under 0.1 x best, and 0.5 < 0.9 x 0.9
    mid = _cand("mid", fused, 0.06 * f, 0.5 * d)  # as far in meaning, but over 0.1 x best
    near = _cand("near", fused, 0.04 * f, 0.85 * d)  # as low as far, but as close in meaning as best
    relative_only = {"floor_absolute": 0.0}
    kept, trace = _fill([best, far, mid, near], fused, **relative_only)
    assert kept == ["best", "mid", "near"]
    assert trace.cut == {"below_relative_floor": 1}
    assert _fill([best, far, mid, near], fused, floor_relative=0.0, **relative_only)[0] == [
        "best", "far", "mid", "near"
    ]  # fmt: skip


def test_the_absolute_floor_cuts_a_lone_weak_match_even_when_close_in_meaning() -> None:
    fused = Fused()
    cands = [_cand("best", fused, 0.5, 0.9), _cand("weak", fused, 0.005, 0.9)]
    kept, trace = _fill(cands, fused)
    assert kept == ["best"] and trace.cut == {"below_absolute_floor": 1}
    assert _fill(cands, fused, floor_absolute=0.0)[0] == ["best", "weak"]


def test_the_floor_never_cuts_an_exact_key_or_a_confident_cue_hit() -> None:
    h = TurnHarness()
    h.say("My order ORD-7781-XK was shipped yesterday", "I prefer green tea in the morning")
    shut = {"floor_relative": 1.0, "floor_dense": 2.0, "floor_absolute": 1e9}  # every filler is cut
    out = _recall(h, "ORD-7781-XK", **shut)
    assert [i.explanation["ranked_by"] for i in out.items] == ["cue"], out.items
    assert out.trace["floor"]["cut"] == {"below_absolute_floor": 1}
    memory = next(m for m in h.state.memories.values() if "green tea" in m.content)
    exact = _recall(h, memory.id, **shut)
    assert [i.id for i in exact.items] == [memory.id] and exact.trace["exact_key"]


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
