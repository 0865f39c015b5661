"""Tokens, keywords, token estimates and language detection (shared.language.text)."""

from __future__ import annotations

import string

import pytest

from shared.language import text
from shared.language.text import approx_token_count, detect_language, keywords, tokens


def test_chinese_sentence_keeps_port_number() -> None:
    assert tokens("生产环境部署端口是8443") == ["生产", "环境", "部署", "端口", "是", "8443"]


def test_order_id_is_one_token_and_not_split_by_jieba() -> None:
    toks = tokens("My order ORD-2023-1105 hasn't arrived")
    assert "ord-2023-1105" in toks
    assert "2023" not in toks and "1105" not in toks


def test_codes_versions_and_identifiers_stay_intact() -> None:
    assert tokens("iPhone15 v2.3.1 ord-20231105 max_retries") == [
        "iphone15",
        "v2.3.1",
        "ord-20231105",
        "max_retries",
    ]


def test_model_and_error_codes_in_chinese_text() -> None:
    toks = tokens("型号 X200，故障码 E42")
    assert "x200" in toks and "e42" in toks
    assert "型号" in toks


def test_no_punctuation_or_whitespace_tokens() -> None:
    toks = tokens("你好！ 这是…… 一个测试。 Hello,   world?! (yes) — ok；")
    assert toks
    for tok in toks:
        assert tok.strip() == tok and tok
        assert not all(c in string.punctuation + "！。…，；—（）" for c in tok)


def test_numbers_normalised() -> None:
    assert tokens("1,000 users") == ["1000", "users"]
    assert tokens("端口８４４３") == ["端口", "8443"]  # full-width digits


def test_plain_hyphenated_words_split_possessive_dropped() -> None:
    assert tokens("long-term memory") == ["long", "term", "memory"]
    assert tokens("Caroline's dog") == ["caroline", "dog"]


def test_search_mode_yields_inner_words() -> None:
    # "喝咖啡" is one dictionary word; a query for "咖啡" must still meet it.
    assert "咖啡" in tokens("我不喝咖啡")


def test_keywords_drop_stopwords_and_dedup() -> None:
    assert keywords("the port is 8443 and the host is db1") == ["port", "8443", "host", "db1"]
    assert keywords("端口 端口 8443 8443") == ["端口", "8443"]
    kws = keywords("我不吃香菜")
    assert "香菜" in kws and "我" not in kws


def test_keywords_keep_single_cjk_content_words() -> None:
    assert "辣" in keywords("我不吃辣")
    assert "的" not in keywords("我的猫")
    assert "猫" in keywords("我的猫")


def test_keywords_drop_single_latin_letters() -> None:
    assert keywords("a b c x200") == ["x200"]


@pytest.mark.parametrize(
    ("sample", "expected"),
    [("", 0), ("   ", 0), ("你好世界", 4), ("hello world", 3), ("中" * 1000, 1000)],
)
def test_approx_token_count(sample: str, expected: int) -> None:
    assert approx_token_count(sample) == expected


def test_approx_token_count_grows_with_text() -> None:
    short = approx_token_count("The deploy port is 8443.")
    assert 5 <= short <= 10
    assert approx_token_count("The deploy port is 8443. " * 10) >= 9 * short


@pytest.mark.parametrize(
    ("sample", "lang"),
    [
        ("我住杭州，不吃香菜", "zh"),
        ("I live in Berlin", "en"),
        ("我用的是 Kubernetes 部署", "zh"),
        ("I visited 杭州 last week", "en"),
        ("型号 X200，故障码 E42", "zh"),
        ("", "en"),
        ("12345", "en"),
    ],
)
def test_detect_language(sample: str, lang: str) -> None:
    assert detect_language(sample) == lang


def test_tokenizer_is_created_once() -> None:
    assert text._tokenizer() is text._tokenizer()


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("15", 15),
        ("十", 10),
        ("十五", 15),
        ("二十三", 23),
        ("三十一", 31),
        ("两", 2),
        ("一百零五", 105),
        ("二〇二六", 2026),
        ("零", 0),
        (" 7 ", 7),
    ],
)
def test_cn_number(raw: str, value: int) -> None:
    assert text.cn_number(raw) == value


@pytest.mark.parametrize("raw", ["", "几", "十几", "3.5", "三点", "abc", "１５x"])
def test_cn_number_rejects_non_numbers(raw: str) -> None:
    assert text.cn_number(raw) is None
