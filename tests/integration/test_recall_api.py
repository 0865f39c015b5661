"""In-process recall for apps (service.operations.recall) and the agent tools wired to it, on real parts.

Bilingual turns go through the producer, real worker processes and the embedded Qdrant engine
owned by the index worker; ``recall_for`` then answers with items and a labelled prompt block,
and ``MemoryTools`` answers ``search_memory`` and ``remember`` end to end.
"""

from __future__ import annotations

import json

from producers.agent_tools import MemoryTools
from producers.publisher import Publisher
from service.operations.recall import recall_for
from shared.language.text import approx_token_count
from shared.models import MemoryStatus
from tests.support.services import wait_processed
from tests.support.workload import BASE, publish_conversation
from workers.bootstrap import build_container

TURNS = [
    "我不吃香菜，点餐时记得提醒",
    "生产环境部署端口是8443",
    "I prefer green tea over coffee",
    "I live in Berlin and work as a nurse",
    "好的，谢谢",
]


def test_recall_for_and_memory_tools_end_to_end(e5_settings, start_workers):
    it_settings = e5_settings  # recall by meaning
    c = build_container(it_settings)
    with Publisher.from_settings(it_settings) as pub:
        ids = publish_conversation(pub, "ra", "s1", enumerate(TURNS))
        workers = start_workers(it_settings)
        wait_processed(c, ids, workers)

        # Chinese query: items with explanations, and a Chinese block.
        zh = recall_for(c, "ra", "我不吃香菜", k=3)
        assert zh["items"] and zh["items"][0]["content"] == "我不吃香菜"
        assert zh["items"][0]["type"] == "preference" and zh["items"][0]["explanation"]["paths"]
        assert zh["prompt"].startswith("[长期记忆 - 用户偏好]\n- 我不吃香菜 (2026-11-01)")
        assert "[Long-term memory" not in zh["prompt"]
        assert zh["trace"]["embedding_model"] and zh["trace"]["vector_backend"]
        json.dumps(zh)

        # English query: English labels, even over Chinese memories.
        en = recall_for(c, "ra", "what tea do I prefer", k=3)
        assert en["stage"] == "ranked"
        assert en["items"][0]["content"] == "I prefer green tea over coffee"
        # Groups come in their fixed order (profile first), so the preferences block need not lead.
        preferences = "[Long-term memory - preferences]\n- I prefer green tea over coffee (2026-11-01)"
        assert preferences in en["prompt"]
        assert "[长期记忆" not in en["prompt"]

        # Several types: groups in their fixed order, profile before preferences.
        mixed = recall_for(c, "ra", "tell me about the user", k=5)
        assert mixed["stage"] == "ranked" and len(mixed["items"]) >= 3
        labels = [line for line in mixed["prompt"].splitlines() if line.startswith("[")]
        order = [
            "[Long-term memory - profile]",
            "[Long-term memory - preferences]",
            "[Long-term memory - facts]",
            "[Long-term memory - tasks]",
            "[Conversation log]",
        ]
        assert labels == [label for label in order if label in labels]
        assert "- I live in Berlin and work as a nurse (2026-11-01)" in mixed["prompt"]

        # A budget cuts the items (contents) and the block (headers and dates too).
        cut = recall_for(c, "ra", "tell me about the user", k=5, budget_tokens=12)
        assert 1 <= len(cut["items"]) < len(mixed["items"])
        assert sum(approx_token_count(i["content"]) for i in cut["items"]) <= 12
        assert cut["trace"]["budget"] == {
            "tokens": 12,
            "kept": len(cut["items"]),
            "dropped": len(mixed["items"]) - len(cut["items"]),
        }
        assert approx_token_count(cut["prompt"]) <= 12

        # The agent tools, wired to recall_for and the real publisher.
        tools = MemoryTools(
            lambda query, k, session_id: recall_for(c, "ra", query, k=k, session_id=session_id),
            pub,
            "ra",
            "chat-9",
        )
        found = json.loads(tools.handle("search_memory", '{"query": "生产环境部署端口", "format": "prompt"}'))
        assert "[长期记忆 - 事实]\n- 生产环境部署端口是8443 (2026-11-01)" in found["prompt"]
        items = json.loads(tools.handle("search_memory", {"query": "where do I live", "k": 2}))["items"]
        assert 1 <= len(items) <= 2 and items[0]["content"] == "I live in Berlin and work as a nurse"
        assert "error" in json.loads(tools.handle("search_memory", {"query": "x", "k": 99}))

        # remember: recallable at once through the working memory, before any worker sees it.
        for w in workers:
            w.stop()
        stored = json.loads(tools.handle("remember", '{"content": "My locker code is 4711", "kind": "fact"}'))
        assert set(stored) == {"event_id", "seq"} and stored["seq"] == 1
        hits = json.loads(tools.handle("search_memory", {"query": "locker code 4711"}))["items"]
        assert hits[0]["content"] == "My locker code is 4711"
        assert hits[0]["type"] == "working" and hits[0]["explanation"]["paths"] == ["working"]
        assert hits[0]["sources"][0]["event_id"] == stored["event_id"]

    # Once processed, the event log keeps the remember metadata.
    wait_processed(c, [stored["event_id"]], start_workers())
    with c.uow() as uow:
        timeline = uow.events.timeline("default", "ra", "chat-9")
    assert [(e.event.content, e.event.metadata) for e in timeline] == [
        ("My locker code is 4711", {"remember": True, "kind": "fact"})
    ]
    c.close()


def test_a_detail_only_the_conversation_log_holds_is_recalled_through_the_index_worker(
    it_settings, start_workers
):
    """Chit-chat never becomes a memory, but the turn is embedded and indexed in the conversation
    log; while the index worker owns both embedded indexes, recall searches them through it."""
    c = build_container(it_settings)
    chat = "lol we saw a red fox near the old mill by the river"
    with Publisher.from_settings(it_settings) as pub:
        ids = [
            pub.publish(
                user_id="log", session_id="s1", role="user", content=text, at=BASE.isoformat()
            ).event_id
            for text in (chat, "生产环境部署端口是8443")
        ]
        other = pub.publish(
            user_id="log-other", session_id="s1", role="user", content=chat, at=BASE.isoformat()
        )
        workers = start_workers()
        wait_processed(c, [*ids, other.event_id], workers)
        with c.uow() as uow:
            assert not uow.memories.by_source("default", "log", ids[0], [MemoryStatus.ACTIVE])
        out = recall_for(c, "log", "where did we see the red fox", k=3)
        top = out["items"][0]
        assert top["content"] == chat and top["type"] == "turn" and top["status"] == "log"
        assert top["sources"][0]["event_id"] == ids[0]
        assert {"turn_vector", "turn_keyword"} & set(top["explanation"]["paths"])
        assert "[Conversation log]" in out["prompt"]
        assert {s["event_id"] for i in out["items"] for s in i["sources"]} <= set(ids)  # never log-other's
    c.close()
