"""Fault: the Redis broker restarted mid-ingest (a redis-server of the test's own), with workers
that may exit on the reconnect restarted as a supervisor would.
"""

from __future__ import annotations

from fractions import Fraction

from tests.support import faults
from tests.support.fault_workload import ARCHIVE_EVERYTHING, start_curated_run
from workers.runtime.processes import check_alive


def test_redis_broker_restarted_mid_ingest_loses_and_duplicates_nothing(
    redelivery_settings, own_redis, workers_of
):
    users, restarts, down_s = (40, 3, 5.0) if faults.LONG else (8, 1, 3.0)
    settings = redelivery_settings.model_copy(
        # 8 attempts: the publisher's backoff (0.1 s doubling, capped at 5 s) spans about 11 s.
        update={"broker_url": own_redis.url, "redis_url": own_redis.url, "publish_retries": 8}
        | ARCHIVE_EVERYTHING
    )
    run = start_curated_run(settings, workers_of(settings), users, archive_share=Fraction(3, 5), pace_s=0.05)
    c, workers, ingest, total = run.c, run.workers, run.ingest, run.total

    at_restart: list[int] = []
    # Restarts spread over the publishing, each once a further share of the turns is out.
    moments = faults.spread(total, restarts)
    # A hang guard longer than the archive hold (turns done, then the sweep: up to 360 s) that a
    # moment after 60 % waits through, as the other fault tests' 240 s is for their holds.
    for _ in faults.reach(
        moments, lambda: len(ingest.published), total=total, counted="published", fault="restart", timeout=480
    ):
        assert not ingest.finished, "publishing finished before the restart; the test proved nothing"
        at_restart.append(len(ingest.published))
        own_redis.restart(down_s)
        # kombu 5.7 can end a worker on a second reconnect ("Unrecoverable error: AttributeError
        # ... 'hostname'", the kombu#582 family): a supervisor (compose: restart: unless-stopped)
        # starts it again, and nothing may be lost either way. Seen in 2 of 7 long runs.
        workers.revive()

    published = run.curation.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    faults.finish(c, settings, ids, workers, timeout=600 if faults.LONG else 300, revive=True)
    check_alive(workers.alive)
    # No crash loop: each worker exits at most once per restart, and runs on once started again.
    assert len(workers.exits) <= 2 * restarts and workers.started == 2 + len(workers.exits), workers.exits
    context = f"after {restarts} Redis restart(s)"
    figures = run.check(published, context)
    faults.report(
        "redis_restart",
        published,
        run.started,
        restarts=restarts,
        down_s=down_s,
        worker_exits=workers.exits,
        published_at_restart=at_restart,
        republished_after_retries=ingest.republished,
        **faults.log_counts(settings, retries="Retry in"),
        **figures,
    )
