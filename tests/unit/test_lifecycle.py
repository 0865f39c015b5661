"""The memory lifecycle on in-memory fakes: reinforcement on use, TTL, archive and restore, score
pushes, reconciliation, and a whole maintenance run a year later. The fakes are injected through
the same functions the workers call (no patching)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from service.operations.library_backend import LibraryBackend
from service.operations.recall import recall_for
from shared.indexing.collections import MEMORIES
from shared.indexing.reconcile import reconcile_indexes
from shared.indexing.sync import push_unindexed
from shared.language.cues import cues_for_memory, entities, lexicon_tags
from shared.lifecycle import sweeps as lifecycle
from shared.lifecycle.maintenance import recompute_scores
from shared.lifecycle.sweeps import LifecyclePolicy, RestoreRefused
from shared.models import Memory, MemoryStatus, MemoryType
from shared.ports import IndexPoint
from shared.queues import TaskName
from shared.scoring import DEFAULT_GAMMA, DecayPolicy, score
from shared.settings import Settings
from tests.support.fake_index import FakeVectorIndex
from tests.support.fakes import FakeStore
from tests.support.losing_index import LosingIndex
from tests.support.pipeline import NOW, Harness, turn
from workers.bootstrap import build_container
from workers.endpoints.embedders.hashing import HashingEmbedder

YEAR_LATER = NOW + timedelta(days=365)
POLICY = LifecyclePolicy()


class World:
    """A fake store and index with memories written directly (no extraction), indexed like the
    pipeline indexes them."""

    def __init__(self) -> None:
        self.store = FakeStore()
        self.index = FakeVectorIndex()
        self.embedder = HashingEmbedder(dim=16)
        self.n = 0

    def add(
        self,
        content: str,
        memory_type: MemoryType = MemoryType.FACT,
        importance: float = 6.0,
        at: datetime = NOW,
        access_count: int = 0,
        due_at: datetime | None = None,
        user: str = "u1",
    ) -> Memory:
        self.n += 1
        tags, found = lexicon_tags(content), entities(content)
        memory = Memory(
            id=f"00000000-0000-4000-8000-{self.n:012d}",
            tenant_id="default",
            user_id=user,
            type=memory_type,
            content=content,
            importance=importance,
            status=MemoryStatus.ACTIVE,
            created_at=at,
            updated_at=at,
            last_accessed_at=at,
            access_count=access_count,
            score=score(importance, memory_type, at, access_count, at),
            tags=list(tags),
            entities=list(found),
            cues=list(cues_for_memory(content, tags, found)),
            sources=[{"event_id": f"e{self.n}", "session_id": "s1", "seq": self.n, "at": at.isoformat()}],
            content_hash=f"h{self.n}",
            embedding=self.embedder.embed_passages([content])[0],
            embedding_model=self.embedder.model_name,
            due_at=due_at,
        )
        with self.store.uow() as uow:
            uow.memories.add(memory)
            push_unindexed(uow, MEMORIES, self.index, self.embedder, "default", user)
            uow.commit()
        return memory

    def get(self, memory: Memory) -> Memory:
        return self.store.state.memories[memory.id]

    def sync(self, touched: list[tuple[str, str]]) -> None:
        for tenant_id, user_id in touched:
            with self.store.uow() as uow:
                push_unindexed(uow, MEMORIES, self.index, self.embedder, tenant_id, user_id)
                uow.commit()

    def reconcile(self) -> dict[str, int]:
        return reconcile_indexes(self.store.uow, {MEMORIES: self.index}, self.embedder)

    def agree(self, user: str = "u1") -> None:
        """Postgres and the index agree exactly: same ids, same version, status and score."""
        rows = {m.id: m for m in self.store.state.memories.values() if m.user_id == user}
        points = self.index.payloads("default", user)
        assert set(points) == set(rows)
        for memory_id, payload in points.items():
            m = rows[memory_id]
            assert (payload["version"], payload["status"]) == (m.version, m.status.value), memory_id
            assert payload["score"] == pytest.approx(m.score, abs=POLICY.score_tolerance), memory_id


def container_for(store, index, embedder, sent, clock_at=NOW, **settings):
    # No conversation-turn index here: these tests are about memories only.
    return build_container(
        Settings(**{"index_turns": False, **settings}),
        uow=store.uow,
        embedder=embedder,
        index=index,
        dispatch=sent.extend,
        clock=lambda: clock_at,
    )


# --- the score and its settings ---------------------------------------------------------------


# γ per day of each memory type, as documented in docs/ARCHITECTURE.md ("Memory value is
# information × time"): literals, not the module's table, so a wrong default fails here.
DOCUMENTED_GAMMA = {
    MemoryType.EPISODIC: 0.90,
    MemoryType.TASK: 0.93,
    MemoryType.PREFERENCE: 0.97,
    MemoryType.FACT: 0.98,
    MemoryType.SEMANTIC: 0.99,
    MemoryType.PROFILE: 0.999,
}


def test_gamma_defaults_per_type_and_overrides_from_settings():
    assert DEFAULT_GAMMA == DOCUMENTED_GAMMA
    assert set(DOCUMENTED_GAMMA) == set(MemoryType)  # every type has a documented γ
    policy = lifecycle.policy_from(
        Settings(decay_gamma={"episodic": 0.95}, decay_base=2.0, archive_after_days=10, task_ttl_days=3)
    )
    assert policy.decay.gamma[MemoryType.EPISODIC] == 0.95
    assert policy.decay.gamma[MemoryType.FACT] == 0.98  # the documented default, not overridden
    assert policy.decay.base == 2.0
    assert policy.archive_after == timedelta(days=10) and policy.task_ttl == timedelta(days=3)
    with pytest.raises(ValidationError, match="not a memory type"):
        Settings(decay_gamma={"chitchat": 0.9})
    with pytest.raises(ValidationError, match=r"not in \(0, 1\]"):
        Settings(decay_gamma={"fact": 1.2})


def test_decay_env_variables_reach_the_policy(monkeypatch):
    monkeypatch.setenv("CUEMEM_DECAY_GAMMA", '{"preference": 0.96}')
    monkeypatch.setenv("CUEMEM_ARCHIVE_THRESHOLD", "0.5")
    policy = lifecycle.policy_from(Settings())
    assert policy.decay.gamma[MemoryType.PREFERENCE] == 0.96 and policy.archive_threshold == 0.5


def test_an_old_important_memory_loses_to_a_recent_one_only_when_the_numbers_say_so():
    w = World()
    old = w.add("deploy port is 8443", MemoryType.FACT, 9.0, at=NOW - timedelta(days=30))
    minor = w.add("staging port is 9000", MemoryType.FACT, 5.5, at=NOW - timedelta(days=1))
    weak = w.add("test port is 7000", MemoryType.FACT, 4.5, at=NOW - timedelta(days=1))
    recompute_scores(w.store.uow, NOW, POLICY.decay)
    scores = {m.id: w.get(m).score for m in (old, minor, weak)}
    # 9·0.98^30 = 4.92 ; 5.5·0.98 = 5.39 ; 4.5·0.98 = 4.41
    assert scores[minor.id] > scores[old.id] > scores[weak.id]
    assert scores[old.id] == pytest.approx(9 * 0.98**30)


# --- reinforcement on use ---------------------------------------------------------------------


def test_reinforcement_raises_the_score_and_counts_a_recall_once():
    w = World()
    m = w.add("I prefer green tea", MemoryType.PREFERENCE, 6.0, at=NOW - timedelta(days=40))
    later = NOW + timedelta(days=1)
    recompute_scores(w.store.uow, later, POLICY.decay)
    decayed = w.get(m).score
    for _ in range(2):  # the same message delivered twice
        with w.store.uow() as uow:
            lifecycle.reinforce_recalled(uow, "recall-1", "default", "u1", [m.id], later, POLICY.decay)
            uow.commit()
    used = w.get(m)
    assert used.access_count == 1 and used.last_accessed_at == later
    assert used.score == pytest.approx(6.0 + POLICY.decay.base * 0.6931471805599453)  # S·γ^0 + B·ln 2
    assert used.score > decayed
    with w.store.uow() as uow:  # another recall counts again
        lifecycle.reinforce_recalled(uow, "recall-2", "default", "u1", [m.id], later, POLICY.decay)
        uow.commit()
    assert w.get(m).access_count == 2
    # Another user's recall cannot touch this memory.
    with w.store.uow() as uow:
        assert (
            lifecycle.reinforce_recalled(uow, "recall-3", "default", "u2", [m.id], later, POLICY.decay) == 0
        )


def test_recall_enqueues_the_reinforcement_when_asked_and_does_not_wait_for_it():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    sent: list = []
    later = NOW + timedelta(days=3)
    c = container_for(h.store, h.index, h.embedder, sent, clock_at=later)
    out = recall_for(c, "u1", "我不吃什么", k=3, reinforce=True)
    [memory] = [m for m in h.state.memories.values() if m.content == "我不吃香菜"]
    assert out["items"] and out["items"][0]["id"] == memory.id
    [task] = sent
    assert task.task == TaskName.REINFORCE.value
    recall_id, tenant_id, user_id, ids, now = task.args
    assert (recall_id, tenant_id, user_id, ids, now) == (
        out["trace"]["recall_id"], "default", "u1", [memory.id], later.isoformat()
    )  # fmt: skip
    assert h.state.memories[memory.id].access_count == 0  # nothing written by recall itself
    # The task, as the worker runs it (twice: a redelivery counts once).
    for _ in range(2):
        with h.store.uow() as uow:
            lifecycle.reinforce_recalled(uow, *task.args[:4], datetime.fromisoformat(now), POLICY.decay)
            uow.commit()
    assert h.state.memories[memory.id].access_count == 1
    assert h.state.memories[memory.id].last_accessed_at == later


def test_recall_answers_when_the_reinforcement_cannot_be_sent():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))

    def broken(_followups):
        raise ConnectionError("broker down")

    c = build_container(
        Settings(index_turns=False), uow=h.store.uow, embedder=h.embedder, index=h.index, dispatch=broken
    )
    out = recall_for(c, "u1", "我不吃什么", k=3, now=NOW, reinforce=True)
    assert out["items"] and out["trace"]["recall_id"] is None


def test_recall_and_the_library_backend_are_read_only_unless_asked():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    sent: list = []
    c = container_for(h.store, h.index, h.embedder, sent)
    out = recall_for(c, "u1", "我不吃什么", k=3)
    assert out["items"] and "recall_id" not in out["trace"] and sent == []
    assert recall_for(c, "u1", "我不吃什么", k=3, budget_tokens=50)["items"] and sent == []
    # The agent tools' and `cuemem mcp`'s in-process backend: the same default, the same switch.
    assert LibraryBackend(c, _NoPublisher()).search("u1", "我不吃什么", 3, None)["items"] and sent == []
    assert LibraryBackend(c, _NoPublisher(), reinforce=True).search("u1", "我不吃什么", 3, None)["items"]
    [task] = sent
    assert task.task == TaskName.REINFORCE.value and task.args[1:3] == ("default", "u1")
    assert recall_for(c, "u1", "我不吃什么", k=3, reinforce=True)["items"] and len(sent) == 2


class _NoPublisher:
    def publish(self, **_: object) -> object:
        raise AssertionError("a search published a turn")


# --- TTL --------------------------------------------------------------------------------------


def test_tasks_expire_after_their_due_time_or_the_ttl_and_leave_recall():
    w = World()
    due_passed = w.add(
        "提交报告", MemoryType.TASK, 7, at=NOW - timedelta(days=2), due_at=NOW - timedelta(hours=1)
    )
    due_later = w.add(
        "续签合同", MemoryType.TASK, 7, at=NOW - timedelta(days=10), due_at=NOW + timedelta(days=20)
    )
    undated_old = w.add("买牛奶", MemoryType.TASK, 6, at=NOW - timedelta(days=8))
    undated_new = w.add("取快递", MemoryType.TASK, 6, at=NOW - timedelta(days=2))
    old_fact = w.add("生产环境部署端口是8443", MemoryType.FACT, 7, at=NOW - timedelta(days=30))

    stats, touched = lifecycle.expire_tasks(w.store.uow, NOW, POLICY)
    assert stats["expired"] == 2 and touched == [("default", "u1")]
    status = {m.content: w.get(m).status for m in (due_passed, due_later, undated_old, undated_new, old_fact)}
    assert status == {
        "提交报告": MemoryStatus.EXPIRED,
        "续签合同": MemoryStatus.ACTIVE,
        "买牛奶": MemoryStatus.EXPIRED,
        "取快递": MemoryStatus.ACTIVE,
        "生产环境部署端口是8443": MemoryStatus.ACTIVE,
    }
    assert w.get(due_passed).status_reason == lifecycle.TASK_DUE_REASON
    assert w.get(undated_old).status_reason == lifecycle.TASK_AGE_REASON
    assert [e.action for e in w.store.state.history if e.memory_id == due_passed.id] == ["expired"]
    # Idempotent: the same time again moves nothing and writes no second history entry.
    assert lifecycle.expire_tasks(w.store.uow, NOW, POLICY)[0]["expired"] == 0
    assert len([e for e in w.store.state.history if e.action == "expired"]) == 2
    # The index learns the status, and recall leaves expired tasks out.
    w.sync(touched)
    w.agree()
    sent: list = []
    c = container_for(w.store, w.index, w.embedder, sent)
    contents = [i["content"] for i in recall_for(c, "u1", "提交报告 买牛奶 续签合同", k=10)["items"]]
    assert "续签合同" in contents and "提交报告" not in contents and "买牛奶" not in contents


# --- archive and restore ----------------------------------------------------------------------


def test_archive_needs_the_score_under_the_threshold_for_the_whole_window():
    w = World()
    # 6·0.98^t < 1 from t = 88.7 days on: archived once that lasted 30 days (day 118.7).
    fact = w.add("my locker is number 17", MemoryType.FACT, 6.0)
    used = w.add("I prefer green tea", MemoryType.PREFERENCE, 6.0, access_count=5)  # B·ln 6 > 1
    profile = w.add("I live in Berlin", MemoryType.PROFILE, 6.0)
    assert lifecycle.archive_stale(w.store.uow, NOW + timedelta(days=110), POLICY)[0]["archived"] == 0
    stats, touched = lifecycle.archive_stale(w.store.uow, NOW + timedelta(days=120), POLICY)
    assert stats["archived"] == 1 and touched == [("default", "u1")]
    assert w.get(fact).status is MemoryStatus.ARCHIVED
    assert w.get(used).status is MemoryStatus.ACTIVE and w.get(profile).status is MemoryStatus.ACTIVE
    [entry] = [e for e in w.store.state.history if e.memory_id == fact.id]
    assert entry.action == "archived" and "under 1" in entry.reason
    assert lifecycle.archive_stale(w.store.uow, NOW + timedelta(days=120), POLICY)[0]["archived"] == 0


def test_archive_and_restore_round_trip():
    h = Harness()
    h.drain(turn(1, "我不吃香菜"))
    [memory] = [m for m in h.state.memories.values() if m.content == "我不吃香菜"]
    later = NOW + timedelta(days=400)
    stats, touched = lifecycle.archive_stale(h.store.uow, later, POLICY)
    assert stats["archived"] == 1
    for tenant_id, user_id in touched:
        with h.store.uow() as uow:
            push_unindexed(uow, MEMORIES, h.index, h.embedder, tenant_id, user_id)
            uow.commit()
    archived = h.state.memories[memory.id]
    assert archived.status is MemoryStatus.ARCHIVED  # still in Postgres, with its content
    assert h.index.payloads("default", "u1")[memory.id]["status"] == "archived"
    sent: list = []
    c = container_for(h.store, h.index, h.embedder, sent, clock_at=later)
    assert memory.id not in [i["id"] for i in recall_for(c, "u1", "我不吃什么", k=5)["items"]]
    found = recall_for(c, "u1", "我不吃什么", k=5, include_archived=True)["items"]
    assert found[0]["id"] == memory.id and found[0]["status"] == "archived"

    with h.store.uow() as uow:
        with pytest.raises(RestoreRefused, match="no memory 'nope' for user 'u1'"):
            lifecycle.restore_memory(uow, "default", "u1", "nope", later, POLICY.decay)
        with pytest.raises(RestoreRefused, match="for user 'u2'"):  # another user's id finds nothing
            lifecycle.restore_memory(uow, "default", "u2", memory.id, later, POLICY.decay)
        restored = lifecycle.restore_memory(uow, "default", "u1", memory.id, later, POLICY.decay)
        push_unindexed(uow, MEMORIES, h.index, h.embedder, "default", "u1")
        uow.commit()
    assert restored.status is MemoryStatus.ACTIVE and restored.last_accessed_at == later
    assert h.index.payloads("default", "u1")[memory.id]["status"] == "active"
    actions = [e.action for e in h.state.history if e.memory_id == memory.id]
    assert actions[-2:] == ["archived", "restored"]
    assert recall_for(c, "u1", "我不吃什么", k=5)["items"][0]["id"] == memory.id
    with h.store.uow() as uow, pytest.raises(RestoreRefused, match="is active, not archived"):
        lifecycle.restore_memory(uow, "default", "u1", memory.id, later, POLICY.decay)
    # A restore counts as a use: the next sweep does not take it straight back.
    assert lifecycle.archive_stale(h.store.uow, later + timedelta(days=1), POLICY)[0]["archived"] == 0


# --- the index: score pushes and drift repair -------------------------------------------------


def test_score_push_updates_only_payloads_that_drifted():
    w = World()
    memories = [w.add(f"fact number {i}", MemoryType.FACT, 5 + i, at=NOW) for i in range(4)]
    w.agree()
    assert lifecycle.push_scores(w.store.uow, w.index, POLICY.score_tolerance)["pushed"] == 0
    recompute_scores(w.store.uow, NOW + timedelta(days=3), POLICY.decay)
    stats = lifecycle.push_scores(w.store.uow, w.index, POLICY.score_tolerance, batch_size=3)
    assert stats == {"pushed": 4, "batches": 2}
    w.agree()
    assert lifecycle.push_scores(w.store.uow, w.index, POLICY.score_tolerance)["pushed"] == 0
    # An hour later the change is under the tolerance for the low scores: nothing to push for them.
    recompute_scores(w.store.uow, NOW + timedelta(days=3, minutes=1), POLICY.decay)
    assert lifecycle.push_scores(w.store.uow, w.index, POLICY.score_tolerance)["pushed"] == 0
    assert len(memories) == 4


def test_drift_repair_after_points_are_deleted_by_hand():
    w = World()
    kept, lost, changed, rescored = (w.add(f"memory {i} about port {8000 + i}") for i in range(4))
    other = w.add("bob's memory", user="u2")
    w.agree()
    assert w.reconcile() == {"users": 2, "points": 5, **dict.fromkeys(MEMORIES.report_keys, 0)}
    # Drift: a point deleted by hand, a stray point, a stale payload, a drifted score.
    w.index.delete("default", "u1", [lost.id])
    stray = "00000000-0000-4000-8000-999999999999"
    w.index.upsert([IndexPoint(stray, "default", "u1", [1.0] * 16, {"status": "active", "version": 1})])
    w.index.set_payload("default", "u1", {changed.id: {"status": "superseded", "version": 7}})
    w.index.set_payload("default", "u1", {rescored.id: {"score": 0.123}})
    stats = w.reconcile()
    assert {k: stats[k] for k in ("missing", "extra", "stale", "rescored")} == {
        "missing": 1, "extra": 1, "stale": 1, "rescored": 1
    }  # fmt: skip
    w.agree()
    w.agree("u2")
    assert w.index.ids("default", "u1") == {kept.id, lost.id, changed.id, rescored.id}
    # Run twice, same result: nothing left to repair.
    again = w.reconcile()
    assert all(again[k] == 0 for k in MEMORIES.report_keys) and again["points"] == 5
    assert other.id in w.index.ids("default", "u2")


def test_a_right_point_whose_row_says_not_indexed_is_bookkept():
    """The point is right (status and version) but the row says it was never indexed (a crash
    between the upsert and ``mark_indexed``): the row is marked, the point left as it is."""
    w = World()
    m = w.add("a fact about port 9443")
    w.agree()
    with w.store.uow() as uow:
        row = uow.memories.get("default", "u1", m.id)
        assert row is not None and row.indexed_version == row.version
        row.indexed_version = 0
        uow.memories.save(row)
        uow.commit()
    before = w.index.payloads("default", "u1")
    stats = w.reconcile()
    assert {k: stats[k] for k in ("bookkept", "missing", "stale", "extra")} == {
        "bookkept": 1, "missing": 0, "stale": 0, "extra": 0
    }  # fmt: skip
    with w.store.uow() as uow:
        row = uow.memories.get("default", "u1", m.id)
        assert row is not None and row.indexed_version == row.version
    assert w.index.payloads("default", "u1") == before
    assert w.reconcile()["bookkept"] == 0


def test_vectors_of_another_model_are_left_alone_not_counted_as_extra():
    w = World()
    m = w.add("a fact about port 9443")
    with w.store.uow() as uow:  # the row moved on (e.g. a crash before mark_indexed)
        row = uow.memories.get("default", "u1", m.id)
        assert row is not None
        row.version += 1
        row.embedding_model = "another-model"
        uow.memories.save(row)
        uow.commit()
    stats = w.reconcile()
    assert stats["foreign"] == 1 and stats["extra"] == 0  # reindex's job, not a stray point
    assert m.id in w.index.ids("default", "u1")


# --- one whole run, a year later --------------------------------------------------------------


def test_maintain_a_year_later_archives_expires_keeps_used_preferences_and_agrees():
    w = World()
    chit = w.add("今天天气不错，散了个步", MemoryType.EPISODIC, 5.0)
    task = w.add("明天下午三点开会", MemoryType.TASK, 7.0, due_at=NOW + timedelta(days=1))
    pref = w.add("我不吃香菜", MemoryType.PREFERENCE, 6.5)
    idle_pref = w.add("我喜欢听爵士乐", MemoryType.PREFERENCE, 6.5)
    profile = w.add("我住在柏林", MemoryType.PROFILE, 8.0)
    # The preference is used every week of the year (recall reinforcements).
    for week in range(1, 53):
        with w.store.uow() as uow:
            at = NOW + timedelta(weeks=week)
            lifecycle.reinforce_recalled(uow, f"r{week}", "default", "u1", [pref.id], at, POLICY.decay)
            uow.commit()

    store, touched = lifecycle.maintain_store(w.store.uow, w.embedder, YEAR_LATER, POLICY)
    index = lifecycle.maintain_index(w.store.uow, {MEMORIES: w.index}, w.embedder, touched, POLICY)
    assert store["ttl"]["expired"] == 1 and store["archive"]["archived"] == 2
    status = {m.id: w.get(m).status for m in (chit, task, pref, idle_pref, profile)}
    assert status == {
        chit.id: MemoryStatus.ARCHIVED,
        task.id: MemoryStatus.EXPIRED,
        pref.id: MemoryStatus.ACTIVE,
        idle_pref.id: MemoryStatus.ARCHIVED,
        profile.id: MemoryStatus.ACTIVE,
    }
    # The used preference outranks everything else still active.
    active = sorted(
        (m for m in w.store.state.memories.values() if m.status is MemoryStatus.ACTIVE),
        key=lambda m: -m.score,
    )
    assert active[0].id == pref.id
    w.agree()
    assert index["reconcile"]["missing"] == index["reconcile"]["stale"] == 0
    # Recall no longer offers the expired task.
    c = container_for(w.store, w.index, w.embedder, [], clock_at=YEAR_LATER)
    assert task.id not in [i["id"] for i in recall_for(c, "u1", "明天下午三点开会", k=5)["items"]]
    # The control: the same query finds it among the history, so the recall above could find it.
    history = recall_for(c, "u1", "明天下午三点开会", k=5, include_history=True)["items"]
    assert task.id in [i["id"] for i in history]

    # Every sweep, run again at the same time, changes nothing.
    history_before = len(w.store.state.history)
    store2, touched2 = lifecycle.maintain_store(w.store.uow, w.embedder, YEAR_LATER, POLICY)
    index2 = lifecycle.maintain_index(w.store.uow, {MEMORIES: w.index}, w.embedder, touched2, POLICY)
    assert store2["decay"]["changed"] == 0 and store2["ttl"]["expired"] == 0
    assert store2["archive"]["archived"] == 0 and touched2 == []
    assert index2["indexed"] == 0 and index2["scores"]["pushed"] == 0
    assert all(index2["reconcile"][k] == 0 for k in MEMORIES.report_keys)
    assert len(w.store.state.history) == history_before
    w.agree()


def test_policy_rejects_bad_values():
    with pytest.raises(ValueError, match="task_ttl"):
        LifecyclePolicy(task_ttl=timedelta(0))
    with pytest.raises(ValueError, match="archive_threshold"):
        LifecyclePolicy(archive_threshold=-1)
    assert DecayPolicy.configured({"task": 0.95}).gamma[MemoryType.TASK] == 0.95


def test_reconciliation_restores_a_lost_index_then_clears_its_note():
    w = World()
    w.index = LosingIndex()
    memories = [w.add(f"memory {i} about port {8000 + i}") for i in range(3)]
    w.add("bob's memory", user="u2")
    w.index.lose_everything("the files vanished")
    stats = w.reconcile()
    assert stats["missing"] == 4
    w.agree()
    w.agree("u2")
    assert w.index.note is None and w.index.cleared == ["the files vanished"]
    assert w.index.ids("default", "u1") == {m.id for m in memories}
    assert w.reconcile()["missing"] == 0 and w.index.cleared == ["the files vanished"]


def test_a_loss_noted_while_reconciliation_ran_is_not_cleared_by_it():
    w = World()
    w.index = LosingIndex()
    w.add("a fact about port 9443")
    w.add("bob's memory", user="u2")
    w.index.lose_everything("the first loss")
    w.index.lose_again_on = "u2"
    w.reconcile()
    assert w.index.note == "a second loss, during the reconciliation" and w.index.cleared == []
    w.index.lose_again_on = None
    w.reconcile()  # the next one, from start to end after the second note, clears it
    assert w.index.note is None and w.index.cleared == ["a second loss, during the reconciliation"]


def test_an_index_without_loss_notes_is_reconciled_as_before():
    w = World()  # FakeVectorIndex has neither lost() nor mark_rebuilt(): nothing to clear
    w.add("a fact about port 9443")
    w.index.delete("default", "u1", list(w.index.ids("default", "u1")))
    assert w.reconcile()["missing"] == 1


def test_a_lost_index_with_nothing_to_restore_is_whole_after_reconciliation():
    w = World()  # no memory at all: the reconciliation writes nothing
    w.index = LosingIndex()
    w.index.note = "the files vanished"
    w.reconcile()
    assert w.index.note is None and w.index.cleared == ["the files vanished"]
