"""The Celery task bodies themselves, run in this process on injected fakes, with no broker.

Every message goes through a JSON round trip first, as it would through the broker (how Zulip
tests its queue workers), so a body that only works with Python objects (a tuple, a datetime)
fails here. The fakes are handed in the composition root's way: ``build_container`` with fakes,
installed as the process's container; no import is patched. The tasks run by their registered
names, the way a worker finds them."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

import workers.tasks.index  # noqa: F401  (these register the tasks, as the worker's include does)
import workers.tasks.ingest  # noqa: F401
import workers.tasks.lifecycle  # noqa: F401
from shared.events import EventLimits, record_message, validate_turn
from shared.language.sparse import sparse_document, sparse_query
from shared.llm import ExtractionAnswer, ImportanceAnswer
from shared.models import MemoryStatus, turn_point_id
from shared.ports import IndexPoint
from shared.queues import ROUTES, IndexKind, SearchMode, TaskName
from shared.settings import Settings
from shared.storage import FollowUp
from tests.support.fake_index import FakeVectorIndex
from tests.support.fakes import FakeStore
from workers.bootstrap import build_container, install_container, reset_container
from workers.celery_app import app
from workers.endpoints.embedders import EmbeddingError
from workers.endpoints.embedders.hashing import HashingEmbedder
from workers.failures import PermanentFailure
from workers.index.remote import RemoteSearchIndex

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def over_the_wire(args: Sequence[Any]) -> list[Any]:
    return json.loads(json.dumps(list(args)))


class Worker:
    """One worker process's view: the real tasks, a container of fakes, follow-ups kept in order."""

    def __init__(
        self, *, index_turns: bool = True, embedder: Any = None, llm: Any = None, units: int = 1
    ) -> None:
        self.store = FakeStore()
        self.embedder = embedder or CountingEmbedder()
        self.index = FakeVectorIndex()
        self.turns = FakeVectorIndex() if index_turns else None
        self.sent: list[FollowUp] = []
        # One unit at a time unless asked: these tests assert the order of the model calls.
        settings = Settings(index_turns=index_turns, broker_url=None, redis_url=None, ingest_units=units)
        install_container(
            build_container(
                settings,
                uow=self.store.uow,
                embedder=self.embedder,
                index=self.index,
                turn_index=self.turns,
                dispatch=self.sent.extend,
                clock=lambda: NOW,
                llm=llm,
                reranker=None,
            )
        )

    def run(self, task: str, args: Sequence[Any]) -> Any:
        return app.tasks[task](*over_the_wire(args))

    def stages(self) -> dict[tuple[str, str], str]:
        """Each recorded turn's stage, by (tenant, event id)."""
        events = self.store.state.events.values()
        return {(e["event"].tenant_id, e["event"].event_id): e["stage"] for e in events}

    def drain(self) -> list[str]:
        """Run every follow-up, and theirs, like the queues would; the task names, in order."""
        ran = []
        while self.sent:
            followup = self.sent.pop(0)
            ran.append(followup.task)
            self.run(followup.task, followup.args)
        return ran


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting its calls; a text holding "BOOM" is refused for good (as an
    endpoint refusing an input would be)."""

    def __init__(self) -> None:
        super().__init__(dim=16)
        self.calls: list[int] = []
        self.threads: list[str] = []

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if any("BOOM" in t for t in texts):
            raise EmbeddingError("the endpoint refused the input", transient=False)
        self.calls.append(len(texts))
        self.threads.append(threading.current_thread().name)
        return super().embed_passages(texts)


@pytest.fixture
def worker() -> Iterator[Worker]:
    yield Worker()
    reset_container()


def published(seq: int, content: str, *, user: str = "u1", tenant: str = "default") -> dict[str, Any]:
    """The message a Publisher sends as ``memory.record``."""
    raw = {
        "tenant_id": tenant,
        "event_id": f"e-{user}-{seq}",
        "user_id": user,
        "session_id": "s1",
        "seq": seq,
        "role": "user",
        "content": content,
        "at": NOW.isoformat(),
    }
    return record_message(validate_turn(raw, EventLimits()), seq_assigned=False)


def test_a_memorable_turn_goes_from_record_to_the_index_through_the_real_tasks(worker: Worker) -> None:
    worker.run(TaskName.RECORD.value, [published(1, "生产环境部署端口是8443")])

    # Extract, embed, persist and (the rules judging) resolve ran inside memory.record, in one
    # unit of work; the index owner's is the only message, and it ends the event.
    assert worker.drain() == ["memory.index"]
    assert worker.store.state.events["e-u1-1"]["stage"] == "done"
    [memory] = worker.store.state.memories.values()
    assert "8443" in memory.content and memory.status is MemoryStatus.ACTIVE
    assert worker.index.ids("default", "u1") == {memory.id}
    assert worker.turns is not None
    assert worker.turns.ids("default", "u1") == {turn_point_id("default", "u1", "e-u1-1")}


def test_a_batch_is_recorded_embedded_in_one_call_and_indexed_in_one_message(worker: Worker) -> None:
    turns = [published(1, "我住在杭州"), published(2, "好的"), published(1, "我不吃香菜", user="u2")]

    worker.run(TaskName.RECORD_BATCH.value, [turns])

    # One model call for every draft and context window of the batch; one index message for all.
    # One call per user of the batch, with every draft and window of theirs: u1's two texts (a
    # turn alone in its window is its own draft's text, embedded once), then u2's one.
    assert worker.embedder.calls == [2, 1]
    [index] = worker.sent
    assert index.task == "memory.index" and sorted(index.args[0]) == [
        "default/e-u1-1",
        "default/e-u1-2",
        "default/e-u2-1",
    ]
    assert index.args[1] is True  # judged already: the index ends them
    assert worker.drain() == ["memory.index"]
    assert {e["stage"] for e in worker.store.state.events.values()} == {"done"}
    assert len(worker.index.ids("default", "u1")) == 1 and len(worker.index.ids("default", "u2")) == 1
    # The second turn's window holds the first, recorded by the same batch.
    assert worker.store.state.events["e-u1-2"]["window"] == ("e-u1-1",)


def test_a_batch_member_no_one_can_record_is_parked_alone(worker: Worker) -> None:
    worker.run(TaskName.RECORD.value, [published(1, "我住在杭州", user="u1")])
    worker.drain()
    foreign = {**published(1, "我住在上海", user="u9"), "event_id": "e-u1-1"}  # u1's id

    worker.run(TaskName.RECORD_BATCH.value, [[foreign, published(2, "我养了一只猫")]])

    [letter] = worker.store.state.dead_letters
    assert letter.task_name == "memory.record" and letter.event_id == "e-u1-1"
    assert "another user" in letter.reason
    worker.drain()
    assert worker.store.state.events["e-u1-2"]["stage"] == "done"
    assert "u9" not in {e["event"].user_id for e in worker.store.state.events.values()}


def test_a_turn_that_fails_the_fused_stages_goes_on_alone_and_holds_up_no_other(worker: Worker) -> None:
    batch = [published(1, "我住在杭州"), published(2, "我喜欢爬山"), published(3, "BOOM 我的车是红色的")]

    worker.run(TaskName.RECORD_BATCH.value, [batch])

    # The batch's one unit of work failed (the model refused one text): each event was sent on
    # to extract as its own message, stage by stage.
    # (Stage messages name the tenant with the event id: event ids are unique per tenant.)
    assert sorted(f.args[0] for f in worker.sent) == ["default/e-u1-1", "default/e-u1-2", "default/e-u1-3"]
    assert {f.task for f in worker.sent} == {"memory.extract"}
    refused = []
    while worker.sent:
        followup = worker.sent.pop(0)
        try:
            worker.run(followup.task, followup.args)
        except PermanentFailure:
            refused.append((followup.task, followup.args[0]))
    assert refused == [("memory.embed", "default/e-u1-3")]
    stages = {e["event"].event_id: e["stage"] for e in worker.store.state.events.values()}
    assert stages == {"e-u1-1": "done", "e-u1-2": "done", "e-u1-3": "extracted"}


def test_a_user_whose_unit_fails_costs_the_other_users_of_the_batch_nothing(worker: Worker) -> None:
    batch = [
        published(1, "我住在杭州"),
        published(1, "BOOM 我的车是红色的", user="u2"),
        published(2, "我喜欢爬山"),
    ]

    worker.run(TaskName.RECORD_BATCH.value, [batch])

    # u1's unit committed and goes to the index; u2's failed and goes on stage by stage.
    assert [(f.task, f.args[0]) for f in worker.sent] == [
        ("memory.extract", "default/e-u2-1"),
        ("memory.index", ["default/e-u1-1", "default/e-u1-2"]),
    ]
    assert worker.store.state.events["e-u1-2"]["stage"] == "persisted"
    assert worker.store.state.events["e-u2-1"]["stage"] == "recorded"


def test_a_batchs_users_run_two_units_at_a_time_and_each_lands_as_alone() -> None:
    """CUEMEM_INGEST_UNITS=2: the users' units run on the worker's unit threads; every user's
    turns reach the index in one message, a failing user's go on stage by stage, and the
    outcome is the one the units give one at a time (colliding ids: u1/u10, two tenants)."""
    worker = Worker(units=2)
    try:
        batch = [
            published(1, "我住在杭州"),
            published(1, "我住在上海", user="u10"),
            published(1, "BOOM 我的车是红色的", user="u1", tenant="acme"),
            published(1, "我不吃香菜", user="u10", tenant="acme"),
            published(2, "我喜欢爬山"),
        ]
        worker.run(TaskName.RECORD_BATCH.value, [batch])

        # One call per user whose unit went on (u1: two drafts and the window of both turns).
        assert sorted(worker.embedder.calls) == [1, 1, 3]
        assert all(name.startswith("unit") for name in worker.embedder.threads)
        assert [(f.task, f.args[0]) for f in worker.sent] == [
            ("memory.extract", "acme/e-u1-1"),
            ("memory.index", ["acme/e-u10-1", "default/e-u1-1", "default/e-u1-2", "default/e-u10-1"]),
        ]
        stages = worker.stages()
        assert stages == {
            ("default", "e-u1-1"): "persisted",
            ("default", "e-u1-2"): "persisted",
            ("default", "e-u10-1"): "persisted",
            ("acme", "e-u10-1"): "persisted",
            ("acme", "e-u1-1"): "recorded",
        }
        owners = {(m.tenant_id, m.user_id, m.content) for m in worker.store.state.memories.values()}
        assert owners == {
            ("default", "u1", "我住在杭州"),
            ("default", "u1", "我喜欢爬山"),
            ("default", "u10", "我住在上海"),
            ("acme", "u10", "我不吃香菜"),
        }
    finally:
        reset_container()


class FlakyEmbedder(CountingEmbedder):
    """A text holding "FLAKY" times out (a transient failure: the task is retried)."""

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if any("FLAKY" in t for t in texts):
            raise EmbeddingError("the endpoint timed out", transient=True)
        return super().embed_passages(texts)


@pytest.mark.parametrize("units", [1, 2])
def test_a_transient_failure_stops_new_units_and_is_retried_after_the_others_went_on(units: int) -> None:
    """A unit that fails transiently (an outage) raises the task for its retry once the units
    already running have ended and the index message of those that committed went out; no
    unit starts after it (the retry's record step hands their steps back)."""
    worker = Worker(units=units, embedder=FlakyEmbedder())
    try:
        batch = [
            published(1, "我不吃香菜", tenant="acme"),
            published(1, "FLAKY 我的车是红色的"),
            published(1, "我住在杭州", user="u10"),
        ]
        with pytest.raises(EmbeddingError, match="timed out"):
            worker.run(TaskName.RECORD_BATCH.value, [batch])

        stages = worker.stages()
        assert stages[("default", "e-u1-1")] == "recorded"
        went_on = sorted(f"{t}/{e}" for (t, e), stage in stages.items() if stage == "persisted")
        assert [(f.task, f.args[0]) for f in worker.sent] == [("memory.index", went_on)]
        assert "acme/e-u1-1" in went_on  # ran before (or beside) the failure
        if units == 1:
            # One at a time: u10's unit comes after the failure and is left for the retry.
            assert stages[("default", "e-u10-1")] == "recorded"
        # Nothing else was sent: the retry carries the rest on.
        assert all(stage in ("recorded", "persisted") for stage in stages.values())
    finally:
        reset_container()


class HaltingEmbedder(CountingEmbedder):
    """The first text holding "HALT" stops the process (a shutdown: a BaseException, not an
    Exception); after that (the worker restarted) it embeds as any other."""

    def __init__(self) -> None:
        super().__init__()
        self.halted = False

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.halted and any("HALT" in t for t in texts):
            self.halted = True
            raise SystemExit("shutting down")
        return super().embed_passages(texts)


@pytest.mark.parametrize("units", [1, 2])
def test_a_shutdown_during_a_batch_loses_no_turn(units: int) -> None:
    """A unit stopped by something that is not an Exception: the stop goes on after every other
    user's turns were sent on (in the index message when their unit committed, else stage by
    stage, or by a unit still running when it ends), and every turn of the batch ends done."""
    worker = Worker(units=units, embedder=HaltingEmbedder())
    try:
        batch = [
            published(1, "我不吃香菜", tenant="acme"),
            published(1, "HALT 我的车是红色的"),
            published(1, "我住在杭州", user="u10"),
        ]
        with pytest.raises(SystemExit):
            worker.run(TaskName.RECORD_BATCH.value, [batch])
        for thread in threading.enumerate():
            if thread.name.startswith("unit"):
                thread.join(timeout=30)

        assert ("memory.extract", "default/e-u1-1") in [(f.task, f.args[0]) for f in worker.sent]
        worker.drain()
        stages = worker.stages()
        assert stages == {
            ("acme", "e-u1-1"): "done",
            ("default", "e-u1-1"): "done",
            ("default", "e-u10-1"): "done",
        }
        for memory in worker.store.state.memories.values():
            assert memory.id in worker.index.ids(memory.tenant_id, memory.user_id)
        assert worker.turns is not None
        for tenant, user in (("acme", "u1"), ("default", "u1"), ("default", "u10")):
            assert len(worker.turns.ids(tenant, user)) == 1  # every turn is in the conversation log
    finally:
        reset_container()


class ScriptedLLM:
    """An LLM that scores every turn 8 and finds one preference in it; judges nothing (None)."""

    def ask(self, operation: Any, instructions: str, data: Any, schema: Any) -> Any:
        if schema is ImportanceAnswer:
            return schema.model_validate({"importance": 8})
        if schema is ExtractionAnswer:
            memory = {"type": "preference", "content": data["turn"][:40], "importance": 8, "tags": []}
            return schema.model_validate({"memories": [memory]})
        return None


def test_with_an_llm_judge_resolve_stays_its_own_stage_after_the_index() -> None:
    worker = Worker(llm=ScriptedLLM())
    try:
        worker.run(TaskName.RECORD.value, [published(1, "我不吃香菜")])
        [index] = worker.sent
        assert index.args[1] is False  # not judged yet: one slow judgement must hold up no batch
        assert worker.drain() == ["memory.index", "memory.resolve"]
        assert worker.store.state.events["e-u1-1"]["stage"] == "done"
    finally:
        reset_container()


def test_a_redelivered_record_changes_nothing_and_sends_nothing(worker: Worker) -> None:
    worker.run(TaskName.RECORD.value, [published(1, "我不吃香菜")])
    worker.drain()
    before = {k: vars(v).copy() for k, v in worker.store.state.memories.items()}

    worker.run(TaskName.RECORD.value, [published(1, "我不吃香菜")])

    assert worker.sent == []
    assert {k: vars(v).copy() for k, v in worker.store.state.memories.items()} == before


def test_a_sync_sent_as_a_follow_up_pushes_a_changed_status(worker: Worker) -> None:
    worker.run(TaskName.RECORD.value, [published(1, "我每天早上喝咖啡")])
    worker.drain()
    [memory] = worker.store.state.memories.values()
    memory.status, memory.version = MemoryStatus.ARCHIVED, memory.version + 1  # as an archive sweep does

    # What expire, archive and consolidate dispatch: a (tenant, user) pair, a list after JSON.
    worker.sent.append(FollowUp(TaskName.SYNC_INDEX.value, ("default", "u1")))
    worker.drain()

    assert worker.index.payloads("default", "u1")[memory.id]["status"] == "archived"


def test_delete_points_drops_turn_points_from_the_conversation_log_only(worker: Worker) -> None:
    worker.run(TaskName.RECORD.value, [published(1, "生产环境部署端口是8443")])
    worker.drain()
    assert worker.turns is not None
    point = turn_point_id("default", "u1", "e-u1-1")
    memories = worker.index.ids("default", "u1")

    worker.run(TaskName.DELETE_POINTS.value, ["default", "u1", [point], IndexKind.TURNS.value])

    assert worker.turns.ids("default", "u1") == set()
    assert worker.index.ids("default", "u1") == memories


class _Result:
    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def get(self, timeout: float, propagate: bool) -> Any:
        return self.rows

    def forget(self) -> None:
        pass


class _OwnerApp:
    """What RemoteSearchIndex sends, answered by the real ``memory.search`` task in this process."""

    def send_task(self, name: str, args: list[Any], queue: str, expires: float) -> _Result:
        assert queue == ROUTES[TaskName(name)].value
        return _Result(app.tasks[name](*over_the_wire(args)))


def test_the_search_proxy_round_trips_through_the_search_task(worker: Worker) -> None:
    worker.index.ensure(2, "m")
    worker.index.upsert(
        [
            IndexPoint("00000000-0000-0000-0000-000000000001", "t1", "alice", [1.0, 0.0],
                       {"status": "active"}, sparse=sparse_document("我喜欢喝咖啡")),
            IndexPoint("00000000-0000-0000-0000-000000000002", "t1", "alice", [0.0, 1.0],
                       {"status": "active"}, sparse=sparse_document("coffee")),
        ]
    )  # fmt: skip
    remote = RemoteSearchIndex(_OwnerApp())  # type: ignore[arg-type]

    assert [h.id for h in remote.search_keywords("t1", "alice", sparse_query("咖啡"), 5)] == [
        "00000000-0000-0000-0000-000000000001"
    ]
    nearest = remote.search("t1", "alice", [0.0, 1.0], 5)[0]
    assert nearest.id == "00000000-0000-0000-0000-000000000002"
    assert remote.search_keywords("t1", "bob", sparse_query("咖啡"), 5) == []
    with pytest.raises(ValueError, match="unknown search mode 'fuzzy'"):
        worker.run(TaskName.SEARCH.value, ["t1", "alice", [1.0, 0.0], 5, ["active"], "fuzzy"])
    with pytest.raises(ValueError, match="unknown or disabled index"):
        worker.run(TaskName.SEARCH.value, ["t1", "alice", [1.0, 0.0], 5, ["active"], SearchMode.VECTOR, "x"])


def test_every_task_is_registered_under_its_name_and_routed_to_its_queue() -> None:
    routes = app.conf.task_routes
    for name in TaskName:
        assert name.value in app.tasks, name
        assert routes[name.value] == {"queue": ROUTES[name].value}


def test_the_app_names_no_broker_until_the_settings_give_one() -> None:
    # Imported above without CUEMEM_BROKER_URL: configuration waits for first use, and a worker
    # started so is refused at start (workers/celery_app.py), not at import.
    from workers.reliability import celery_config

    assert "broker_url" not in celery_config(Settings(broker_url=None), None)
    conf = celery_config(Settings(), "redis://broker:6379/0")
    assert conf["broker_url"] == conf["result_backend"] == "redis://broker:6379/0"
