"""Rule-based extraction (shared.ingest.extraction), what governance reads from a turn: changes,
activities, slots, polarity, interests and times (task due dates from the event time)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import DEFAULT_THRESHOLD, extract, is_change, is_negated
from shared.models import Extraction, MemoryDraft, MemoryType

CST = timezone(timedelta(hours=8))
MONDAY = datetime(2026, 11, 30, 10, 0, tzinfo=CST)


def at_monday(content: str, role: Role = Role.USER) -> Extraction:
    return extract(
        TurnPublished("e1", "t1", "u1", "s1", 1, role, content, MONDAY, {}),
    )


def only(content: str) -> MemoryDraft:
    (draft,) = at_monday(content).drafts
    return draft


def test_a_changed_habit_is_a_preference_marked_as_a_change() -> None:
    ex = at_monday("我现在改喝拿铁了")
    assert ex.importance == 6.0
    (draft,) = ex.drafts
    assert (draft.type, draft.content) == (MemoryType.PREFERENCE, "我现在改喝拿铁了")
    assert draft.change and not draft.negated
    assert draft.slot == "preference:drink"
    assert draft.tags == ("coffee", "drink", "change")
    assert "t:change" in draft.cues


@pytest.mark.parametrize(
    ("content", "negated", "slot"),
    [
        ("我不喝咖啡了", True, "preference:drink"),
        ("我不再吃香菜", True, "preference:diet:香菜"),
        ("我已经戒酒了", True, "preference:drink:alcohol"),
        ("从今天开始我只喝美式", False, "preference:drink"),
        ("I don't drink coffee anymore", True, "preference:drink"),
        ("I no longer eat meat", True, "preference:diet:meat"),
        ("I switched to decaf", False, "preference:drink"),
        ("Now I only drink green tea", False, "preference:drink"),
    ],
)
def test_changes(content: str, negated: bool, slot: str) -> None:
    ex = at_monday(content)
    assert ex.importance >= 6, ex.reasons
    (draft,) = ex.drafts
    assert draft.type is MemoryType.PREFERENCE
    assert draft.change and "change" in draft.tags
    assert draft.negated is negated
    assert draft.slot == slot


def test_a_change_keeps_the_type_of_what_changed() -> None:
    draft = only("生产数据库的端口已经改成了5433")
    assert draft.type is MemoryType.FACT
    assert draft.change


@pytest.mark.parametrize(
    "content", ["不用了，谢谢", "现在都几点了", "Not anymore", "now I see", "I'm working on it"]
)
def test_not_changes_nor_memories(content: str) -> None:
    assert at_monday(content).drafts == ()


@pytest.mark.parametrize(
    ("content", "importance", "slot", "tag"),
    [
        ("最近在写 Java 项目", 7.5, "skill:language:java", "programming"),
        ("我在上海的一家银行做数据分析师", 6.5, "profile:job", "work"),
        ("I'm learning to play the cello on weekends", 6.0, "preference:hobby:cello", "hobby"),
        ("My primary language is Python", 8.0, "profile:primary_language", "programming"),
        ("我主要用 Python", 8.0, "profile:primary_language", "programming"),
        ("I've been working on a compiler in Rust", 7.5, "skill:language:rust", "programming"),
        ("我正在准备考研", 6.0, None, "education"),
    ],
)
def test_activities_jobs_and_languages_are_profile(
    content: str, importance: float, slot: str | None, tag: str
) -> None:
    ex = at_monday(content)
    assert ex.importance == importance, ex.reasons
    (draft,) = ex.drafts
    assert draft.type is MemoryType.PROFILE
    assert draft.slot == slot
    assert tag in draft.tags
    assert not draft.negated and not draft.change
    assert draft.time_refs == ()  # "on weekends" recurs: no date


def test_statements_about_one_attribute_share_a_slot() -> None:
    dislike = only("我不用 Java")
    assert (dislike.type, dislike.entities, dislike.negated) == (MemoryType.PREFERENCE, ("java",), True)
    project = only("最近在写 Java 项目")
    assert dislike.slot == project.slot == "skill:language:java"
    assert only("我每天早上喝美式").slot == only("我现在改喝拿铁了").slot == "preference:drink"
    assert only("我住在北京").slot == only("I live in Berlin").slot == "profile:home"
    assert only("我不吃香菜").slot != only("我不吃海鲜").slot
    assert only("I like tea and coffee").slot == "preference:drink"


def test_split_drafts_get_their_own_slot_and_polarity() -> None:
    home, diet = at_monday("我住杭州，不吃香菜").drafts
    assert (home.slot, home.negated) == ("profile:home", False)
    assert (diet.slot, diet.negated) == ("preference:diet:香菜", True)


@pytest.mark.parametrize(
    "content", ["收盘了吗", "我那只基金怎么样", "今天大盘怎么样", "how did my stocks do today"]
)
def test_questions_about_a_followed_topic_are_episodes_at_the_threshold(content: str) -> None:
    ex = at_monday(content)
    assert ex.importance == DEFAULT_THRESHOLD == 5.0
    assert ex.reasons == ("question", "interest:finance")
    (draft,) = ex.drafts
    assert draft.type is MemoryType.EPISODIC
    assert draft.importance == 5.0
    assert draft.content == content
    assert "finance" in draft.tags and "question" in draft.tags
    assert draft.slot is None
    assert extract(TurnPublished("e", "t", "u", "s", 1, Role.USER, content, MONDAY, {}), 5.5).drafts == ()


def test_a_question_about_ones_own_things_is_an_episode() -> None:
    ex = at_monday("我的快递到了吗")
    assert ex.reasons == ("question", "interest:own")
    assert [(d.type, d.importance, d.tags) for d in ex.drafts] == [
        (MemoryType.EPISODIC, 5.0, ("order", "question"))
    ]


@pytest.mark.parametrize(
    "content",
    [
        "你好吗",
        "what's up",
        "How are you?",
        "What is my phone number?",
        "你还记得我的名字吗",
        "今天天气怎么样",
    ],
)
def test_chit_chat_and_recall_questions_stay_low(content: str) -> None:
    ex = at_monday(content)
    assert ex.importance < 5 and ex.drafts == ()


def test_assistant_questions_are_not_interests() -> None:
    assert at_monday("收盘了吗？", Role.ASSISTANT).drafts == ()


# Texts each cue predicate must answer True, then False for: one case per text.
CUE_CASES: dict[tuple[Callable[[str], bool], bool], list[str]] = {
    (is_negated, True): [
        "我不吃香菜",
        "我没去过日本",
        "别再给我推荐基金",
        "I don't use Java",
        "I never drink coffee",
        "I no longer live in Berlin",
        "not a fan of jazz",
    ],
    (is_negated, False): [
        "我喜欢拿铁",
        "这个不错",
        "没问题",
        "别人推荐的",
        "别忘了带伞",
        "No problem, I like it",
        "Don't forget the milk",
        "I love Python",
    ],
    (is_change, True): [
        "我现在改喝拿铁了",
        "换成燕麦奶",
        "我不再熬夜",
        "我不吃肉了",
        "现在开始每天跑步",
        "I switched to tea",
        "I don't eat meat anymore",
        "I now prefer tabs",
    ],
    (is_change, False): ["我喜欢拿铁", "不用了", "I like tea"],
}


@pytest.mark.parametrize(
    ("predicate", "text", "holds"),
    [
        pytest.param(predicate, text, holds, id=f"{predicate.__name__}-{holds}-{text}")
        for (predicate, holds), texts in CUE_CASES.items()
        for text in texts
    ],
)
def test_negation_and_change_cues(predicate: Callable[[str], bool], text: str, holds: bool) -> None:
    assert predicate(text) is holds


def test_task_due_at_from_the_event_time() -> None:
    draft = only("明天下午三点提醒我开会")
    assert draft.type is MemoryType.TASK
    assert draft.due_at == datetime(2026, 12, 1, 15, 0, tzinfo=CST)
    assert draft.time_refs == ("2026-12-01T15:00:00+08:00",)
    assert draft.content == "明天下午三点提醒我开会"


@pytest.mark.parametrize(
    ("content", "due", "refs"),
    [
        ("下周三要和老王开会讨论预算", datetime(2026, 12, 9, 23, 59, 59, tzinfo=CST), ("2026-12-09",)),
        ("Remind me to call mom next Friday at 3pm", datetime(2026, 12, 11, 15, tzinfo=CST),
         ("2026-12-11T15:00:00+08:00",)),
        ("三月份要去日本出差", datetime(2027, 3, 31, 23, 59, 59, tzinfo=CST), ("2027-03",)),
        ("in two days I need to renew my passport", datetime(2026, 12, 2, 23, 59, 59, tzinfo=CST),
         ("2026-12-02",)),
    ],
)  # fmt: skip
def test_plans_with_a_time_are_tasks_due_then(content: str, due: datetime, refs: tuple[str, ...]) -> None:
    draft = only(content)
    assert draft.type is MemoryType.TASK
    assert draft.due_at == due
    assert draft.time_refs == refs


def test_other_drafts_keep_their_times_but_have_no_due_date() -> None:
    draft = only("上周三我搬到了北京")
    assert draft.type is MemoryType.PROFILE
    assert draft.time_refs == ("2026-11-25",)
    assert draft.due_at is None
    assert only("how did my stocks do today").time_refs == ("2026-11-30",)


def test_relative_dates_are_not_entities() -> None:
    """Resolved times go to time_refs; entities and cues stay what the text itself says."""
    draft = only("Remind me to call mom next Friday at 3pm")
    assert draft.entities == ()
    assert not any(c.startswith("e:") for c in draft.cues)
