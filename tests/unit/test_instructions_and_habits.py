"""What a turn keeps (shared.ingest.extraction): an instruction to remember raises the importance
of its statement and is never a memory of its own, on the rules path and the LLM path; a habit or
routine is a kept preference; the LLM path's tasks fall due in the zone of the turn, as the rules'."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import extract, is_instruction, summarize, without_instruction
from shared.ingest.llm_paths import extract_with_llm
from shared.llm import ExtractedMemory, ExtractionAnswer, ImportanceAnswer
from shared.models import Extraction, MemoryType

CST = timezone(timedelta(hours=8))
AT = datetime(2026, 10, 5, 20, 0, tzinfo=CST)


def said(content: str) -> Extraction:
    return extract(TurnPublished("e1", "t1", "u1", "s1", 1, Role.USER, content, AT, {}))


def kept(content: str) -> list[tuple[MemoryType, str]]:
    return [(d.type, d.content) for d in said(content).drafts]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("记住，我不吃香菜！", [(MemoryType.PREFERENCE, "我不吃香菜")]),
        ("我的新手机号是13800138000，请记住。", [(MemoryType.PROFILE, "我的新手机号是13800138000")]),
        ("记住我不吃香菜", [(MemoryType.PREFERENCE, "我不吃香菜")]),
        ("Please remember this: my passport expires in May 2027.",
         [(MemoryType.FACT, "my passport expires in May 2027")]),
        ("Please remember that I'm allergic to peanuts.",
         [(MemoryType.PREFERENCE, "I'm allergic to peanuts")]),
        ("Keep in mind, I hate olives", [(MemoryType.PREFERENCE, "I hate olives")]),
    ],
)  # fmt: skip
def test_an_instruction_to_remember_is_cut_from_the_memory(
    content: str, expected: list[tuple[MemoryType, str]]
) -> None:
    assert kept(content) == expected


@pytest.mark.parametrize(
    ("instructed", "plain"),
    [
        ("记住，我不吃香菜！", "我不吃香菜！"),
        ("我住在杭州西湖区，请记住。", "我住在杭州西湖区。"),
        # Alone the date is not worth keeping; asked to, it is.
        ("Please remember this: my passport expires in May 2027.", "my passport expires in May 2027."),
    ],
)
def test_the_instruction_raises_the_importance_of_its_statement(instructed: str, plain: str) -> None:
    told, unasked = said(instructed), said(plain)
    [draft] = told.drafts
    assert draft.content == summarize(plain)
    assert draft.importance == told.importance > unasked.importance
    assert [d.content for d in unasked.drafts] in ([], [draft.content])


@pytest.mark.parametrize(
    "content", ["记住了", "请记住。", "Remember this!", "Please remember, ok?", "好的，记住了"]
)
def test_an_instruction_alone_is_no_memory(content: str) -> None:
    assert said(content).drafts == ()


@pytest.mark.parametrize(
    "content",
    [
        "Remember to call mom tomorrow",  # a task, not an instruction
        "我记住了他的名字",
        "I can't remember.",
        "我想记住这个时刻",
    ],
)
def test_remember_as_a_verb_is_not_an_instruction(content: str) -> None:
    assert not is_instruction(content)
    assert without_instruction(content) == content


def test_a_reminder_to_do_something_stays_a_task() -> None:
    assert kept("Remember to call mom tomorrow") == [(MemoryType.TASK, "Remember to call mom tomorrow")]


def test_an_instruction_between_two_statements_goes() -> None:
    assert without_instruction("我不吃香菜。记住这一点。我住杭州") == "我不吃香菜。我住杭州"


class _ScriptedLLM:
    """A fake LLM port: answers from a script in order."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def ask(self, operation: Any, instructions: str, data: Any, schema: Any) -> Any:
        return self.answers.pop(0) if self.answers else None


def _memory(type_: str, content: str) -> ExtractedMemory:
    return ExtractedMemory(type=type_, content=content, importance=7)  # type: ignore[arg-type]


def test_the_llm_path_keeps_no_instruction_as_a_memory() -> None:
    event = TurnPublished("e1", "t1", "u1", "s1", 1, Role.USER, "我的新手机号是13800138000，请记住。", AT, {})
    answer = ExtractionAnswer(
        memories=[_memory("profile", "我的新手机号是13800138000"), _memory("fact", "请记住")]
    )
    out = extract_with_llm(event, 5.0, _ScriptedLLM(ImportanceAnswer(importance=8), answer))
    assert [(d.type, d.content) for d in out.drafts] == [(MemoryType.PROFILE, "我的新手机号是13800138000")]

    passport = TurnPublished(
        "e2", "t1", "u1", "s1", 2, Role.USER, "Please remember this: my passport expires in May 2027.", AT, {}
    )
    worded = ExtractionAnswer(memories=[_memory("fact", "Remember this: my passport expires in May 2027")])
    out = extract_with_llm(passport, 5.0, _ScriptedLLM(ImportanceAnswer(importance=8), worded))
    assert [d.content for d in out.drafts] == ["my passport expires in May 2027"]

    only_instruction = ExtractionAnswer(memories=[_memory("fact", "请记住")])
    out = extract_with_llm(event, 5.0, _ScriptedLLM(ImportanceAnswer(importance=8), only_instruction))
    assert [d.content for d in out.drafts] == ["我的新手机号是13800138000"]  # the rules' draft


def test_the_llm_paths_tasks_fall_due_in_the_zone_of_the_turn() -> None:
    told = datetime.fromisoformat("2026-10-05T20:03:00+08:00")
    turn = TurnPublished("e1", "t1", "u1", "s1", 1, Role.USER, "下周三下午三点要去医院复查", told, {})
    for words in ("下周三下午三点去医院复查", "去医院复查"):  # the model kept the time, or dropped it
        answer = ExtractionAnswer(memories=[_memory("task", words)])
        [draft] = extract_with_llm(turn, 5.0, _ScriptedLLM(ImportanceAnswer(importance=7), answer)).drafts
        assert draft.due_at == datetime(2026, 10, 14, 15, 0, tzinfo=CST), words
        assert draft.time_refs == ("2026-10-14T15:00:00+08:00",)


# -- habits and routines: kept as preferences ---------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "我每天早上都喝美式咖啡，不加糖",
        "我每天早上七点起床",
        "我每周三晚上去游泳",
        "我平时一般骑车上班",
        "我周末一般去爬山",
        "I walk the dog every evening around 7.",
        "I usually take the bus to work",
        "Every morning I run 5k",
        "We go hiking every weekend",
    ],
)
def test_a_habit_is_a_kept_preference(content: str) -> None:
    [(type_, words)] = kept(content)
    assert type_ is MemoryType.PREFERENCE
    assert words == summarize(content)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("每天早上8点提醒我吃药", [MemoryType.TASK]),  # a recurring reminder stays a task
        ("I have a meeting every Monday at 10am", [MemoryType.TASK]),
        ("I went to the gym every day last week", []),  # the past is no habit
        ("I walked the dog every evening", []),
        ("他每天都喝酒", []),  # someone else's habit
        ("我每天都很累", []),  # no routine done
        ("我每周做什么运动", []),  # a question
    ],
)
def test_what_is_not_a_habit_of_the_user(content: str, expected: list[MemoryType]) -> None:
    assert [t for t, _ in kept(content)] == expected
