"""Entities, the cue lexicon and cue keys (shared.language.cues)."""

from __future__ import annotations

import dataclasses

import pytest

from shared.language.cues import (
    QueryCues,
    cues_for_memory,
    entities,
    find_entities,
    interest_tag,
    lexicon_hits,
    lexicon_tags,
    load_lexicon,
    query_cues,
)
from shared.language.slot_rules import slot_for
from shared.language.text import CJK_RE
from shared.models import MemoryType


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("生产环境部署端口是8443", ("8443",)),
        ("My order ORD-2023-1105 hasn't arrived", ("ord-2023-1105",)),
        ("型号 X200，故障码 E42", ("x200", "e42")),
        ("I work as a nurse in Boston", ("boston",)),
        ("upgrade iPhone15 to v2.3.1 on RTX4090", ("iphone15", "v2.3.1", "rtx4090")),
        ("ticket #12345 is still open", ("12345",)),
        ("call me at 138-1234-5678", ("138-1234-5678",)),
        ("mail bob.smith@example.com today", ("bob.smith@example.com",)),
        ("see https://example.com/a?b=1.", ("https://example.com/a?b=1",)),
        ("我在读《三体》", ("三体",)),
        ("他推荐了「深度工作」这本书", ("深度工作",)),
    ],
)
def test_entities(sample: str, expected: tuple[str, ...]) -> None:
    assert entities(sample) == expected


def test_money_amounts_are_normalised_and_keep_their_number() -> None:
    assert entities("花了¥300，另外300元") == ("¥300", "300")
    assert entities("it cost $25.50 or USD 1,200") == ("$25.50", "$1200", "1200")
    assert entities("退款 50 块") == ("¥50",)


def test_dates_are_normalised_to_iso() -> None:
    assert entities("Due 2023-11-05, moved to 2024年3月8日") == ("2023-11-05", "2024-03-08")
    assert entities("on 2024/1/9") == ("2024-01-09",)


def test_capitalised_names_but_not_sentence_initial_common_words() -> None:
    assert entities("Yesterday Caroline and I went to New York.") == ("caroline", "new york")
    assert entities("Thanks John!") == ("john",)
    assert entities("Meeting at noon. Please call.") == ()
    assert entities("Don't worry about it") == ()
    assert entities("We saw the Statue of Liberty") == ("statue of liberty",)
    assert entities("Coffee first. I met Melanie at Starbucks") == ("melanie", "starbucks")


def test_quantities_are_not_codes() -> None:
    assert entities("at 3pm on the 2nd, 16GB and 5G") == ()
    assert entities("timeout 500ms") == ("500",)  # a 3+ digit quantity keeps its number


def test_short_numbers_are_not_entities() -> None:
    assert entities("I have 2 cats and 42 fish") == ()


def test_entities_in_order_of_appearance_and_deduplicated() -> None:
    assert entities("E42 then X200 then E42 again, port 8443") == ("e42", "x200", "8443")
    kinds = [e.kind for e in find_entities("ORD-7 costs $25 on 2024-01-02 at x.com/a model X2")]
    assert kinds == ["id", "money", "date", "code"]


def test_lexicon_is_loaded_once_and_is_well_formed() -> None:
    lexicon = load_lexicon()
    assert lexicon is load_lexicon()
    assert len(lexicon.entries) >= 300
    for word, (type_hint, tags) in lexicon.entries.items():
        assert word == word.lower().strip()
        assert type_hint is None or isinstance(type_hint, MemoryType)
        assert type_hint is not None or tags, word
        if CJK_RE.search(word):
            assert len(word) >= 2, word


def test_lexicon_hits_chinese() -> None:
    hits = {h.word: h for h in lexicon_hits("我住杭州，不吃香菜，喜欢美式")}
    assert hits["我住"].type_hint is MemoryType.PROFILE and hits["我住"].tags == ("home",)
    assert hits["不吃"].type_hint is MemoryType.PREFERENCE and "diet" in hits["不吃"].tags
    assert hits["美式"].tags == ("coffee", "drink")
    assert [h.word for h in lexicon_hits("我住杭州，不吃香菜")] == ["我住", "不吃", "香菜"]


def test_lexicon_hits_english_respects_word_boundaries() -> None:
    assert [h.word for h in lexicon_hits("I live in   Berlin")] == ["live in"]
    assert lexicon_hits("the report about the airport") == []
    assert [h.word for h in lexicon_hits("Which PORT is it?")] == ["port"]


def test_lexicon_tags() -> None:
    assert lexicon_tags("I'm allergic to peanuts") == ("diet", "health", "food")
    assert lexicon_tags("我买了基金和股票") == ("finance",)


def test_cues_for_memory() -> None:
    assert cues_for_memory("生产环境部署端口是8443", ("deployment",), ("8443",)) == (
        "e:8443",
        "t:deployment",
        "k:生产",
        "k:环境",
        "k:部署",
        "k:端口",
        "k:8443",
    )


def test_cues_for_memory_caps_keywords() -> None:
    content = " ".join(f"word{i}x" for i in range(100))
    cues = cues_for_memory(content, (), ())
    assert len(cues) == 32
    assert cues[0] == "k:word0x"


def test_query_cues_chinese() -> None:
    qc = query_cues("我的订单 ORD-2023-1105 到哪了？")
    assert qc.entities == ("ord-2023-1105",)
    assert qc.tags == ("order",)
    keys = qc.keys()
    assert keys["e:ord-2023-1105"] == 3.0
    assert keys["t:order"] == 1.5
    assert keys["k:订单"] == 1.0


def test_query_cues_english_type_hints() -> None:
    qc = query_cues("Which port does the production deploy use?")
    assert qc.type_hints == (MemoryType.FACT,)
    assert qc.tags == ("deployment",)
    assert qc.keywords == ("port", "production", "deploy", "use")
    assert qc.entities == ()


def test_dietary_restrictions_is_the_english_for_ji_kou() -> None:
    """English "Any dietary restrictions?" asks what "我有什么忌口？" asks: the diet tag, a preference."""
    for query in ("我有什么忌口？", "Any dietary restrictions I have?", "what are my dietary needs"):
        qc = query_cues(query)
        assert "diet" in qc.tags and MemoryType.PREFERENCE in qc.type_hints, query
    stored = cues_for_memory("I'm allergic to peanuts", lexicon_tags("I'm allergic to peanuts"), ())
    assert "t:diet" in set(query_cues("Any dietary restrictions I have?").keys()) & set(stored)


def test_query_cues_meet_memory_cues() -> None:
    stored = cues_for_memory("生产环境部署端口是8443", ("deployment",), entities("生产环境部署端口是8443"))
    matched = set(query_cues("部署端口 8443 还在用吗").keys()) & set(stored)
    assert {"e:8443", "t:deployment", "k:部署", "k:端口"} <= matched


def test_query_cues_is_frozen() -> None:
    qc = query_cues("coffee")
    assert isinstance(qc, QueryCues)
    with pytest.raises(dataclasses.FrozenInstanceError):
        qc.tags = ()  # type: ignore[misc]


def test_weekday_and_month_names_are_times_not_names() -> None:
    assert entities("Remind me to call Anna next Friday") == ("anna",)
    assert entities("we met on Mondays in December") == ()
    assert entities("I met June in Paris") == ("june", "paris")  # June, May, August are also names


def test_lexicon_slot_rules_are_well_formed() -> None:
    lexicon = load_lexicon()
    assert lexicon.slots and lexicon.interest_tags == frozenset({"finance"})
    all_tags = {tag for _, tags in lexicon.entries.values() for tag in tags}
    for rule in lexicon.slots:
        assert rule.types, rule.slot
        assert rule.tags <= all_tags, rule.slot
        assert ("{key}" in rule.slot) == (rule.key_tag is not None), rule.slot
        assert rule.key_tag is None or rule.key_tag in all_tags, rule.slot
        assert rule.tags or rule.words or rule.word_pattern or rule.key_tag, rule.slot


@pytest.mark.parametrize(
    ("text", "type_", "slot"),
    [
        ("我不用 Java", MemoryType.PREFERENCE, "skill:language:java"),
        ("最近在写 Java 项目", MemoryType.PROFILE, "skill:language:java"),
        ("I write Golang at work", MemoryType.FACT, "skill:language:go"),
        ("My primary language is Python", MemoryType.PROFILE, "profile:primary_language"),
        ("我现在改喝拿铁了", MemoryType.PREFERENCE, "preference:drink"),
        ("I prefer green tea", MemoryType.PREFERENCE, "preference:drink"),
        ("我不喝酒", MemoryType.PREFERENCE, "preference:drink:alcohol"),
        ("我不吃香菜", MemoryType.PREFERENCE, "preference:diet:香菜"),
        ("我喜欢吃香菜", MemoryType.PREFERENCE, "preference:diet:香菜"),
        ("我吃素", MemoryType.PREFERENCE, "preference:diet"),
        ("我住杭州", MemoryType.PROFILE, "profile:home"),
        ("I moved to Berlin", MemoryType.PROFILE, "profile:home"),
        ("我在阿里巴巴工作", MemoryType.PROFILE, "profile:job"),
        ("I work as a nurse", MemoryType.PROFILE, "profile:job"),
        ("我叫张伟", MemoryType.PROFILE, "profile:name"),
        ("请用中文回复，简短一点", MemoryType.PREFERENCE, "preference:style"),
        ("我的爱好是跑步", MemoryType.PREFERENCE, "preference:hobby:跑步"),
        ("我的爱好很多", MemoryType.PREFERENCE, "preference:hobby"),
    ],
)
def test_slot_for(text: str, type_: MemoryType, slot: str) -> None:
    assert slot_for(text, type_, lexicon_tags(text), entities(text)) == slot


@pytest.mark.parametrize(
    ("text", "type_"),
    [
        ("我住杭州", MemoryType.TASK),  # types a rule does not cover
        ("老板今天又让我加班", MemoryType.EPISODIC),
        ("生产环境部署端口是8443", MemoryType.FACT),  # no rule for it
        ("收盘了吗", MemoryType.EPISODIC),
    ],
)
def test_no_slot(text: str, type_: MemoryType) -> None:
    assert slot_for(text, type_, lexicon_tags(text)) is None


def test_slot_keys_may_come_from_entities() -> None:
    assert slot_for("I use it daily", MemoryType.PREFERENCE, (), ("kotlin",)) == "skill:language:kotlin"


def test_interest_tag() -> None:
    assert interest_tag(lexicon_tags("今天大盘怎么样")) == "finance"
    assert interest_tag(("order", "finance")) == "finance"
    assert interest_tag(("coffee", "drink")) is None
    assert lexicon_tags("收盘了吗") == ("finance",)
