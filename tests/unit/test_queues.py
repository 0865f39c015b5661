"""Which worker consumes which queue, and in which order (searches ahead of index writes, issue 8)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kombu.transport.redis import Channel
from kombu.utils.scheduling import cycle_by_name

from shared.queues import INDEX_OWNER_QUEUES, PIPELINE_QUEUES, ROUTES, Queue, TaskName
from shared.settings import Settings
from workers.reliability import queue_order_for
from workers.runtime.processes import index_owner_command, worker_queues

OWNER = [q.value for q in INDEX_OWNER_QUEUES]
EMBEDDED = Settings(qdrant_url=None)
SERVER = Settings(qdrant_url="http://qdrant:6333")


def test_searches_have_their_own_queue_and_index_writes_stay_on_the_index_queue():
    assert ROUTES[TaskName.SEARCH] is Queue.SEARCH
    assert [t for t, q in ROUTES.items() if q is Queue.SEARCH] == [TaskName.SEARCH, TaskName.SEARCH_BATCH]
    for task in (TaskName.INDEX, TaskName.SYNC_INDEX, TaskName.PUSH_SCORES, TaskName.REINDEX):
        assert ROUTES[task] is Queue.INDEX
    assert OWNER == ["cuemem.search", "cuemem.index"]  # searches first


def test_embedded_every_queue_has_exactly_one_kind_of_consumer():
    general = set(worker_queues(EMBEDDED))
    # A pipeline worker must never take an index message: it cannot open the embedded index.
    assert general.isdisjoint(OWNER)
    assert general | set(OWNER) == {q.value for q in Queue}
    assert {q.value for q in ROUTES.values()} <= general | set(OWNER)


def test_with_a_qdrant_server_one_worker_consumes_every_queue():
    assert set(worker_queues(SERVER)) == {q.value for q in Queue}
    assert worker_queues(SERVER)[: len(PIPELINE_QUEUES)] == [q.value for q in PIPELINE_QUEUES]


def test_the_index_owner_is_one_solo_process_on_search_then_index():
    cmd = index_owner_command(EMBEDDED)
    assert cmd[cmd.index("-Q") + 1] == "cuemem.search,cuemem.index"
    assert cmd[cmd.index("--pool") + 1] == "solo" and cmd[cmd.index("-c") + 1] == "1"
    assert queue_order_for(cmd[cmd.index("-Q") + 1]) == "priority"


@pytest.mark.parametrize(
    ("queues", "order"),
    [
        (OWNER, "priority"),
        (",".join(OWNER), "priority"),  # as -Q gives it
        (list(reversed(OWNER)), "round_robin"),  # index first would starve searches: never strict
        (["cuemem.index"], "round_robin"),
        (worker_queues(EMBEDDED), "round_robin"),  # strict order would starve later stages
        (worker_queues(SERVER), "round_robin"),
        (None, "round_robin"),  # no -Q: every queue
        ([], "round_robin"),
    ],
)
def test_only_the_index_owner_checks_its_queues_in_strict_order(queues, order):
    assert queue_order_for(queues) == order


def test_kombu_keeps_the_owner_queue_order_in_its_brpop():
    """What "priority" relies on in kombu's Redis transport (a regression guard for upgrades):
    the channel's queues keep the order they were consumed in (a set before kombu 5.7, kombu#801),
    and the priority cycle never rotates them, so BRPOP always names the search queue first."""
    assert "queue_order_strategy" in Channel.from_transport_options
    channel = SimpleNamespace(_active_queues=list(OWNER), active_fanout_queues=set())
    active = Channel.active_queues.fget(channel)  # type: ignore[attr-defined]
    assert active == OWNER
    cycle = cycle_by_name("priority")()
    cycle.update(active)
    cycle.rotate("cuemem.search")  # kombu calls this after every message taken
    assert cycle.consume(2) == OWNER
    robin = cycle_by_name("round_robin")()
    robin.update(list(OWNER))
    robin.rotate("cuemem.search")
    assert robin.consume(2) == ["cuemem.index", "cuemem.search"]  # what round robin would do
