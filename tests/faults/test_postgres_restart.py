"""Fault: Postgres (an embedded server of the test's own) crashed and restarted mid-ingest: no
half-written memory, nothing lost or applied twice.
"""

from __future__ import annotations

from fractions import Fraction

from sqlalchemy import text

from tests.support import faults
from tests.support.fault_workload import ARCHIVE_EVERYTHING, start_curated_run
from workers.runtime.processes import check_alive


def test_postgres_restarted_mid_ingest_leaves_no_half_written_memory(
    redelivery_settings, own_postgres, workers_of
):
    users, restarts, down_s = (40, 3, 8.0) if faults.LONG else (8, 1, 5.0)
    settings = redelivery_settings.model_copy(
        update={
            "database_url": own_postgres.url,
            # A retry budget that outlasts the outage, as production's (8 retries, backoff up to
            # 120 s) does. With the tier's short one (5 retries, full jitter capped at 4 s) a task
            # can run out of retries within a 5 s outage and be dead-lettered although the sweep
            # then finishes its event: see "Delivery" in docs/RELIABILITY.md.
            "max_retries": 8,
            "retry_backoff_max_s": 8,
            "visibility_timeout_s": 30,  # must exceed the task time limit (20 s) plus the longest delay
        }
        | ARCHIVE_EVERYTHING
    )
    run = start_curated_run(settings, workers_of(settings), users, archive_share=Fraction(3, 5))
    c, workers, total = run.c, run.workers, run.total

    done_at_restart: list[int] = []
    # Restarts spread over the run, each once a further share of the events is done.
    moments = faults.spread(total, restarts)
    for _ in faults.reach(
        moments,
        lambda: faults.tolerant(lambda: faults.done_count(c), 0),
        total=total,
        counted="done",
        fault="restart",
        timeout=480,  # a hang guard longer than the archive hold (up to 360 s) a moment may wait through
    ):
        done_at_restart.append(faults.done_count(c))
        assert done_at_restart[-1] < total, "the run finished before the restart; the test proved nothing"
        own_postgres.crash_and_restart(down_s)
        check_alive(workers.alive)

    published = run.curation.join(timeout=300)
    ids = [p.event_id for p in published]
    faults.finish(c, settings, ids, workers, timeout=600 if faults.LONG else 300)
    check_alive(workers.alive)
    assert workers.started == 2, "a worker had to be restarted"
    with c.uow() as uow:
        retried = uow.session.execute(  # type: ignore[attr-defined]
            text("SELECT count(*) FROM events WHERE stage <> 'done'")
        ).scalar_one()
    assert retried == 0
    context = f"after {restarts} Postgres restart(s)"
    figures = run.check(published, context)
    faults.report(
        "postgres_restart",
        published,
        run.started,
        restarts=restarts,
        down_s=down_s,
        done_at_restart=done_at_restart,
        **faults.log_counts(settings, retries="Retry in", dead_letter_failed="could not dead-letter"),
        **figures,
    )
