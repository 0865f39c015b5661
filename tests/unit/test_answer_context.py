"""A user's answer is read in the light of the assistant's question just before it: the answer's
memory gets the question's cue keys and tags (and, when the answer says nothing alone, the type of
the rule the question fires), never the question's text."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.answers import answer_context, first_person
from shared.ingest.extraction import extract
from shared.ingest.llm_paths import extract_with_llm
from shared.language.clauses import question_text
from shared.llm import ImportanceAnswer, LLMOperation
from shared.models import MemoryType
from tests.support.pipeline import Harness, turn

AT = datetime(2026, 11, 2, 18, 5, tzinfo=UTC)
T = TypeVar("T")


def _turn(content: str, role: Role = Role.USER) -> TurnPublished:
    return TurnPublished("e2", "default", "u1", "s1", 2, role, content, AT, {})


def test_question_text_keeps_only_the_question_clauses() -> None:
    assert question_text("好呀，你有什么忌口吗？") == "你有什么忌口吗？"
    assert question_text("Sure. Which colour do you prefer?").strip() == "Which colour do you prefer?"
    assert question_text("那可以试试西湖醋鱼。") == ""


def test_the_question_is_read_as_the_users_own_statement() -> None:
    assert first_person("你有什么忌口吗？") == "我有什么忌口吗？"
    assert first_person("which colour do you prefer? Are you sure?") == "which colour do I prefer? am I sure?"


def test_chinese_answer_takes_the_questions_cues_but_not_its_text() -> None:
    alone = extract(_turn("我不吃香菜，也不太能吃辣。")).drafts[0]
    answered = extract(_turn("我不吃香菜，也不太能吃辣。"), 5.0, "你有什么忌口吗？").drafts[0]
    assert "k:忌口" not in alone.cues and "k:忌口" in answered.cues
    assert "diet" in answered.tags and answered.type is MemoryType.PREFERENCE
    assert answered.content == alone.content == "我不吃香菜，也不太能吃辣"
    assert answered.importance == alone.importance  # memorable alone: the question adds cues only


def test_english_answer_that_says_nothing_alone_is_kept_as_what_it_answers() -> None:
    assert extract(_turn("yes, the blue one")).drafts == ()
    out = extract(_turn("yes, the blue one"), 5.0, "Which colour do you prefer?")
    (draft,) = out.drafts
    assert draft.type is MemoryType.PREFERENCE and "answers:preference" in out.reasons
    assert {"k:colour", "k:blue"} <= set(draft.cues)
    assert "colour" not in draft.content.lower()


def test_chinese_short_answer_is_kept_as_a_preference() -> None:
    (draft,) = extract(_turn("蓝色"), 5.0, "你喜欢什么颜色？").drafts
    assert draft.content == "蓝色" and draft.type is MemoryType.PREFERENCE and "k:颜色" in draft.cues


@pytest.mark.parametrize("reply", ["好的", "lol ok", "你呢？"])
def test_chit_chat_and_counter_questions_take_nothing(reply: str) -> None:
    assert extract(_turn(reply), 5.0, "你有什么忌口吗？").drafts == ()


def test_only_a_question_put_to_the_user_and_only_to_a_users_turn_counts() -> None:
    assert answer_context("什么时候发货？") is None  # asked of no one
    assert extract(_turn("the blue one", Role.ASSISTANT), 5.0, "Which colour do you prefer?").drafts == ()


def _said(h: Harness, *turns: tuple[str, str]) -> None:
    for seq, (role, content) in enumerate(turns, 1):
        h.drain({**turn(seq, content), "role": role})


def test_the_extract_stage_reads_the_assistant_question_just_before_the_answer() -> None:
    h = Harness()
    _said(
        h,
        ("user", "想请你帮我想想今晚吃什么"),
        ("assistant", "好呀，你有什么忌口吗？"),
        ("user", "我不吃香菜"),
    )
    (memory,) = h.state.memories.values()
    assert memory.content == "我不吃香菜" and "k:忌口" in memory.cues


def test_a_turn_after_a_user_turn_or_an_assistant_statement_gets_no_context() -> None:
    h = Harness()
    _said(
        h,
        ("assistant", "你有什么忌口吗？"),
        ("user", "好的"),
        ("user", "我不吃香菜"),
        ("assistant", "那可以试试西湖醋鱼。"),
        ("user", "我住杭州"),
    )
    assert all("k:忌口" not in m.cues for m in h.state.memories.values())
    assert {m.content for m in h.state.memories.values()} == {"我不吃香菜", "我住杭州"}


class _ScriptedLLM:
    """Answers scoring with 8 and extraction with one preference memory: the LLM path's shape."""

    def ask(
        self, operation: LLMOperation, instructions: str, data: Mapping[str, str], schema: type[T]
    ) -> T | None:
        if schema is ImportanceAnswer:
            return schema.model_validate({"importance": 8})
        return schema.model_validate(
            {"memories": [{"type": "preference", "content": "不吃香菜", "importance": 8, "tags": ["food"]}]}
        )


def test_the_llm_paths_drafts_take_the_questions_cues_too() -> None:
    out = extract_with_llm(_turn("我不吃香菜"), 5.0, _ScriptedLLM(), "你有什么忌口吗？")
    (draft,) = out.drafts
    assert draft.content == "不吃香菜" and "k:忌口" in draft.cues and "food" in draft.tags
    assert "k:忌口" not in extract_with_llm(_turn("我不吃香菜"), 5.0, _ScriptedLLM()).drafts[0].cues
