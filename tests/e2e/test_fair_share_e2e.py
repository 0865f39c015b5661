"""Fair scheduling on real parts (producers/fair_share.py): tenant A's backlog waits at the back of
the broker's queue once A is past its share, so tenant B's one turn, published after the whole
backlog, is recorded before it, by real Celery workers taking from the real Redis broker.

Counted by the order of recording (each turn's ``received_at``, the time of the transaction that
recorded it), not by wall-clock.
"""

from __future__ import annotations

import sqlalchemy as sa

from infra.broker import open_redis
from producers.publisher import Publisher
from tests.support.services import wait_until
from workers.broker import queue_depths, queue_lists

SHARE = 10
BACKLOG = 60


def turn(tenant: str, n: int) -> dict[str, object]:
    return {
        "tenant_id": tenant,
        "user_id": "u1",
        "session_id": "s1",
        "role": "user",
        "content": f"note {n}: the deploy port is {8000 + n}",
    }


def test_one_tenants_backlog_does_not_hold_up_anothers_turn(it_settings, start_workers) -> None:
    settings = it_settings.model_copy(update={"fair_share_turns": SHARE, "fair_share_window_s": 3600})
    with Publisher.from_settings(settings) as pub:
        backlog = [pub.publish_turn(turn("tenant-a", n)).event_id for n in range(BACKLOG)]
        light = pub.publish_turn(turn("tenant-b", 0)).event_id
    broker = open_redis(str(settings.broker_url))
    # The backlog past A's share waits in the ingest queue's last priority list, and the queue's
    # depth (metrics, the ledger sweep, the waits) counts it.
    ingest = queue_lists("cuemem.ingest")
    assert broker.llen(ingest[-1]) == BACKLOG - SHARE
    assert queue_depths(broker)["cuemem.ingest"] == BACKLOG + 1
    broker.close()

    start_workers(settings)
    engine = sa.create_engine(str(settings.database_url))
    try:

        def recorded() -> dict[str, object]:
            with engine.connect() as db:
                rows = db.execute(sa.text("SELECT event_id, received_at FROM events")).all()
            return {event_id: at for event_id, at in rows}

        assert wait_until(lambda: light in recorded(), 180)
        at = recorded()
        before_b = [e for e in backlog if e in at and at[e] < at[light]]
        # B waited for at most A's turns within its share and those already in a worker's hands
        # (two pipeline processes, prefetch 1), not for the backlog.
        assert len(before_b) <= SHARE + 4, f"{len(before_b)} of A's {BACKLOG} turns were recorded before B's"
        # The back of the queue is taken too once nothing else waits: the whole backlog is recorded.
        assert wait_until(lambda: set(backlog) <= set(recorded()), 240)
    finally:
        engine.dispose()
