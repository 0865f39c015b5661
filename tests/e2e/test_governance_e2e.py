"""Memory governance end to end: real worker processes, real Postgres and Redis.

The seed cases of the governance issue in Chinese and English, published through the producer;
conflict resolution runs on its own queue; consolidation runs as the beat task would (sent by
name to a real worker). The LLM path talks to a local OpenAI-compatible server started here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from infra.broker import send_only_app
from producers.publisher import Publisher
from shared.events import validate_turn
from shared.ingest.extraction import extract
from shared.lifecycle.maintenance import history_chain
from shared.models import MemoryStatus, MemoryType
from shared.queues import ROUTES, TaskName
from shared.recall.cascade import recall
from shared.recall.request import RecallRequest
from tests.support.llm_stub import settings_on_stub
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, chat_completion_body
from tests.support.queues import assert_queues_drain
from tests.support.services import wait_processed, wait_until
from workers.bootstrap import build_container

# Ten days before today: the consolidation task reads the real clock and considers the last 30 days
# of episodes, so a fixed date would fall out of its window as the calendar moves on.
DAY0 = (datetime.now(UTC) - timedelta(days=10)).replace(hour=20, minute=0, second=0, microsecond=0)


def _turn(user: str, day: int, minute: int, content: str, event_id: str) -> dict:
    return {
        "event_id": event_id,
        "user_id": user,
        "session_id": f"day-{day}",
        "role": "user",
        "content": content,
        "at": (DAY0 + timedelta(days=day, minutes=minute)).isoformat(),
    }


def seed_turns(user: str) -> list[dict]:
    turns = [
        _turn(user, 0, 1, "我不吃香菜", "cilantro-1"),
        _turn(user, 1, 1, "我不吃香菜", "cilantro-2"),
        _turn(user, 2, 1, "我不吃香菜", "cilantro-3"),
        _turn(user, 0, 2, "我喜欢喝美式", "coffee-old"),
        _turn(user, 3, 2, "我现在改喝拿铁了", "coffee-new"),
        # The newer Java statement is published first: resolution must follow event time.
        _turn(user, 4, 3, "最近在写 Java 项目", "java-new"),
        _turn(user, 0, 3, "我不用 Java", "java-old"),
        _turn(user, 0, 4, "好的，谢谢", "chitchat"),
    ]
    for day in range(5):
        turns.append(_turn(user, day, 30, "收盘了吗", f"fund-close-{day}"))
        turns.append(_turn(user, day, 31, "我那只基金怎么样", f"fund-mine-{day}"))
    return turns


def test_seed_cases_keep_what_a_curator_would_keep(it_settings, start_workers):
    c = build_container(it_settings)
    user = "seed"
    with Publisher.from_settings(it_settings) as pub:
        ids = [pub.publish_turn(t).event_id for t in seed_turns(user)]
    workers = start_workers()
    wait_processed(c, ids, workers)
    assert_queues_drain(it_settings.broker_url, 60)

    # Consolidation runs as beat would run it: the task sent by name to a real worker.
    sender = send_only_app(it_settings.broker_url)
    sender.send_task(TaskName.CONSOLIDATE.value, queue=ROUTES[TaskName.CONSOLIDATE].value)

    def semantic():
        with c.uow() as uow:
            return [m for m in uow.memories.for_user("default", user, None) if m.type is MemoryType.SEMANTIC]

    assert wait_until(lambda: len(semantic()) == 1, 60)
    assert_queues_drain(it_settings.broker_url, 60)

    with c.uow() as uow:
        rows = {m.content: m for m in uow.memories.for_user("default", user, None)}
    cilantro = rows["我不吃香菜"]
    assert cilantro.status is MemoryStatus.ACTIVE and cilantro.access_count == 2
    assert [s["event_id"] for s in cilantro.sources] == ["cilantro-1", "cilantro-2", "cilantro-3"]

    old_coffee, new_coffee = rows["我喜欢喝美式"], rows["我现在改喝拿铁了"]
    assert old_coffee.status is MemoryStatus.ACTIVE and new_coffee.status is MemoryStatus.ACTIVE
    assert old_coffee.importance == pytest.approx(new_coffee.importance / 2, abs=1.0)
    assert old_coffee.importance < new_coffee.importance

    old_java, new_java = rows["我不用 Java"], rows["最近在写 Java 项目"]
    assert old_java.status is MemoryStatus.SUPERSEDED and old_java.superseded_by == new_java.id
    assert old_java.valid_to == new_java.valid_from and "contradicts" in (old_java.status_reason or "")
    assert new_java.status is MemoryStatus.ACTIVE

    assert "好的，谢谢" not in rows  # chit-chat stays only in the event log
    [sem] = semantic()
    assert "基金" in sem.content and len(sem.sources) == 10

    with c.uow() as uow:
        chain = history_chain(uow, "default", user, old_java.id)
        answer = recall(uow, RecallRequest("default", user, "我喝什么咖啡", now=DAY0 + timedelta(days=6)),
                        embedder=c.embedder, index=c.search_index(), working_memory=None)  # fmt: skip
    assert [m["status"] for m in chain["memories"]] == ["superseded", "active"]
    assert {"created", "superseded"} <= {
        h["action"] for h in chain["history"] if h["memory_id"] == old_java.id
    }
    # The current truth first: the newer coffee preference ranks above the one it replaced.
    contents = [i.content for i in answer.items]
    assert contents.index("我现在改喝拿铁了") < contents.index("我喜欢喝美式")
    assert "我不用 Java" not in contents
    c.close()


def _llm_responder(request: RecordedRequest) -> StubResponse:
    body = request.json
    system = body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    if "BROKEN" in user:
        return StubResponse(json_body=chat_completion_body("this is { not json"))
    if '"importance"' in system and '"memories"' not in system:
        answer = {"importance": 9.0, "reasons": ["stub says so"]}
    else:
        answer = {
            "memories": [
                {"type": "fact", "content": "User deploys production on port 8443", "importance": 9.0,
                 "tags": ["deployment"], "entities": ["8443"]}
            ]
        }  # fmt: skip
    reply = chat_completion_body(json.dumps(answer))
    reply["usage"] = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
    return StubResponse(json_body=reply)


def test_llm_path_and_its_fallback_never_lose_a_memory(it_settings, start_workers):
    with StubServer(default=_llm_responder) as stub:
        # settings_on_stub's defaults, which this test needs. A timeout no loaded machine reaches:
        # the stub answers at once, and a timed-out call would take the rules' path this test tells
        # apart from the LLM's. No cooldown: the broken answer must not send the other turn down
        # the rules' path when a worker takes it first.
        settings = settings_on_stub(it_settings, stub)
        c = build_container(settings)
        with Publisher.from_settings(settings) as pub:
            good = pub.publish(
                user_id="l", session_id="s", role="user", content="生产环境部署端口是8443"
            ).event_id
            broken = pub.publish(
                user_id="l", session_id="s", role="user", content="BROKEN 我不吃香菜"
            ).event_id
        workers = start_workers(settings)
        wait_processed(c, [good, broken], workers)
        with c.uow() as uow:
            memories = {m.sources[0]["event_id"]: m for m in uow.memories.for_user("default", "l", None)}
            calls = uow.session.execute(
                text("SELECT operation, ok, prompt_tokens, event_id FROM llm_calls ORDER BY id")
            ).all()
        assert memories[good].content == "User deploys production on port 8443"  # the LLM's extraction
        assert "e:8443" in memories[good].cues  # cues always come from the rules
        # Invalid JSON: the rule-based result was kept for that turn.
        rules = extract(validate_turn({"user_id": "l", "session_id": "s", "seq": 1, "role": "user",
                                       "content": "BROKEN 我不吃香菜"}))  # fmt: skip
        assert memories[broken].content == rules.drafts[0].content
        # Usage rows name the turn by its pipeline key (event ids are unique per tenant only).
        assert ("scoring", True, 120, f"default/{good}") in [tuple(r) for r in calls]
        assert any(r.operation == "scoring" and not r.ok and r.event_id == f"default/{broken}" for r in calls)
        assert all("BROKEN" not in str(tuple(r)) for r in calls)
        c.close()
