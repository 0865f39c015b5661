"""The second cue hop: a memory naming one of the user's people ("我儿子叫乐乐") lets a query about
one side ("我儿子喜欢什么运动？") reach memories that only name the other ("乐乐每周六去踢足球").

Link detection is pure (``shared.language.links``, filtered in ``shared.language.cues.links``); the hop
runs in recall on the fakes of ``tests.support.pipeline`` with the real rule-based extraction.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from shared.language.cues import cues_for_memory, entities, lexicon_tags, links
from shared.language.links import Link
from tests.support.pipeline import Harness, ask


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我儿子叫乐乐", [("儿子", "乐乐")]),
        ("我的女儿名叫小雨，今年五岁", [("女儿", "小雨")]),
        ("我养了一只猫，叫团子", [("猫", "团子")]),
        ("乐乐是我儿子", [("儿子", "乐乐")]),
        ("我老板是王总", [("老板", "王总")]),
        ("My son's name is Leo", [("son", "leo")]),
        ("I have a cat named Mochi", [("cat", "mochi")]),
        ("Leo, my son, loves football", [("son", "leo")]),
        ("my daughter Emma and my son Leo", [("daughter", "emma"), ("son", "leo")]),
        # Descriptions and questions are not names.
        ("我儿子是程序员", []),
        ("我老婆是上海人", []),
        ("我儿子叫什么？", []),
        ("Thanks, my friend", []),
        ("My son likes football", []),
    ],
)
def test_naming_links_in_both_languages(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(link.role, link.name) for link in links(text)] == expected


def test_a_link_is_stored_as_one_cue_key_per_side() -> None:
    text = "我儿子叫乐乐"
    keys = cues_for_memory(text, lexicon_tags(text), entities(text))
    assert {"l:儿子", "l:乐乐"} <= set(keys)
    assert Link("son", "leo").cue_keys() == ("l:son", "l:leo")
    plain = "乐乐每周六去踢足球"
    assert not [k for k in cues_for_memory(plain, lexicon_tags(plain), entities(plain)) if k.startswith("l:")]


OTHERS = {
    "zh": ["我不吃香菜", "生产环境部署端口是8443", "我喜欢喝美式"],
    "en": ["I'm allergic to peanuts", "The production deploy port is 8443", "I prefer green tea"],
}
LINK = {"zh": "我儿子叫乐乐", "en": "My son's name is Leo"}
LINKED = {"zh": "乐乐每周六去踢足球", "en": "Remember that Leo plays football every Saturday"}
# What the linked turn's memory says: the instruction to remember is cut from its words.
LINKED_MEMORY = {"zh": "乐乐每周六去踢足球", "en": "Leo plays football every Saturday"}
QUERY = {"zh": "我儿子喜欢什么运动？", "en": "What sport does my son like?"}
HOP = {"zh": "link:儿子->乐乐", "en": "link:son->leo"}


def _world(lang: str, *, with_link: bool = True) -> Harness:
    h = Harness()
    h.say(*OTHERS[lang][:2], *([LINK[lang]] if with_link else []), LINKED[lang], OTHERS[lang][2])
    return h


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_query_about_one_side_reaches_memories_of_the_other(lang: str) -> None:
    out = ask(_world(lang), QUERY[lang])
    [hit] = [i for i in out.items if i.content == LINKED_MEMORY[lang]]
    assert "link" in hit.explanation["paths"], out.trace
    assert HOP[lang] in hit.explanation["matched_cues"]
    assert out.trace["candidates"]["link"] == 1
    assert any(n.startswith(f"link hop: {HOP[lang].removeprefix('link:')}") for n in out.trace["notes"])
    # The hop's hit ranks among the cue hits, and scores below what naming the name would give.
    direct = ask(_world(lang), QUERY[lang].replace("我儿子", "乐乐").replace("my son", "Leo"))
    [named] = [i for i in direct.items if i.content == LINKED_MEMORY[lang]]
    assert "link" not in named.explanation["paths"]
    assert hit.explanation["cue_score"] < named.explanation["cue_score"]


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_without_a_link_the_query_is_unchanged(lang: str) -> None:
    out = ask(_world(lang, with_link=False), QUERY[lang])
    assert "link" not in out.trace["candidates"] or out.trace["candidates"]["link"] == 0
    assert not any(n.startswith("link hop") for n in out.trace["notes"])
    for item in out.items:
        assert "link" not in item.explanation["paths"]
        assert not [c for c in item.explanation["matched_cues"] if c.startswith("link:")]


def test_a_query_that_names_neither_side_does_not_hop() -> None:
    h = _world("zh")
    with_link = ask(h, "部署端口是多少").to_public()
    without = ask(_world("zh", with_link=False), "部署端口是多少").to_public()
    assert not any(n.startswith("link hop") for n in with_link["trace"]["notes"])
    assert with_link["items"][0]["content"] == without["items"][0]["content"] == "生产环境部署端口是8443"
    assert with_link["trace"]["candidates"]["link"] == 0


def test_the_hop_works_from_the_name_back_to_the_role() -> None:
    h = Harness()
    h.say("我儿子叫乐乐", "儿子最近在学游泳", "我不吃香菜")
    out = ask(h, "乐乐在学什么？")
    [hit] = [i for i in out.items if i.content == "儿子最近在学游泳"]
    assert "link:乐乐->儿子" in hit.explanation["matched_cues"], out.trace


class _ReadsRecorded:
    """Memories that hold nothing and record every cue read recall makes of them."""

    def __init__(self, held: dict[str, int]) -> None:
        self.held = held
        self.reads: list[list[str]] = []

    def cue_counts(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: object
    ) -> tuple[int, dict[str, int]]:
        return 10, {c: self.held[c] for c in cues if c in self.held}

    def by_cues(
        self, tenant_id: str, user_id: str, cues: Sequence[str], statuses: object, limit: int
    ) -> list[object]:
        self.reads.append(list(cues))
        return []


@pytest.mark.parametrize("held", [{}, {"l:儿子": 1}])
def test_the_hop_reads_memories_only_when_some_memory_names_a_query_word_as_a_link_side(
    held: dict[str, int],
) -> None:
    # The link keys are counted with the query's cues (one read): a query naming no link side,
    # as most do, makes no second memory read.
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from shared.language.cues import query_cues
    from shared.recall import deterministic
    from shared.recall.request import RecallRequest

    memories = _ReadsRecorded(held)
    uow = SimpleNamespace(memories=memories)
    request = RecallRequest("t1", "u1", QUERY["zh"], now=datetime(2026, 8, 1, tzinfo=UTC))
    cues = query_cues(request.searched)
    weights, pool = deterministic.cue_matches(uow, request, cues)  # type: ignore[arg-type]
    memories.reads.clear()
    deterministic.link_hop(uow, request, cues, weights, pool, [])  # type: ignore[arg-type]
    assert memories.reads == ([["l:儿子"]] if held else [])
