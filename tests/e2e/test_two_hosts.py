"""Pipeline workers scale out over one broker: two worker "hosts" (separate processes with their
own node names and concurrency, as on two machines) and the index owner share one Redis and one
Postgres. Users' turns are interleaved, published one by one and in batches; every turn ends
recorded exactly once, under the seq it was given, in publish order, and processed to done,
with work taken by both hosts."""

from __future__ import annotations

from collections import Counter, defaultdict

from producers.publisher import Publisher
from shared.models import MemoryStatus
from tests.support.queues import assert_queues_drain
from tests.support.services import table_counts, wait_processed
from tests.support.workload import make_turns
from workers.bootstrap import build_container
from workers.runtime.processes import start_index_owner, start_worker, worker_queues


def test_two_worker_hosts_ingest_interleaved_users_exactly_once_and_in_order(it_settings, start_workers):
    settings = it_settings.model_copy(update={"turn_window": 3})
    turns = make_turns(users=6, per_user=24)
    users = sorted(turns)
    # Interleaved: user 0's first turn, user 1's first turn, ..., then everyone's second turn.
    interleaved = [turns[u][i] for i in range(24) for u in users]
    c = build_container(settings)
    hosts = [
        start_worker(settings, "host-a", worker_queues(settings), concurrency=1),
        start_worker(settings, "host-b", worker_queues(settings), concurrency=2),
        start_index_owner(settings, "owner"),
    ]
    try:
        published = []
        with Publisher.from_settings(settings) as pub:
            for start in range(0, len(interleaved), 24):
                chunk = interleaved[start : start + 24]
                if (start // 24) % 2:
                    result = pub.publish_batch(chunk)
                    assert not result.errors, result.errors
                    published += result.published
                else:
                    published += [pub.publish_turn(t) for t in chunk]
        assert len({p.event_id for p in published}) == len(interleaved) == 144
        state = wait_processed(c, [p.event_id for p in published], hosts)
        assert state.counts == Counter({"done": 144})
        assert_queues_drain(settings.broker_url, 60)
    finally:
        for w in hosts:
            w.stop(timeout=20)

    counts = table_counts(c)
    assert counts["events"] == 144 and counts["event_receipts"] == 144 and counts["dead_letters"] == 0
    by_conversation: dict[tuple[str, str], list] = defaultdict(list)
    for p in published:
        by_conversation[(p.user_id, p.session_id)].append(p)
    with c.uow() as uow:
        for (user, session), mine in by_conversation.items():
            timeline = uow.events.timeline(settings.tenant_id, user, session)
            # Exactly once, gapless, and the timeline's order is the publish order.
            assert [s.event.seq for s in timeline] == list(range(1, len(mine) + 1))
            assert [s.event.event_id for s in timeline] == [p.event_id for p in mine]
        # A statement processed twice would stand twice among the active memories (or be counted
        # twice as a repeat).
        for user in users:
            active = uow.memories.for_user(settings.tenant_id, user, [MemoryStatus.ACTIVE])
            assert active and max(Counter(m.content_hash for m in active).values()) == 1
            for memory in active:
                cited = [s["event_id"] for s in memory.sources]
                assert len(cited) == len(set(cited)) == memory.access_count + 1
    # Both hosts took work from the shared queues.
    for host in hosts[:2]:
        log = host.log_path.read_text(errors="replace")
        assert "memory.record" in log and "succeeded" in log, host.name
