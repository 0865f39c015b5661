"""The conversation log as a recall path, fusion priors, the reranker hook and --include-history,
on in-memory fakes (real rule-based extraction, deterministic hashing embedder)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.indexing.collections import TURNS
from shared.indexing.reindex import rebuild_collection, rebuild_indexes
from shared.ingest.slot_meaning import prototypes
from shared.models import HISTORICAL_STATUSES, RECALLABLE_STATUSES, MemoryStatus, turn_point_id
from shared.queues import TaskName
from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.pipeline import ASKED, CHAT, NOW, TurnHarness, ask, turn


def test_a_turn_that_made_no_memory_is_embedded_indexed_and_done():
    h = TurnHarness()
    h.drain(turn(1, CHAT))
    row = h.state.events["e-u1-s1-1"]
    assert row["stage"] == "done" and row["turn_indexed"] and len(row["embedding"]) == 16
    assert not h.state.memories
    assert h.turns.ids("default", "u1") == {turn_point_id("default", "u1", "e-u1-s1-1")}
    assert [t for t, _ in h.sent] == ["memory.extract", "memory.embed", "memory.index"]  # no persist


def test_a_memorable_turn_gets_a_memory_and_a_turn_point_sharing_one_embedding_call():
    h = TurnHarness()
    # The slot prototypes are embedded once per model and process, whichever turn needs them first
    # (``shared.ingest.slot_meaning``): counted here, they would be that one-off, not this turn's.
    prototypes(h.embedder)
    calls: list[int] = []
    embed = h.embedder.embed_passages
    h.embedder.embed_passages = lambda texts: calls.append(len(texts)) or embed(texts)  # type: ignore[method-assign]
    h.drain(turn(1, "生产环境部署端口是8443"))
    assert calls == [1]  # the draft is the whole turn: one vector serves both
    [memory] = h.state.memories.values()
    assert memory.status is MemoryStatus.ACTIVE and h.index.ids("default", "u1") == {memory.id}
    assert h.turns.ids("default", "u1") == {turn_point_id("default", "u1", "e-u1-s1-1")}
    assert h.state.events["e-u1-s1-1"]["stage"] == "done"


def test_recall_finds_a_detail_only_the_conversation_log_holds_and_says_so():
    h = TurnHarness()
    h.drain(turn(1, CHAT))
    h.drain(turn(1, "生产环境部署端口是8443", session="s2"))  # its own session: no shared window
    out = ask(h, "where did we see the red fox")
    # Found by the log's paths (where it ranks against the port is meaning-noise on this test's
    # hashing embedder).
    top = next(i for i in out.items if i.id == "event:e-u1-s1-1")
    assert top.type == "turn" and top.status == "log"
    assert top.content == CHAT and top.sources[0]["event_id"] == "e-u1-s1-1"
    assert {"turn_vector", "turn_keyword"} & set(top.explanation["paths"])
    assert out.trace["candidates"]["turn_keyword"] >= 1


def test_a_turn_that_became_a_memory_lends_its_rank_to_the_memory_not_a_second_item():
    h = TurnHarness()
    h.say("I prefer green tea over coffee", CHAT)
    out = ask(h, "something green")
    assert out.stage == "ranked"
    memory_items = [i for i in out.items if not i.id.startswith("event:")]
    assert memory_items and "turn_keyword" in memory_items[0].explanation["paths"]
    assert "event:e-u1-s1-1" not in {i.id for i in out.items}


def test_the_conversation_log_never_crosses_users():
    h = TurnHarness()
    h.drain(turn(1, CHAT, user="alice"))
    # The control: alice herself finds it, so the empty answers below are not vacuous.
    assert any("fox" in i.content for i in ask(h, "red fox near the old mill", user="alice").items)
    for other in ("bob", "alice ", "ALICE", "alice%", "*", "alice' OR '1'='1"):
        out = ask(h, "red fox near the old mill", user=other)
        assert all("fox" not in i.content for i in out.items), (other, out.items)


def test_reindex_rebuilds_the_conversation_log_from_postgres():
    h = TurnHarness()
    h.say(CHAT, "生产环境部署端口是8443")
    h.turns.delete("default", "u1", list(h.turns.ids("default", "u1")))
    stats = rebuild_indexes(h.store.uow, h.indexes, h.embedder)
    assert stats["turns_indexed"] == 2 and stats["turns_embedded"] == 0
    assert len(h.turns.ids("default", "u1")) == 2
    assert ask(h, "red fox old mill").items[0].id == "event:e-u1-s1-1"


def test_explanations_carry_the_relevance_and_the_half_life_score():
    h = TurnHarness()
    h.say("I prefer green tea over coffee", CHAT)
    out = ask(h, "what do I like to drink in the afternoon")
    assert out.items
    for item in out.items:
        ex = item.explanation
        assert item.score == pytest.approx(ex["relevance"], abs=1e-6)
        if item.type != "turn":
            assert "half_life_score" in ex and ex["features"].get("half_life_score", 0.0) == pytest.approx(
                ex["half_life_score"], abs=1e-6
            )


def test_the_half_life_score_is_a_feature_the_model_reads() -> None:
    from shared.recall.features import FEATURES
    from shared.recall.relevance import RelevanceModel

    h = TurnHarness()
    h.say("I live in Berlin", "I work as a nurse")
    n = len(FEATURES)
    # A fake model that reads the half-life score alone: the better-scored memory comes first.
    weights = tuple(1.0 if f == "half_life_score" else 0.0 for f in FEATURES)
    model = RelevanceModel(FEATURES, (0.0,) * n, (1.0,) * n, weights, 0.0, 0.0, "fake-half-life")
    memories = sorted(h.state.memories.values(), key=lambda m: m.content)
    for favoured in memories:
        with h.store.uow() as uow:
            for m in memories:
                stored = uow.memories.get("default", "u1", m.id)
                stored.score = 9.0 if m.id == favoured.id else 1.0
                uow.memories.save(stored)
            uow.commit()
        request = RecallRequest("default", "u1", "something about me", now=ASKED, k=5)
        with h.store.uow() as uow:
            out = recall(
                uow, request, embedder=h.embedder, index=h.index, working_memory=None, turn_index=h.turns,
                relevance=model,
            )  # fmt: skip
        assert [i.id for i in out.items if i.type != "turn"][0] == favoured.id


class Reverse:
    def rerank(self, query, documents):
        return [float(i) for i in range(len(documents))]  # the last document scores highest


class Broken:
    def rerank(self, query, documents):
        raise TimeoutError("reranker did not answer")


def test_a_reranker_reorders_the_fused_list_and_its_scores_are_explained():
    h = TurnHarness()
    h.say("I prefer green tea", "I live in Berlin", "I work as a nurse")
    plain = ask(h, "tell me about me", k=3)
    reranked = ask(h, "tell me about me", k=3, reranker=Reverse())
    assert [i.id for i in reranked.items] != [i.id for i in plain.items]
    assert all("rerank_score" in i.explanation for i in reranked.items)


def test_a_failing_reranker_keeps_the_order_and_notes_why():
    h = TurnHarness()
    h.say("I prefer green tea", "I live in Berlin")
    plain = ask(h, "tell me about me", k=2)
    broken = ask(h, "tell me about me", k=2, reranker=Broken())
    assert [i.id for i in broken.items] == [i.id for i in plain.items]
    assert any("rerank" in n for n in broken.trace["notes"])


def test_past_statements_come_back_only_on_request_and_marked():
    h = TurnHarness()
    h.say("I live in Berlin", "I moved, I live in Munich now")
    statuses = {m.content: m.status for m in h.state.memories.values()}
    assert MemoryStatus.SUPERSEDED in statuses.values(), statuses
    default = ask(h, "where do I live")
    assert all(i.status in ("active", "log") for i in default.items)
    history = ask(h, "where do I live", statuses=RECALLABLE_STATUSES | HISTORICAL_STATUSES)
    assert "superseded" in {i.status for i in history.items}


def test_a_time_range_finds_a_turn_that_never_became_a_memory_and_comes_first():
    h = TurnHarness()
    now = ASKED
    h.drain({**turn(1, "我去杭州出差了三天"), "at": (now - timedelta(days=6)).isoformat()})
    h.drain(
        {
            **turn(2, "Last month I went to Lisbon, I live in Berlin"),
            "at": (now - timedelta(days=40)).isoformat(),
        }
    )
    assert all("杭州" not in m.content for m in h.state.memories.values())  # chit-chat level
    out = ask(h, "上周我去哪儿了")
    top = out.items[0]
    assert top.content == "我去杭州出差了三天" and top.type == "turn"
    assert "time" in top.explanation["paths"]
    assert any(c.startswith("time:") for c in top.explanation["matched_cues"])


def test_time_words_are_a_filter_not_keywords():
    h = TurnHarness()
    h.drain(turn(1, "the last train leaves at midnight"))
    out = ask(h, "what did I do last week")
    assert "k:last" not in out.trace["cues"]["keywords"] and "last" not in out.trace["cues"]["keywords"]


def test_the_conversation_log_never_brings_back_a_superseded_or_forgotten_statement():
    from shared.lifecycle import curation

    h = TurnHarness()
    h.say("I live in Berlin", "I moved, I live in Munich now")
    h.drain(turn(3, "my locker code is 4711", event_id="e-locker") | {"metadata": {"remember": True}})
    berlin = [m for m in h.state.memories.values() if "Berlin" in m.content]
    assert berlin and all(m.status is MemoryStatus.SUPERSEDED for m in berlin)
    out = ask(h, "Berlin", k=10)
    assert all("Berlin" not in i.content for i in out.items), out.items
    assert any("Munich" in i.content for i in ask(h, "where do I live", k=10).items)  # the control
    [locker] = [m for m in h.state.memories.values() if "4711" in m.content]
    assert any("4711" in i.content for i in ask(h, "what is my locker code", k=10).items)  # before
    with h.store.uow() as uow:
        curation.forget(uow, "default", "u1", locker.id, NOW)
        uow.commit()
    out = ask(h, "what is my locker code", k=10)
    assert all("4711" not in i.content for i in out.items), out.items


def test_a_redacted_turn_is_never_embedded_or_indexed_again():
    h = TurnHarness()
    h.say(CHAT, "生产环境部署端口是8443")
    with h.store.uow() as uow:
        assert uow.events.redact("default", "u1", ["e-u1-s1-1"]) == [("e-u1-s1-1", "s1")]
        assert uow.events.redact("default", "someone-else", ["e-u1-s1-2"]) == []  # scoped to the user
        uow.commit()
    stats = rebuild_indexes(h.store.uow, h.indexes, h.embedder)
    assert stats["turns_embedded"] == 0 and stats["turns_indexed"] == 1
    assert h.turns.ids("default", "u1") == {turn_point_id("default", "u1", "e-u1-s1-2")}
    assert all("fox" not in i.content for i in ask(h, "red fox old mill").items)
    # The control: the turn that was not redacted is still found.
    assert any("8443" in i.content for i in ask(h, "生产环境部署端口").items)


def test_reindex_after_a_model_change_re_embeds_page_by_page_without_tripping_on_later_pages():
    h = TurnHarness()
    for i in range(1, 6):
        h.drain(turn(i, f"{CHAT} number {i}"))
    for row in h.state.events.values():
        row["embedding_model"] = "some-older-model"  # as if indexed under another model
    stats = rebuild_collection(h.store.uow, TURNS, h.turns, h.embedder, batch_size=2)
    assert stats == {"turns_indexed": 5, "turns_embedded": 5}
    assert all(
        r["embedding_model"] == h.embedder.model_name and r["turn_indexed"] for r in h.state.events.values()
    )
    assert len(h.turns.ids("default", "u1")) == 5


def test_a_redacted_turn_never_shows_up_blank_by_time_or_by_a_point_that_outlived_it():
    h = TurnHarness()
    now = ASKED
    h.drain({**turn(1, "我去杭州出差了三天"), "at": (now - timedelta(days=6)).isoformat()})
    with h.store.uow() as uow:
        uow.events.redact("default", "u1", ["e-u1-s1-1"])  # its point is still in the index
        uow.commit()
    assert h.turns.ids("default", "u1")
    for query in ("上周我去哪儿了", "杭州出差"):
        out = ask(h, query)
        assert out.items == [], (query, out.items)


def test_redelivered_embed_and_index_messages_resend_the_next_step():
    h = TurnHarness()
    h.drain(turn(1, CHAT))  # no memory: extract -> embed -> index (persist skipped)
    h.state.events["e-u1-s1-1"]["stage"] = "persisted"  # as if the index message was lost
    assert [f.task for f in h.run(TaskName.EMBED, ("e-u1-s1-1",))] == ["memory.index"]
    h.drain(turn(2, "生产环境部署端口是8443"))
    h.state.events["e-u1-s1-2"]["stage"] = "indexed"  # as if the resolve message was lost
    assert [f.task for f in h.run(TaskName.INDEX, ("e-u1-s1-2",))] == ["memory.resolve"]


def test_a_named_range_is_ranked_by_meaning_not_by_which_turns_are_newest():
    from shared.recall.windows import WINDOW_CANDIDATES

    h = TurnHarness()
    now = ASKED
    week_start = now - timedelta(days=now.weekday() + 7)  # Monday of last week
    h.drain(
        {
            **turn(1, "I travelled to Hangzhou for a work trip"),
            "at": (week_start + timedelta(hours=9)).isoformat(),
        }
    )
    # A whole session later in the same week: more turns than the time path keeps.
    for i in range(2, WINDOW_CANDIDATES + 12):
        chat = f"lol {i} cats sleeping again today haha"
        h.drain({**turn(i, chat), "at": (week_start + timedelta(days=2, minutes=i)).isoformat()})
    out = ask(h, "where did I travel for work last week")
    top = out.items[0]
    assert "Hangzhou" in top.content, [i.content for i in out.items]
    assert "time" in top.explanation["paths"]
    assert out.trace["candidates"]["time"] > WINDOW_CANDIDATES  # the range was read past its newest 20


def test_an_assistants_question_lends_its_score_to_no_turn_before_it():
    """ "好呀，你有什么忌口吗？" scores on the words of the user's later "我有什么忌口？": its window
    holding the greeting before it must not rank the greeting level with the user's answer."""
    h = TurnHarness()
    greeting = "晚上好！想请你帮我想想今晚吃什么。"
    question, answer = "好呀，你有什么忌口吗？", "我不吃香菜，也不太能吃辣。"
    said = [("user", greeting), ("assistant", question), ("user", answer)]
    for seq, (role, content) in enumerate(said, 1):
        h.drain({**turn(seq, content), "role": role})
    out = ask(h, "我有什么忌口？")
    # (Lent the question's score, the greeting came first: seen failing that way.)
    assert out.items[0].content.startswith("我不吃香菜"), [i.content for i in out.items]
