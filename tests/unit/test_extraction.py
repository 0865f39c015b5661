"""Rule-based extraction (shared.ingest.extraction): importance, drafts, splitting, summaries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import (
    DEFAULT_THRESHOLD,
    MAX_SUMMARY_CHARS,
    extract,
    is_change,
    is_negated,
    summarize,
)
from shared.models import Extraction, MemoryDraft, MemoryType


def turn(content: str, role: Role = Role.USER, event_id: str = "e1") -> TurnPublished:
    return TurnPublished(
        event_id=event_id,
        tenant_id="t1",
        user_id="u1",
        session_id="s1",
        seq=1,
        role=role,
        content=content,
        at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        metadata={},
    )


def summary(ex: Extraction) -> list[tuple[MemoryType, str]]:
    return [(d.type, d.content) for d in ex.drafts]


@pytest.mark.parametrize(
    "content",
    [
        "好的，谢谢",
        "哈哈哈",
        "lol ok",
        "Hi there!",
        "谢谢你！👍",
        "👍👍",
        "嗯嗯 好的",
        "Thanks, got it",
        "How are you?",
    ],
)
def test_chit_chat_greetings_and_questions_score_low(content: str) -> None:
    ex = extract(turn(content))
    assert ex.importance < 5
    assert ex.drafts == ()


def test_chit_chat_reason() -> None:
    assert extract(turn("好的，谢谢")).reasons == ("chit_chat",)


def test_pure_question_is_not_a_memory() -> None:
    ex = extract(turn("我喜欢什么咖啡？"))
    assert ex.importance < 5 and ex.drafts == ()
    assert ex.reasons == ("question",)
    assert extract(turn("What is the deploy port?")).drafts == ()


def test_port_fact() -> None:
    ex = extract(turn("生产环境部署端口是8443"))
    assert ex.importance >= 5
    (draft,) = ex.drafts
    assert draft.type is MemoryType.FACT
    assert draft.content == "生产环境部署端口是8443"
    assert draft.entities == ("8443",)
    assert "deployment" in draft.tags
    assert "e:8443" in draft.cues and "t:deployment" in draft.cues and "k:端口" in draft.cues


def test_chinese_food_preference() -> None:
    ex = extract(turn("我不吃香菜"))
    (draft,) = ex.drafts
    assert draft.type is MemoryType.PREFERENCE
    assert draft.content == "我不吃香菜"
    assert "diet" in draft.tags
    assert "preference" in ex.reasons
    assert draft.importance == ex.importance >= 5


def test_reminder_is_a_task() -> None:
    ex = extract(turn("提醒我明天下午三点开会"))
    assert summary(ex) == [(MemoryType.TASK, "提醒我明天下午三点开会")]
    assert "todo" in ex.drafts[0].tags


def test_order_id_entity() -> None:
    ex = extract(turn("My order ORD-2023-1105 hasn't arrived"))
    assert ex.importance >= 5
    (draft,) = ex.drafts
    assert draft.entities == ("ord-2023-1105",)
    assert draft.type is MemoryType.EPISODIC
    assert "e:ord-2023-1105" in draft.cues


def test_two_facts_in_one_chinese_turn_become_two_drafts() -> None:
    ex = extract(turn("我住杭州，不吃香菜"))
    assert summary(ex) == [(MemoryType.PROFILE, "我住杭州"), (MemoryType.PREFERENCE, "不吃香菜")]
    assert "home" in ex.drafts[0].tags
    assert "diet" in ex.drafts[1].tags
    assert ex.importance >= max(d.importance for d in ex.drafts)


def test_two_facts_in_one_english_turn_become_two_drafts() -> None:
    ex = extract(turn("I live in Berlin and I'm allergic to peanuts"))
    assert summary(ex) == [
        (MemoryType.PROFILE, "I live in Berlin"),
        (MemoryType.PREFERENCE, "I'm allergic to peanuts"),
    ]
    assert ex.drafts[0].entities == ("berlin",)
    assert "diet" in ex.drafts[1].tags


def test_same_kind_clauses_stay_together() -> None:
    assert summary(extract(turn("我不吃香菜，也不吃葱"))) == [(MemoryType.PREFERENCE, "我不吃香菜，也不吃葱")]
    assert summary(extract(turn("型号 X200，故障码 E42"))) == [(MemoryType.FACT, "型号 X200，故障码 E42")]


def test_unmemorable_clause_is_not_split_off() -> None:
    ex = extract(turn("I like tea and coffee"))
    assert summary(ex) == [(MemoryType.PREFERENCE, "I like tea and coffee")]


def test_job_is_profile() -> None:
    ex = extract(turn("I work as a nurse in Boston"))
    (draft,) = ex.drafts
    assert draft.type is MemoryType.PROFILE
    assert draft.entities == ("boston",)
    assert "work" in draft.tags


def test_device_model_and_error_code() -> None:
    ex = extract(turn("型号 X200，故障码 E42"))
    assert ex.importance >= 5
    assert ex.drafts[0].entities == ("x200", "e42")
    assert {"device", "error"} <= set(ex.drafts[0].tags)


def test_statement_with_a_question_keeps_only_the_statement() -> None:
    assert summary(extract(turn("我住杭州，你呢？"))) == [(MemoryType.PROFILE, "我住杭州")]


def test_request_phrased_as_question_is_a_task() -> None:
    ex = extract(turn("Can you remind me to call my mom tomorrow?"))
    assert [d.type for d in ex.drafts] == [MemoryType.TASK]


def test_filler_is_trimmed() -> None:
    assert summary(extract(turn("嗯，我不吃香菜。"))) == [(MemoryType.PREFERENCE, "我不吃香菜")]
    assert summary(extract(turn("Well, I prefer tea.")))[0][1] == "I prefer tea"
    assert summary(extract(turn("你好，我叫张伟")))[0] == (MemoryType.PROFILE, "我叫张伟")


@pytest.mark.parametrize(
    ("content", "expected_type", "tag"),
    [
        ("以后不要给我推荐基金了", MemoryType.PREFERENCE, "finance"),
        ("Please never send me emails after 10pm", MemoryType.PREFERENCE, "instruction"),
        ("We decided to use Postgres for the event store", MemoryType.FACT, "database"),
        ("我在阿里巴巴工作", MemoryType.PROFILE, "work"),
        ("My wife is a teacher", MemoryType.PROFILE, "family"),
        ("我明天要去上海出差", MemoryType.TASK, "travel"),
        ("I visited Paris last summer with Caroline", MemoryType.EPISODIC, None),
        ("Remember that the wifi password is hunter2", MemoryType.FACT, None),
    ],
)
def test_types(content: str, expected_type: MemoryType, tag: str | None) -> None:
    ex = extract(turn(content))
    assert ex.importance >= 5, ex.reasons
    assert [d.type for d in ex.drafts] == [expected_type]
    if tag is not None:
        assert tag in ex.drafts[0].tags


def test_experience_without_details_is_not_memorable() -> None:
    assert extract(turn("我昨天去了趟超市")).drafts == ()


def test_assistant_first_person_is_not_the_users_preference() -> None:
    assert extract(turn("I prefer dark mode and I need to finish the report", Role.ASSISTANT)).drafts == ()
    ex = extract(turn("Sure! I'll remind you tomorrow at 9am about the dentist appointment.", Role.ASSISTANT))
    assert summary(ex) == [
        (MemoryType.TASK, "I'll remind you tomorrow at 9am about the dentist appointment"),
    ]


def test_system_and_tool_turns_need_entities() -> None:
    assert extract(turn("You are a helpful assistant.", Role.SYSTEM)).importance < 5
    assert extract(turn("The deploy finished successfully.", Role.TOOL)).importance < 5
    ex = extract(turn("Deployed build v2.3.1 to port 8443", Role.TOOL))
    assert ex.importance >= 5
    assert ex.drafts[0].type is MemoryType.FACT
    assert ex.drafts[0].entities == ("v2.3.1", "8443")
    assert "role:tool" in ex.reasons


def test_long_turn_is_summarised_around_its_key_number() -> None:
    filler = "今天我们聊了很多关于项目进展的事情，大家都觉得进度还可以。"
    content = filler * 35 + "生产数据库的端口已经改成了5433。" + filler * 35
    assert len(content) >= 2000
    ex = extract(turn(content))
    assert ex.importance >= 5
    (draft,) = ex.drafts
    assert len(draft.content) <= MAX_SUMMARY_CHARS
    assert "5433" in draft.content
    assert "5433" in draft.entities
    assert draft.type is MemoryType.FACT


def test_long_english_turn_is_cut_at_a_sentence_boundary() -> None:
    content = (
        "We spent the afternoon talking about the roadmap and the team. " * 15
        + "The staging server now runs on port 9443 after the migration. "
        + "Everyone said the meeting was useful but long. " * 15
    )
    (draft,) = extract(turn(content)).drafts
    assert draft.content == "The staging server now runs on port 9443 after the migration"


def test_summary_never_cuts_a_number_or_code_in_half() -> None:
    for pad in range(85, 100):
        text = "部署说明" + "啊" * pad + " ORD-2023-1105 和 12345678 都要记录下来"
        out = summarize(text)
        assert len(out) <= MAX_SUMMARY_CHARS
        for code in re.findall(r"[A-Za-z0-9-]+", out):
            assert code in ("ORD-2023-1105", "12345678"), out


def test_summary_cut_respects_thousands_separator() -> None:
    text = "预算" + "很" * 90 + "多，总共是 1,234,567 元左右，需要在下周确认"
    out = summarize(text)
    assert len(out) <= MAX_SUMMARY_CHARS
    assert "1,234,567" in out or not re.search(r"\d", out)


def test_every_draft_is_short_and_carries_its_cues() -> None:
    samples = [
        "我住杭州，不吃香菜",
        "I live in Berlin and I'm allergic to peanuts",
        "型号 X200，故障码 E42",
        "My order ORD-2023-1105 hasn't arrived",
        "x" * 300 + " port 8443 is the deploy port",
    ]
    for content in samples:
        ex = extract(turn(content))
        assert 0 <= ex.importance <= 10
        for d in ex.drafts:
            assert 0 < len(d.content) <= MAX_SUMMARY_CHARS
            for entity in d.entities:
                assert f"e:{entity}" in d.cues
            for tag in d.tags:
                assert f"t:{tag}" in d.cues


def test_deterministic() -> None:
    content = "我住杭州，不吃香菜。提醒我明天下午三点开会，订单号 ORD-2023-1105"
    first = extract(turn(content))
    assert first == extract(turn(content))
    assert first == extract(turn(content, event_id="another-event"))


def test_threshold_is_respected() -> None:
    ex = extract(turn("生产环境部署端口是8443"))
    assert 5 <= ex.importance < 9.9
    high = extract(turn("生产环境部署端口是8443"), threshold=9.9)
    assert high.importance == ex.importance
    assert high.drafts == ()
    low = extract(turn("今天天气不错"), threshold=0.5)
    assert extract(turn("今天天气不错")).drafts == ()
    assert [d.content for d in low.drafts] == ["今天天气不错"]


# --- governance: changes, activities, slots, polarity, interests and times ---------------------------

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


@pytest.mark.parametrize(
    ("text", "negated"),
    [
        ("我不吃香菜", True),
        ("我没去过日本", True),
        ("别再给我推荐基金", True),
        ("I don't use Java", True),
        ("I never drink coffee", True),
        ("I no longer live in Berlin", True),
        ("not a fan of jazz", True),
        ("我喜欢拿铁", False),
        ("这个不错", False),
        ("没问题", False),
        ("别人推荐的", False),
        ("别忘了带伞", False),
        ("No problem, I like it", False),
        ("Don't forget the milk", False),
        ("I love Python", False),
    ],
)
def test_is_negated(text: str, negated: bool) -> None:
    assert is_negated(text) is negated


@pytest.mark.parametrize(
    ("text", "change"),
    [
        ("我现在改喝拿铁了", True),
        ("换成燕麦奶", True),
        ("我不再熬夜", True),
        ("我不吃肉了", True),
        ("现在开始每天跑步", True),
        ("I switched to tea", True),
        ("I don't eat meat anymore", True),
        ("I now prefer tabs", True),
        ("我喜欢拿铁", False),
        ("不用了", False),
        ("I like tea", False),
    ],
)
def test_is_change(text: str, change: bool) -> None:
    assert is_change(text) is change


def test_task_due_at_from_the_event_time() -> None:
    draft = only("明天下午三点提醒我开会")
    assert draft.type is MemoryType.TASK
    assert draft.due_at == datetime(2026, 12, 1, 15, 0, tzinfo=CST)
    assert draft.time_refs == ("2026-12-01T15:00:00+08:00",)
    assert draft.content == "明天下午三点提醒我开会"


@pytest.mark.parametrize(
    ("content", "due", "refs"),
    [
        ("下周三要和老王开会讨论预算", datetime(2026, 12, 9, tzinfo=CST), ("2026-12-09",)),
        ("Remind me to call mom next Friday at 3pm", datetime(2026, 12, 11, 15, tzinfo=CST),
         ("2026-12-11T15:00:00+08:00",)),
        ("三月份要去日本出差", datetime(2027, 3, 1, tzinfo=CST), ("2027-03",)),
        ("in two days I need to renew my passport", datetime(2026, 12, 2, tzinfo=CST), ("2026-12-02",)),
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
