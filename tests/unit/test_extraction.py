"""Rule-based extraction (shared.ingest.extraction): importance, drafts, splitting, summaries."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import MAX_SUMMARY_CHARS, extract, summarize
from shared.models import Extraction, MemoryType


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
