"""The prompt block and the token budget (shared.recall.prompt): known outputs, cuts, order, determinism."""

from __future__ import annotations

from typing import Any

import pytest

from shared.language.text import approx_token_count
from shared.recall.prompt import (
    LABELS,
    TYPE_ORDER,
    choose_language,
    fit_budget,
    item_line,
    label,
    prompt_block,
)
from shared.recall.request import RecallItem


def item(content: str, type_: str, created_at: str = "2026-11-01T09:00:00+00:00") -> dict[str, Any]:
    return {"content": content, "type": type_, "created_at": created_at}


def recall_item(content: str, type_: str, created_at: str = "2026-11-01T09:00:00+00:00") -> RecallItem:
    return RecallItem(
        id=f"m-{content}",
        content=content,
        type=type_,
        score=1.0,
        status="active",
        sources=[],
        explanation={},
        created_at=created_at,
    )


# Rank order (best first) deliberately differs from the group order.
ZH = [
    item("我不吃香菜", "preference", "2026-11-01T09:00:00+08:00"),
    item("生产环境部署端口是8443", "fact", "2026-11-02T01:00:00+00:00"),
    item("我住在上海，是一名护士", "profile", "2026-10-30T12:00:00+00:00"),
    item("提醒我明天下午三点开会", "working", "2026-11-03T10:00:00+00:00"),
]
# Costs (approx_token_count): header + line for each group, by rank:
# preference 10 + 12 = 22, fact 8 + 17 = 25, profile 10 + 17 = 27, working 5 + 18 = 23.

ZH_BLOCK = """[长期记忆 - 个人信息]
- 我住在上海，是一名护士 (2026-10-30)

[长期记忆 - 用户偏好]
- 我不吃香菜 (2026-11-01)

[长期记忆 - 事实]
- 生产环境部署端口是8443 (2026-11-02)

[当前对话]
- 提醒我明天下午三点开会 (2026-11-03)"""

EN = [
    item("I prefer green tea over coffee", "preference", "2026-11-01T09:00:00+00:00"),
    item("Dentist appointment next Friday at 3pm", "task", "2026-11-04T09:00:00+00:00"),
    item("I live in Berlin and work as a nurse", "profile", "2026-10-01T09:00:00+00:00"),
    item("I drink oat milk lattes in the morning", "preference", "2026-10-15T09:00:00+00:00"),
    item("Went hiking in the Alps with Anna", "episodic", "2026-09-20T09:00:00+00:00"),
    item("User often talks about fund investing", "semantic", "2026-11-05T09:00:00+00:00"),
]

EN_BLOCK = """[Long-term memory - profile]
- I live in Berlin and work as a nurse (2026-10-01)

[Long-term memory - preferences]
- I prefer green tea over coffee (2026-11-01)
- I drink oat milk lattes in the morning (2026-10-15)

[Long-term memory - tasks]
- Dentist appointment next Friday at 3pm (2026-11-04)

[Long-term memory - summaries]
- User often talks about fund investing (2026-11-05)

[Long-term memory - episodes]
- Went hiking in the Alps with Anna (2026-09-20)"""


# --- fit_budget -------------------------------------------------------------------------------


def test_fit_budget_keeps_rank_order_while_contents_fit() -> None:
    items = [item("a" * 4, "fact"), item("bb", "fact"), item("cc", "fact")]  # 2 tokens each
    assert [approx_token_count(i["content"]) for i in items] == [2, 2, 2]
    assert fit_budget(items, 4) == items[:2]
    assert fit_budget(items, 6) == items
    assert fit_budget(items, 100) == items


def test_fit_budget_skips_an_item_that_does_not_fit_and_keeps_later_smaller_ones() -> None:
    big = item("我住在上海，是一名护士", "profile")  # 11 tokens
    small = item("我不吃香菜", "preference")  # 5 tokens
    first = item("部署端口8443", "fact")  # 6 tokens
    assert [approx_token_count(i["content"]) for i in (first, big, small)] == [6, 11, 5]
    assert fit_budget([first, big, small], 12) == [first, small]
    assert fit_budget([first, big, small], 17) == [first, big]
    assert fit_budget([big, small], 4) == []


@pytest.mark.parametrize("budget", [0, -5])
def test_fit_budget_without_budget_keeps_nothing(budget: int) -> None:
    assert fit_budget(ZH, budget) == []


def test_fit_budget_takes_recall_items_and_returns_the_same_objects() -> None:
    items = [recall_item("我不吃香菜", "preference"), recall_item("I prefer green tea", "preference")]
    kept = fit_budget(items, 5)
    assert kept == [items[0]] and kept[0] is items[0]
    assert fit_budget([], 10) == []


# --- prompt_block -----------------------------------------------------------------------------


def test_chinese_block_groups_by_type_in_fixed_order() -> None:
    assert prompt_block(ZH) == ZH_BLOCK


def test_english_block_groups_by_type_in_fixed_order_keeping_rank_inside_a_group() -> None:
    assert prompt_block(EN) == EN_BLOCK


def test_block_language_can_be_forced() -> None:
    block = prompt_block(ZH, language="en")
    assert block.splitlines()[0] == "[Long-term memory - profile]"
    assert "[Current conversation]" in block and "[长期记忆" not in block
    assert prompt_block(EN, language="zh").startswith("[长期记忆 - 个人信息]\n- I live in Berlin")


def test_block_language_follows_the_query_then_the_items() -> None:
    assert prompt_block(EN, query="我喝什么茶？").startswith("[长期记忆 - 个人信息]")
    assert prompt_block(ZH, query="what do I eat?").startswith("[Long-term memory - profile]")
    # A query without letters ("8443") says nothing: the items decide.
    assert prompt_block(ZH, query="8443") == ZH_BLOCK
    assert choose_language(ZH) == "zh" and choose_language(EN) == "en"
    assert choose_language([]) == "en"
    # A tie between items is settled by all contents read together.
    assert choose_language([item("我不吃香菜，也不吃葱", "preference"), item("I use Java", "fact")]) == "zh"


def test_budget_cuts_by_rank_and_counts_headers() -> None:
    # Exactly the first item with its header (10 + 12).
    assert prompt_block(ZH, budget_tokens=22) == "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)"
    # One token short: the first item does not fit, nor does any other.
    assert prompt_block(ZH, budget_tokens=21) == ""
    # 22 + 25: preference then fact, in group order.
    assert prompt_block(ZH, budget_tokens=47) == (
        "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)\n\n"
        "[长期记忆 - 事实]\n- 生产环境部署端口是8443 (2026-11-02)"
    )
    # 45 - 22 = 23 left: fact (25) and profile (27) are skipped, the working turn (23) still fits.
    assert prompt_block(ZH, budget_tokens=45) == (
        "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)\n\n"
        "[当前对话]\n- 提醒我明天下午三点开会 (2026-11-03)"
    )


def test_a_header_is_paid_once_per_group() -> None:
    two = [item("我不吃香菜", "preference"), item("我喜欢喝绿茶", "preference")]
    # 10 (header) + 12 + 13
    assert [approx_token_count(item_line(i)) for i in two] == [12, 13]
    assert prompt_block(two, budget_tokens=35).count("[长期记忆 - 用户偏好]") == 1
    assert len(prompt_block(two, budget_tokens=35).splitlines()) == 3
    assert len(prompt_block(two, budget_tokens=34).splitlines()) == 2


@pytest.mark.parametrize("budget", [1, 10, 22, 30, 47, 60, 75, 97, 1000])
def test_block_never_exceeds_its_budget(budget: int) -> None:
    for items in (ZH, EN, ZH + EN):
        assert approx_token_count(prompt_block(items, budget_tokens=budget)) <= budget


def test_empty_input_and_no_budget_give_an_empty_block() -> None:
    assert prompt_block([]) == ""
    assert prompt_block(ZH, budget_tokens=0) == ""
    assert prompt_block(ZH, budget_tokens=-1) == ""
    assert prompt_block([item("   ", "fact")]) == ""


def test_a_recall_that_found_nothing_says_so_in_the_querys_language() -> None:
    assert prompt_block([], query="我的血型是什么？") == "[长期记忆] 没有与此相关的记忆。"
    nothing = "[Long-term memory] Nothing relevant is remembered."
    assert prompt_block([], query="What is my blood type?") == nothing
    # Within the budget like any block: too small a budget gives nothing at all.
    assert prompt_block([], query="What is my blood type?", budget_tokens=3) == ""
    assert prompt_block([], query="What is my blood type?", budget_tokens=0) == ""


def test_block_is_deterministic() -> None:
    assert len({prompt_block(ZH + EN) for _ in range(5)}) == 1
    assert prompt_block(list(ZH)) == prompt_block(tuple(ZH))


def test_block_takes_recall_items_like_their_public_dicts() -> None:
    objects = [recall_item(i["content"], i["type"], i["created_at"]) for i in ZH]
    assert prompt_block(objects) == ZH_BLOCK
    assert prompt_block([o.to_public() for o in objects]) == ZH_BLOCK


def test_lines_are_single_lines_with_the_date_as_written() -> None:
    multi = item("第一行\n[长期记忆 - 事实]\n  第三行", "fact", "2026-11-01T23:30:00-05:00")
    assert item_line(multi) == "- 第一行 [长期记忆 - 事实] 第三行 (2026-11-01)"
    assert item_line(item("no date", "fact", "")) == "- no date"
    assert item_line(item("bad date", "fact", "yesterday")) == "- bad date"


def test_every_type_has_a_label_in_both_languages_and_unknown_types_come_last() -> None:
    for lang in ("zh", "en"):
        assert set(LABELS[lang]) == set(TYPE_ORDER)  # type: ignore[index]
    assert label("preference", "zh") == "[长期记忆 - 用户偏好]"
    assert label("preference", "en") == "[Long-term memory - preferences]"
    assert label("working", "zh") == "[当前对话]"
    assert label("working", "en") == "[Current conversation]"
    block = prompt_block([item("odd one", "custom"), item("a nurse", "profile")], language="en")
    assert block == (
        "[Long-term memory - profile]\n- a nurse (2026-11-01)\n\n"
        "[Long-term memory - custom]\n- odd one (2026-11-01)"
    )


def test_dates_are_the_days_of_the_users_zone() -> None:
    # Told at 01:30 in Beijing (17:30 UTC the day before) and at 21:00 in New York (02:00 UTC
    # the day after): each line says the day the user lived it.
    beijing = item("我不吃香菜", "preference", "2026-10-05T17:30:00+00:00")
    new_york = recall_item("I walk the dog every evening", "preference", "2026-10-06T02:00:00+00:00")
    assert item_line(beijing, 8 * 3600) == "- 我不吃香菜 (2026-10-06)"
    assert item_line(new_york, -5 * 3600) == "- I walk the dog every evening (2026-10-05)"
    assert prompt_block([beijing], offset_s=8 * 3600) == "[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-10-06)"
    # A user at UTC, or none known: the day as written (UTC from the store); no offset in the
    # text: as written.
    assert item_line(beijing, 0) == item_line(beijing) == "- 我不吃香菜 (2026-10-05)"
    assert item_line(item("x", "fact", "2026-10-05T23:30:00"), 8 * 3600) == "- x (2026-10-05)"
