"""``shared.language.links.own_text``: the clauses of a statement that speak of the user, which
is what a profile slot is read from (by words and by meaning)."""

from __future__ import annotations

import pytest

from shared.language.links import about_someone_else, own_text


@pytest.mark.parametrize(
    ("text", "own"),
    [
        ("我在阿里巴巴上班", "我在阿里巴巴上班"),
        ("我同事跳槽去了腾讯", ""),
        ("我老婆是小学老师，我们有一个女儿，今年五岁", "我们有一个女儿，今年五岁"),
        # A clause with no subject goes with the one before it: the wife teaches there.
        ("我老婆是小学老师，在实验小学教书，我是医生", "我是医生"),
        ("My wife is a nurse, works nights, and I teach", "and I teach"),
        ("My sister lives in Berlin now", ""),
        ("I moved here with my sister", "I moved here with my sister"),
        ("Yesterday, my brother got a new job, I was so happy", "Yesterday, I was so happy"),
    ],
)
def test_the_clauses_about_someone_else_are_left_out(text: str, own: str) -> None:
    assert own_text(text) == own


def test_a_partner_counts_as_the_user_only_when_asked() -> None:
    text = "我男朋友是医生，在协和上班，我们住在北京"
    assert own_text(text, partner_is_self=True) == text
    assert own_text(text) == "我们住在北京"


@pytest.mark.parametrize(
    "text", ["我同事跳槽去了腾讯", "My brother changed his phone number", "", "I live in Paris"]
)
def test_nothing_is_own_exactly_when_the_whole_text_is_about_someone_else(text: str) -> None:
    assert (not own_text(text)) == (about_someone_else(text) or not text)
