"""A changed fact stated without the first statement's words ("跳槽到腾讯了" after "我在阿里上班"):
both statements get one slot, the newer supersedes the older, and recall gives the newer first.

Extraction and the conflict judge are the real rule-based ones; storage, index and embedder are
the fakes of ``tests.support.pipeline``.
"""

from __future__ import annotations

import pytest

from shared.events import Role, TurnPublished
from shared.ingest.extraction import extract
from shared.models import RECALLABLE_STATUSES, MemoryStatus
from tests.support.pipeline import NOW, Harness, ask

# (older statement, newer statement, the slot both are about)
CHANGES = [
    ("我住在北京朝阳区", "上个月搬家了，现在住在上海浦东", "profile:home"),
    ("我住在北京朝阳区", "我搬去上海了", "profile:home"),
    ("I live in Paris", "I moved to Berlin", "profile:home"),
    ("我在阿里上班", "我跳槽到腾讯了", "profile:job"),
    ("I work at Acme", "I left Acme, now I'm at Globex", "profile:job"),
    ("我的手机号是13812345678", "我换手机号了，新号码是13987654321", "profile:phone"),
    ("My phone number is 555-123-4567", "My new number is 555-987-6543", "profile:phone"),
    ("我男朋友叫小明", "我和男朋友分手了", "profile:relationship"),
    ("I'm dating Sarah", "I broke up with Sarah", "profile:relationship"),
]


def _slot(content: str) -> str | None:
    event = TurnPublished("e", "default", "u", "s1", 1, Role.USER, content, NOW, {})
    [draft] = extract(event).drafts
    return draft.slot


@pytest.mark.parametrize(("older", "newer", "slot"), CHANGES)
def test_both_statements_of_a_change_get_one_slot(older: str, newer: str, slot: str) -> None:
    assert _slot(older) == _slot(newer) == slot


@pytest.mark.parametrize(("older", "newer", "slot"), CHANGES)
def test_the_newer_statement_supersedes_the_older(older: str, newer: str, slot: str) -> None:
    h = Harness()
    h.say(older, newer)
    rows = sorted(h.state.memories.values(), key=lambda m: m.valid_from)
    assert [(m.content, m.status) for m in rows] == [
        (older, MemoryStatus.SUPERSEDED),
        (newer, MemoryStatus.ACTIVE),
    ]
    assert rows[0].superseded_by == rows[1].id


@pytest.mark.parametrize(
    ("older", "newer", "query"),
    [
        ("我住在北京朝阳区", "上个月搬家了，现在住在上海浦东", "我现在住在哪里？"),
        ("I work at Acme", "I left Acme, now I'm at Globex", "Am I still at Acme?"),
        ("My phone number is 555-123-4567", "My new number is 555-987-6543", "What is my phone number?"),
        ("我男朋友叫小明", "我和男朋友分手了", "我男朋友是谁？"),
        ("我在阿里上班", "我跳槽到腾讯了", "我在哪里上班？"),
    ],
)
def test_recall_gives_the_newer_statement_first(older: str, newer: str, query: str) -> None:
    h = Harness()
    h.say("我不吃香菜", older, "I drink green tea every morning", newer)
    current = ask(h, query)
    contents = [i.content for i in current.items]
    # The current statement is recalled and the one it replaced is not (where it ranks among the
    # unrelated statements is the model's to say; with this test's hashing embedder, meaning is noise).
    assert newer in contents, current.trace
    assert older not in contents
    # Asked for every past statement too, the older one comes back, after the newer one.
    statuses = RECALLABLE_STATUSES | {MemoryStatus.SUPERSEDED}
    history = [(i.content, i.status) for i in ask(h, query, statuses=statuses).items]
    assert (older, "superseded") in history, history
    assert history.index((newer, "active")) < history.index((older, "superseded"))


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("我老婆是小学老师，我在一家律所上班", "profile:job"),
        ("My wife is a teacher, and I live in Paris", "profile:home"),
        ("我男朋友是医生，他住在北京", "profile:relationship"),
    ],
)
def test_a_slot_is_read_from_the_users_own_clauses(text: str, slot: str) -> None:
    assert _slot(text) == slot


def test_a_statement_about_someone_else_does_not_take_a_relationship_slot() -> None:
    assert _slot("My sister loves sushi") is None
    assert _slot("我男朋友喜欢打篮球") != "profile:relationship"


# (the user's own statement, a later one about someone they know): the second takes no slot of
# the user's profile, so it cannot supersede the first.
SOMEONE_ELSE = [
    ("我在阿里巴巴上班", "我同事跳槽去了腾讯"),
    ("My boyfriend is Tom", "My sister got married last week in Rome."),
    ("My phone number is 555-0134.", "My brother changed his phone number yesterday."),
    ("I live in Paris", "My sister lives in Berlin now"),
    # The teacher is the wife; the clause after it ("我们…") is the user's but names no job.
    ("我在阿里巴巴上班", "我老婆是小学老师，我们有一个女儿，今年五岁"),
    ("I work at a bank", "My husband is a teacher at the school, and we have two kids"),
    # Plural and in-law roles: "My parents live in Vancouver" superseded "I live in Toronto".
    ("I live in Toronto", "My parents live in Vancouver"),
    ("I live in Leeds", "My in-laws just moved to Boston"),
    ("I live in Oslo", "My kids live in Boston now"),
    ("我住在成都", "我岳父住在重庆"),
]


@pytest.mark.parametrize(("own", "theirs"), SOMEONE_ELSE)
def test_a_change_in_someone_elses_life_leaves_the_users_fact_alone(own: str, theirs: str) -> None:
    assert _slot(own) is not None and _slot(theirs) is None
    h = Harness()
    h.say(own, theirs)
    [mine] = [m for m in h.state.memories.values() if m.content.startswith(own.rstrip("."))]
    assert mine.status is MemoryStatus.ACTIVE
