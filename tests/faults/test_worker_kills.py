"""Fault: the pipeline worker and the index owner SIGKILLed at random moments, repeatedly, during
ingest (real worker processes, Postgres and Redis; checks in tests/support/faults.py).
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

from tests.support import faults
from tests.support.fault_workload import ARCHIVE_EVERYTHING, start_curated_run
from workers.runtime.processes import check_alive


def test_workers_sigkilled_repeatedly_during_ingest_lose_and_duplicate_nothing(
    redelivery_settings, workers_of
):
    # 400 events by default keeps CI (the whole suite under 20 minutes) affordable; the long run
    # is 5,000 events with 6 kills.
    users, kills = (100, 6) if faults.LONG else (8, 3)
    settings = redelivery_settings.model_copy(update=ARCHIVE_EVERYTHING)
    rng = random.Random(faults.SEED)
    context = f"seed {faults.SEED}"
    run = start_curated_run(settings, workers_of(settings), users, archive_share=Fraction(2, 5))
    c, workers, total = run.c, run.workers, run.total

    killed: list[str] = []
    # Random moments spread over the run: each kill waits until a random share (5-70 %) of the
    # events is done, then a random fraction of a second more.
    moments = sorted(rng.sample(range(total // 20, total * 7 // 10), kills))
    for _ in faults.reach(
        moments,
        lambda: faults.done_count(c),
        total=total,
        counted="done",
        fault="kill",
        timeout=480,  # a hang guard longer than the archive hold (up to 360 s) a moment may wait through
        context=context,
    ):
        time.sleep(rng.uniform(0.0, 2.0))
        which = rng.choice(["pipeline", "index", "both"])
        for name in ("pipeline", "index") if which == "both" else (which,):
            workers.kill(name)
            workers.start(name)
        killed.append(f"{which}@{faults.done_count(c)}")
        check_alive(workers.alive)
    done_at_last_kill = faults.done_count(c)
    assert done_at_last_kill < total, f"{context}: the run finished before the last kill; it proved nothing"

    published = run.curation.join(timeout=300)
    assert len(published) == total
    ids = [p.event_id for p in published]
    faults.finish(c, settings, ids, workers, timeout=900 if faults.LONG else 420)
    figures = run.check(published, context)
    faults.report(
        "sigkill",
        published,
        run.started,
        seed=faults.SEED,
        kills=killed,
        **faults.log_counts(settings, retries="Retry in"),
        done_at_last_kill=done_at_last_kill,
        worker_starts=workers.started,
        **figures,
    )
