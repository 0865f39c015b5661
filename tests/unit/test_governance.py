"""Seed cases of memory governance, through the pipeline's handlers on in-memory fakes.

Extraction and the conflict judge are the real rule-based ones; only storage, the index and the
embedder are fakes.
"""

from datetime import UTC, datetime, timedelta

from shared.ingest.conflicts import judge_by_rules
from shared.ingest.llm_paths import llm_judge
from shared.lifecycle import maintenance
from shared.llm import JudgeAnswer, LLMOperation
from shared.models import MemoryStatus, MemoryType
from tests.support.pipeline import NOW, Harness, turn


def statuses(h, user="u1"):
    return sorted((m.content, m.status.value) for m in h.state.memories.values() if m.user_id == user)


def by_content(h, text):
    [m] = [m for m in h.state.memories.values() if m.content == text]
    return m


def history(h, memory_id):
    return [(e.action, e.related_id) for e in h.state.history if e.memory_id == memory_id]


def test_americano_then_latte_keeps_both_and_halves_the_older():
    h = Harness()
    h.say("我喜欢喝美式", "我现在改喝拿铁了")
    old, new = by_content(h, "我喜欢喝美式"), by_content(h, "我现在改喝拿铁了")
    assert old.status is MemoryStatus.ACTIVE and new.status is MemoryStatus.ACTIVE
    assert old.importance == 6.5 / 2 and new.importance >= 6
    assert ("importance_halved", new.id) in history(h, old.id)
    assert "changes it" in old.status_reason


def test_java_statement_is_superseded_by_the_newer_contradiction():
    h = Harness()
    h.say("我不用 Java", "最近在写 Java 项目")
    old, new = by_content(h, "我不用 Java"), by_content(h, "最近在写 Java 项目")
    assert old.status is MemoryStatus.SUPERSEDED and old.superseded_by == new.id
    assert old.valid_to == new.valid_from
    assert new.status is MemoryStatus.ACTIVE
    assert ("superseded", new.id) in history(h, old.id) and ("supersedes", old.id) in history(h, new.id)
    # Nothing was deleted, and the index no longer offers the superseded statement as active.
    assert len([m for m in h.state.memories.values() if m.user_id == "u1"]) == 2
    hits = h.index.search("default", "u1", new.embedding, 10, ["active"])
    assert [hit.id for hit in hits] == [new.id]


def test_out_of_order_delivery_resolves_by_seq_not_arrival():
    in_order, reversed_ = Harness(), Harness()
    first, second = turn(1, "我不用 Java"), turn(2, "最近在写 Java 项目")
    in_order.drain(first)
    in_order.drain(second)
    reversed_.drain(second)  # the newer statement arrives first
    reversed_.drain(first)
    assert (
        statuses(in_order)
        == statuses(reversed_)
        == [
            ("我不用 Java", "superseded"),
            ("最近在写 Java 项目", "active"),
        ]
    )


def test_moving_city_supersedes_the_old_home():
    h = Harness()
    h.say("我住杭州", "我搬到上海了")
    assert statuses(h) == [("我住杭州", "superseded"), ("我搬到上海了", "active")]


def test_unrelated_statements_both_stay():
    h = Harness()
    h.say("我不吃香菜", "生产环境部署端口是8443")
    assert all(s == "active" for _, s in statuses(h))


def test_five_days_of_fund_questions_become_one_semantic_memory_idempotently():
    h = Harness()
    questions = ["收盘了吗", "我那只基金怎么样"]
    seq = 0
    for day in range(5):
        for q in questions:
            seq += 1
            h.drain(turn(seq, q, session=f"evening-{day}", minutes=day * 24 * 60))
    episodes = [m for m in h.state.memories.values() if m.type is MemoryType.EPISODIC]
    assert {m.content for m in episodes} == set(questions)  # repeats reinforce, not duplicate
    now = NOW + timedelta(days=6)
    stats, touched = maintenance.consolidate(h.store.uow, h.embedder, now)
    assert stats["created"] == 1 and touched == [("default", "u1")]
    [semantic] = [m for m in h.state.memories.values() if m.type is MemoryType.SEMANTIC]
    assert "基金" in semantic.content and "5天" in semantic.content
    assert len(semantic.sources) == 10 and semantic.status is MemoryStatus.ACTIVE
    assert {e.related_id for e in h.state.history if e.memory_id == semantic.id} == {m.id for m in episodes}
    assert all(m.status is MemoryStatus.ACTIVE for m in episodes)  # episodes stay; they decay on their own
    again, touched_again = maintenance.consolidate(h.store.uow, h.embedder, now)
    assert again["created"] == 0 and again["updated"] == 0 and touched_again == []
    assert len([m for m in h.state.memories.values() if m.type is MemoryType.SEMANTIC]) == 1


def test_two_days_of_questions_are_not_yet_a_pattern():
    h = Harness()
    for day in range(2):
        h.drain(turn(day + 1, "收盘了吗", session=f"e{day}", minutes=day * 24 * 60))
    stats, _ = maintenance.consolidate(h.store.uow, h.embedder, NOW + timedelta(days=3))
    assert stats["created"] == 0


class ScriptedLLM:
    """A fake LLM port: answers from a script, None when the script is empty (as on failure)."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.asked = []

    def ask(self, operation, instructions, data, schema):
        self.asked.append((operation, dict(data)))
        return self.answers.pop(0) if self.answers else None


def test_llm_judge_decides_and_failures_fall_back_to_rules():
    h = Harness()
    h.say("我不吃香菜", "我不吃葱")
    older, newer = by_content(h, "我不吃香菜"), by_content(h, "我不吃葱")
    merge = JudgeAnswer(relation="merge", reason="both are foods to avoid", merged_content="不吃香菜和葱")
    llm = ScriptedLLM([merge])
    verdict = llm_judge(llm)(older, newer)
    assert (verdict.relation, verdict.judge, verdict.merged_content) == ("merge", "llm", "不吃香菜和葱")
    assert llm.asked[0] == (LLMOperation.JUDGING, {"existing": "我不吃香菜", "new": "我不吃葱"})
    fallback = llm_judge(ScriptedLLM([]))(older, newer)  # the endpoint failed: rules decide
    assert fallback == judge_by_rules(older, newer)


def test_llm_merge_creates_a_memory_citing_both_and_keeps_the_originals():
    from shared.ingest.conflicts import Relation, Verdict, apply

    h = Harness()
    h.say("我不吃香菜", "我不吃葱")
    older, newer = by_content(h, "我不吃香菜"), by_content(h, "我不吃葱")
    out = apply(older, newer, Verdict(Relation.MERGE, "both", "llm", "不吃香菜和葱"), NOW)
    [merged] = out.created
    assert merged.content == "不吃香菜和葱" and merged.status is MemoryStatus.ACTIVE
    assert [s["event_id"] for s in merged.sources] == ["e-u1-s1-1", "e-u1-s1-2"]
    assert {m.status for m in out.changed.values()} == {MemoryStatus.SUPERSEDED}
    assert {m.superseded_by for m in out.changed.values()} == {merged.id}


def test_history_chain_follows_supersession_and_is_scoped_to_the_user():
    h = Harness()
    h.say("我不用 Java", "最近在写 Java 项目")
    old = by_content(h, "我不用 Java")
    with h.store.uow() as uow:
        chain = maintenance.history_chain(uow, "default", "u1", old.id)
        foreign = maintenance.history_chain(uow, "default", "someone-else", old.id)
    assert [m["content"] for m in chain["memories"]] == ["我不用 Java", "最近在写 Java 项目"]
    actions = [(e["memory_id"] == old.id, e["action"]) for e in chain["history"]]
    assert (
        (True, "created") in actions and (True, "superseded") in actions and (False, "supersedes") in actions
    )
    assert foreign == {"memory_id": old.id, "found": False, "memories": [], "history": []}


def test_task_rescheduled_invalidates_the_older_task():
    h = Harness()
    at = datetime(2026, 11, 30, 10, tzinfo=UTC)
    h.drain({**turn(1, "明天下午三点提醒我开会"), "at": at.isoformat()})
    h.drain({**turn(2, "会议改到后天下午三点了，记得提醒我"), "at": (at + timedelta(hours=1)).isoformat()})
    tasks = sorted(
        (m.content, m.status.value) for m in h.state.memories.values() if m.type is MemoryType.TASK
    )
    assert tasks == [
        ("会议改到后天下午三点了，记得提醒我", "active"),
        ("明天下午三点提醒我开会", "superseded"),
    ]


def test_near_duplicate_reinforces_the_older_memory():
    from dataclasses import replace

    from shared.ingest.conflicts import Relation, apply

    h = Harness()
    h.say("我不吃香菜", "生产环境部署端口是8443")
    older = by_content(h, "我不吃香菜")
    # A restatement whose vector is all but identical (cosine >= 0.98), though its words differ.
    newer = replace(
        by_content(h, "生产环境部署端口是8443"),
        content="香菜我是不吃的",
        type=older.type,
        embedding=[x * 1.001 for x in older.embedding],
        valid_from=older.valid_from + timedelta(days=1),
    )
    verdict = judge_by_rules(older, newer)
    assert verdict.relation is Relation.DUPLICATE and "near-duplicate" in verdict.reason
    out = apply(older, newer, verdict, NOW)
    kept, retired = out.changed[older.id], out.changed[newer.id]
    assert kept.status is MemoryStatus.ACTIVE and kept.access_count == 1 and len(kept.sources) == 2
    assert retired.status is MemoryStatus.SUPERSEDED and retired.superseded_by == older.id


def _source(event_id, at, session_id, seq):
    return {"event_id": event_id, "at": at.isoformat(), "session_id": session_id, "seq": seq}


def test_a_near_duplicate_merge_keeps_the_sources_in_conversation_order():
    """Sources are kept in the order they were said (time, session, then seq as a number), whatever
    order the two memories held them in: here the older memory's one source comes last, the newer's
    two are a turn said earlier in another session and one at the same time with a smaller seq."""
    from dataclasses import replace

    from shared.ingest.conflicts import Relation, Verdict, apply

    h = Harness()
    h.say("我不吃香菜", "生产环境部署端口是8443")
    t1, t2 = NOW - timedelta(days=2), NOW - timedelta(days=1)
    older = replace(by_content(h, "我不吃香菜"), sources=[_source("e-late", t2, "s1", 10)])
    newer = replace(
        by_content(h, "生产环境部署端口是8443"),
        sources=[_source("e-nine", t2, "s1", 9), _source("e-early", t1, "s2", 3)],
    )
    out = apply(older, newer, Verdict(Relation.DUPLICATE, "near-duplicate (cosine 0.990)"), NOW)
    kept = out.changed[older.id]
    assert [s["event_id"] for s in kept.sources] == ["e-early", "e-nine", "e-late"]
    # Applying it again (a redelivered resolve) adds nothing and keeps the order.
    again = apply(kept, newer, Verdict(Relation.DUPLICATE, "near-duplicate (cosine 0.990)"), NOW)
    assert [s["event_id"] for s in again.changed[older.id].sources] == ["e-early", "e-nine", "e-late"]


def test_an_exact_repeat_at_persist_keeps_the_sources_in_conversation_order():
    """The same rule where persist reinforces a repeat (``shared/ingest/persist.py``): a repeat said
    earlier than the memory it repeats (delivered late) goes first."""
    from dataclasses import replace

    from shared.ingest.persist import reinforce

    h = Harness()
    h.say("我不吃香菜")
    t1, t2 = NOW - timedelta(days=2), NOW - timedelta(days=1)
    memory = replace(by_content(h, "我不吃香菜"), sources=[_source("e-late", t2, "s1", 10)])
    assert reinforce(memory, [_source("e-nine", t2, "s1", 9), _source("e-early", t1, "s2", 3)], NOW)
    assert [s["event_id"] for s in memory.sources] == ["e-early", "e-nine", "e-late"]


def test_english_seed_cases():
    cases = {
        ("I prefer americano", "Now I drink lattes instead"): ["active", "active"],
        ("I don't use Java", "I've been working on a Java project lately"): ["superseded", "active"],
        ("I live in Berlin", "I moved to Paris last month"): ["superseded", "active"],
        (
            "Remind me to call the dentist tomorrow at 3pm",
            "The dentist call was moved to Friday, remind me then",
        ): [
            "superseded",
            "active",
        ],
    }
    for (first, second), expected in cases.items():
        h = Harness()
        h.say(first, second)
        rows = sorted(h.state.memories.values(), key=lambda m: m.valid_from)
        assert [m.content for m in rows] == [first, second]
        assert [m.status.value for m in rows] == expected, (first, second)
    h = Harness()
    h.say("I prefer americano", "Now I drink lattes instead")
    older, newer = sorted(h.state.memories.values(), key=lambda m: m.valid_from)
    assert older.importance == newer.importance / 2 or older.importance < newer.importance
    assert ("importance_halved", newer.id) in history(h, older.id)


class SameVectorFor:
    """A fake embedder giving one vector to every text that mentions ``word`` (near-duplicates)."""

    model_name = "fake-same-vector"
    dim = 4

    def __init__(self, word):
        self.word = word

    def embed_passages(self, texts):
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text):
        return [1.0, 0.0, 0.0, 0.0] if self.word in text else [0.0, 1.0, 0.0, 0.0]


def test_near_duplicate_at_persist_creates_no_memory():
    h = Harness()
    h.embedder = SameVectorFor("香菜")
    h.say("我不吃香菜", "我从来不吃香菜")
    [memory] = h.state.memories.values()
    assert memory.content == "我不吃香菜" and memory.access_count == 1
    assert [s["event_id"] for s in memory.sources] == ["e-u1-s1-1", "e-u1-s1-2"]
    assert ("reinforced", None) in history(h, memory.id)


def test_strategies_are_configurable_per_type():
    import pytest
    from pydantic import ValidationError

    from shared.ingest.conflicts import Strategy
    from shared.settings import Settings
    from workers.bootstrap import build_container

    settings = Settings(conflict_strategies={"preference": "supersede"})
    c = build_container(settings, uow=Harness().store.uow)
    assert c.strategies[MemoryType.PREFERENCE] is Strategy.SUPERSEDE
    assert c.strategies[MemoryType.TASK] is Strategy.INVALIDATE_OLDER
    h = Harness()
    h.drain(turn(1, "我喜欢喝美式"))
    h.drain({**turn(2, "我现在改喝拿铁了"), "event_id": "latte"})
    older, newer = by_content(h, "我喜欢喝美式"), by_content(h, "我现在改喝拿铁了")
    # Re-judge the pair with preferences set to supersede: the older one stops being valid.
    from shared.ingest.conflicts import apply

    older.importance, older.status_reason = 6.5, None
    out = apply(older, newer, judge_by_rules(older, newer), NOW, c.strategies)
    assert out.changed[older.id].status is MemoryStatus.SUPERSEDED
    with pytest.raises(ValidationError, match="'forever' for preference is not one of"):
        Settings(conflict_strategies={"preference": "forever"})
    with pytest.raises(ValidationError, match="'mood' is not a memory type"):
        Settings(conflict_strategies={"mood": "supersede"})
