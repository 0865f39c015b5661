"""Facts over time, part two (issue 31, items 2, 3 and 6), on the real pipeline, rules only:

* a change of job in words the first statement never used ("Loving the new job at the vet
  clinic!" after "I'm a pharmacist in Leeds.") supersedes it, found by the statement's meaning;
* a plan ("我们计划明年春天搬到苏州") is a plan, recallable as one: the present home stays current;
* three near-repeats merge into one memory that reads as one statement and cites every source.

Each user's turns are published among unrelated turns of the same user, through the producer at
explicit times, and processed by real worker processes with the bundled E5 model (the meaning of
a statement is read in its space) and the embedded index; recall is ``recall_for`` at a fixed
``now``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from producers.publisher import Publisher
from service.operations.recall import recall_for
from shared.models import Memory, MemoryStatus, MemoryType
from shared.settings import Settings
from tests.support.llm_stub import settings_on_stub
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, chat_completion_body
from tests.support.services import PublishProcessed, as_shipped, wait_processed
from workers.bootstrap import Container, build_container

CST = timezone(timedelta(hours=8))
GMT = UTC
TENANT = "default"
ALL = list(MemoryStatus)


@dataclass(frozen=True)
class Turn:
    content: str
    at: datetime
    user_id: str | None = None  # another user's turn among them (default: the ingest's user)


Ingest = Callable[[str, list[Turn]], Container]


@pytest.fixture
def it_settings(it_settings: Settings) -> Settings:
    """As the product runs by default: the E5 model, context windows."""
    return as_shipped(it_settings)


@pytest.fixture
def ingest(publish_turns: PublishProcessed) -> Ingest:
    def run(user_id: str, turns: list[Turn]) -> Container:
        container, _ = publish_turns([(t.user_id or user_id, t.content, t.at) for t in turns])
        return container

    return run


def _memories(c: Container, user_id: str, statuses: list[MemoryStatus] | None = None) -> list[Memory]:
    with c.uow() as uow:
        return uow.memories.for_user(TENANT, user_id, statuses or [MemoryStatus.ACTIVE])


def _one(memories: list[Memory], word: str) -> Memory:
    found = [m for m in memories if word in m.content]
    assert len(found) == 1, [(m.type.value, m.status.value, m.content) for m in memories]
    return found[0]


def _ask(c: Container, user_id: str, query: str, now: datetime) -> list[dict[str, Any]]:
    out = recall_for(c, user_id, query, k=5, now=now, reinforce=False)
    items: list[dict[str, Any]] = out["items"]
    assert items, out
    return items


def _first_memory(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The first item that is a memory (not a turn of the conversation log or working memory)."""
    return next(i for i in items if i["type"] not in ("turn", "working"))


def _shown(items: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {i['content']!r} {i.get('type')} {i.get('score')}" for i in items)


def test_a_new_job_in_other_words_supersedes_the_old_one(ingest: Ingest) -> None:
    user, other = "job-u1", "job-u10"  # two users whose ids could collide
    march, june = datetime(2026, 3, 10, 9, 0, tzinfo=GMT), datetime(2026, 6, 12, 18, 0, tzinfo=GMT)
    c = ingest(
        user,
        [
            Turn("I'm a pharmacist in Leeds.", march),
            Turn("I love hiking on weekends", march + timedelta(days=3)),
            Turn("I have a cat named Mochi", march + timedelta(days=20)),
            Turn("Loving the new job at the vet clinic!", june),
            Turn("I'm allergic to peanuts", june + timedelta(days=2)),
            Turn("I'm a pharmacist in Leeds.", june + timedelta(days=5), other),
        ],
    )

    active = _memories(c, user)
    clinic = _one(active, "vet clinic")
    assert clinic.slot == "profile:job"
    assert not [m for m in active if "pharmacist" in m.content], [m.content for m in active]
    # The pharmacy is history: superseded by the clinic, not deleted.
    pharmacy = _one(_memories(c, user, ALL), "pharmacist")
    assert pharmacy.status is MemoryStatus.SUPERSEDED and pharmacy.superseded_by == clinic.id
    assert pharmacy.valid_to is not None
    # The other user's pharmacy is theirs and current.
    assert _one(_memories(c, other), "pharmacist").status is MemoryStatus.ACTIVE

    items = _ask(c, user, "Where do I work?", datetime(2026, 7, 1, 9, 0, tzinfo=GMT))
    # The answer is the clinic, first (the question asks for the job slot's current value:
    # shared/recall/slots.py), and the pharmacy is not offered.
    assert "clinic" in _first_memory(items)["content"], _shown(items)
    assert not [i for i in items if "pharmacist" in i["content"]], _shown(items)


def test_a_plan_to_move_leaves_the_present_home_current(ingest: Ingest) -> None:
    user = "plan-u1"
    march, june = datetime(2026, 3, 8, 20, 0, tzinfo=CST), datetime(2026, 6, 6, 21, 0, tzinfo=CST)
    c = ingest(
        user,
        [
            Turn("我住在杭州西湖区", march),
            Turn("我喜欢周末去爬山", march + timedelta(days=5)),
            Turn("我养了一只猫，叫团子", march + timedelta(days=30)),
            Turn("我们计划明年春天搬到苏州", june),
            Turn("我对花生过敏", june + timedelta(days=3)),
        ],
    )
    active = _memories(c, user)
    home = _one(active, "杭州")
    assert home.slot == "profile:home" and home.status is MemoryStatus.ACTIVE
    plan = _one(active, "苏州")
    assert plan.type is MemoryType.TASK and plan.slot == "plan:profile:home" and "plan" in plan.tags
    # Meant for next spring: due at the end of the time it names (2027), in the user's zone.
    assert plan.due_at == datetime(2027, 12, 31, 23, 59, 59, tzinfo=CST)

    july = datetime(2026, 7, 10, 10, 0, tzinfo=CST)
    items = _ask(c, user, "我现在住哪？", july)
    assert "杭州" in _first_memory(items)["content"], _shown(items)
    items = _ask(c, user, "我们打算什么时候搬家？", july)
    assert "苏州" in _first_memory(items)["content"], _shown(items)


def test_plans_said_in_english_leave_the_present_current(ingest: Ingest) -> None:
    user, other = "plan-en-u1", "plan-en-u10"
    march = datetime(2026, 3, 2, 9, 0, tzinfo=GMT)
    c = ingest(
        user,
        [
            Turn("I live in Hangzhou with my partner", march),
            Turn("I'm a data analyst at Alibaba", march + timedelta(days=1)),
            Turn("I love hiking on weekends", march + timedelta(days=2)),
            Turn("I'm going to move to Suzhou next spring", march + timedelta(days=20)),
            Turn("I will start at Google in May", march + timedelta(days=21)),
            Turn("I will start at Google in May", march + timedelta(days=21), other),
        ],
    )
    active = _memories(c, user)
    assert _one(active, "Hangzhou").slot == "profile:home"
    assert _one(active, "Alibaba").slot == "profile:job"
    move, job = _one(active, "Suzhou"), _one(active, "Google")
    assert (move.type, move.slot) == (MemoryType.TASK, "plan:profile:home"), move
    assert (job.type, job.slot) == (MemoryType.TASK, "plan:profile:job"), job
    assert job.due_at == datetime(2026, 5, 31, 23, 59, 59, tzinfo=GMT)
    # The other user's plan is theirs: it touches nothing of this user's.
    assert [m.slot for m in _memories(c, other)] == ["plan:profile:job"]

    april = datetime(2026, 4, 10, 9, 0, tzinfo=GMT)
    assert "Alibaba" in _first_memory(_ask(c, user, "Where do I work?", april))["content"]
    assert "Hangzhou" in _first_memory(_ask(c, user, "Where do I live now?", april))["content"]


def test_a_plan_that_happened_supersedes_the_plan_and_the_old_home(ingest: Ingest) -> None:
    user = "moved-u1"
    at = datetime(2025, 3, 8, 20, 0, tzinfo=CST)
    c = ingest(
        user,
        [
            Turn("我住在杭州西湖区", at),
            Turn("我们计划明年春天搬到苏州", at + timedelta(days=90)),
            Turn("我们上个月搬到苏州了", at + timedelta(days=420)),
        ],
    )
    everything = _memories(c, user, ALL)
    moved = _one(everything, "上个月搬到苏州")
    assert moved.status is MemoryStatus.ACTIVE and moved.slot == "profile:home"
    for old in (_one(everything, "杭州"), _one(everything, "计划")):
        assert old.status is MemoryStatus.SUPERSEDED and old.superseded_by == moved.id, old


def test_near_repeats_merge_into_one_statement_that_cites_every_source(ingest: Ingest) -> None:
    user = "merge-u1"
    at = datetime(2026, 4, 1, 12, 0, tzinfo=GMT)
    said = [
        "I'm vegetarian, I don't eat meat or fish",
        "Reminder: I'm vegetarian, please never suggest meat recipes",
        "Still vegetarian of course, no meat for me",
    ]
    c = ingest(
        user,
        [
            Turn(said[0], at),
            Turn("I have a cat named Mochi", at + timedelta(days=1)),
            Turn(said[1], at + timedelta(days=7)),
            Turn("I love hiking on weekends", at + timedelta(days=8)),
            Turn(said[2], at + timedelta(days=14)),
        ],
    )
    [diet] = [m for m in _memories(c, user) if "vegetarian" in m.content]
    # One statement: nothing said twice, no "Reminder:", no "Still ... of course".
    assert diet.content.lower().count("vegetarian") == 1, diet.content
    assert "reminder" not in diet.content.lower() and "of course" not in diet.content, diet.content
    assert "never suggest meat recipes" in diet.content, diet.content  # what the second one added
    # ... and it keeps every source.
    with c.uow() as uow:
        told = {
            e.event.content for e in uow.events.of_user(TENANT, user, [s["event_id"] for s in diet.sources])
        }
    assert told == set(said)


_TURN_BLOCK = re.compile(r'<data name="turn">(".*?")</data>')


def _echoing_llm(request: RecordedRequest) -> StubResponse:
    """A model that scores every turn 9, proposes the turn itself as a profile fact, and answers a
    judging request with no JSON (so that the rules judge)."""
    system, user = (m["content"] for m in request.json["messages"][:2])
    if '"importance"' in system and '"memories"' not in system:
        answer: dict[str, Any] = {"importance": 9.0, "reasons": ["stub"]}
    elif '"memories"' in system:
        said = json.loads(_TURN_BLOCK.search(user).group(1))  # type: ignore[union-attr]
        answer = {"memories": [{"type": "profile", "content": said, "importance": 9.0, "tags": []}]}
    else:
        return StubResponse(json_body=chat_completion_body("no verdict here"))
    return StubResponse(json_body=chat_completion_body(json.dumps(answer, ensure_ascii=False)))


def test_on_the_llm_path_a_change_supersedes_and_a_plan_stays_a_plan(
    it_settings: Settings, start_workers: Callable[..., list[Any]]
) -> None:
    en, zh = "llm-u1", "llm-u10"
    march = datetime(2026, 3, 8, 20, 0, tzinfo=CST)
    with StubServer(default=_echoing_llm) as stub:
        settings = settings_on_stub(it_settings, stub)
        c = build_container(settings)
        try:
            with Publisher.from_settings(settings) as pub:
                sent = [
                    (en, "I live in Boston", march),
                    (en, "I now live in Seattle", march + timedelta(days=90)),
                    (zh, "我住在杭州西湖区", march),
                    (zh, "我们计划明年春天搬到苏州", march + timedelta(days=90)),
                ]
                ids = [
                    pub.publish(
                        user_id=u, session_id="s1", role="user", content=t, at=at.isoformat()
                    ).event_id
                    for u, t, at in sent
                ]
            wait_processed(c, ids, start_workers(settings))
            everything = _memories(c, en, ALL)
            seattle, boston = _one(everything, "Seattle"), _one(everything, "Boston")
            assert seattle.status is MemoryStatus.ACTIVE and seattle.slot == "profile:home"
            assert boston.status is MemoryStatus.SUPERSEDED and boston.superseded_by == seattle.id
            home, plan = _one(_memories(c, zh, ALL), "杭州"), _one(_memories(c, zh, ALL), "苏州")
            assert home.status is MemoryStatus.ACTIVE
            assert (plan.status, plan.type, plan.slot) == (
                MemoryStatus.ACTIVE,
                MemoryType.TASK,
                "plan:profile:home",
            )
        finally:
            c.close()
