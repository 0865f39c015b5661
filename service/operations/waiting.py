"""Wait until published events are processed: what ``cuemem ingest --wait``, the demo, a dead-letter
replay on the embedded default and the LoCoMo benchmark do after publishing.

"Processed" is final in Postgres (done, a duplicate, rejected or dead-lettered), and, when the
command runs its own workers, nothing left on the broker either: a re-sent event is final at once
(its first delivery was), but its message would otherwise stay queued after the workers stop.
"""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

from shared.ingest.progress import Progress, progress
from shared.settings import Settings
from workers.runtime.local import Runtime
from workers.runtime.processes import check_alive

# Event states that are still moving through the pipeline are everything but these.
_FINAL_STATES = ("done", "duplicate", "rejected", "failed")


class WaitTimedOut(Exception):
    """Some events were still in flight when the time given ran out; the message counts them, and
    ``state`` holds each event's state at that moment (for a caller's summary)."""

    def __init__(self, message: str, state: Progress) -> None:
        super().__init__(message)
        self.state = state


def wait_for(rt: Runtime, event_ids: list[str], timeout_s: float, *, show: bool = True) -> Progress:
    """Poll Postgres until every event is done, a duplicate, rejected or dead-lettered.
    ``event_ids``: pipeline keys (``shared.events.event_ref``: tenant and event id), as
    ``producers.publisher.Published.ref`` gives them for a published turn; a bare event id is
    never seen done (its receipt is looked up by tenant and event id)."""
    deadline = time.monotonic() + timeout_s
    bar = tqdm(total=len(event_ids), desc="processing", unit="turn", disable=not show, file=sys.stderr)
    try:
        while True:
            with rt.container.uow() as uow:
                state = progress(uow, event_ids)
            bar.update(state.finished - bar.n)
            if state.complete and (not rt.workers or broker_idle(rt.settings)):
                return state
            check_alive(rt.workers)
            if time.monotonic() > deadline:
                waiting = {k: v for k, v in state.counts.items() if k not in _FINAL_STATES}
                raise WaitTimedOut(f"timed out after {timeout_s:.0f} s; still in flight: {waiting}", state)
            time.sleep(0.2)
    finally:
        bar.close()


def broker_idle(settings: Settings) -> bool:
    """No message waiting in any cuemem queue and none delivered but unacknowledged."""
    from infra.broker import open_redis
    from workers.broker import queue_depths

    url = settings.effective_redis_url
    if url is None:
        return True
    client = open_redis(url)
    try:
        return not any(queue_depths(client).values())
    finally:
        client.close()


def work_seconds(settings: Settings) -> dict[str, float] | None:
    """The workers' totals so far (seconds in the embedding model, seconds of pipeline tasks; see
    ``workers/redis/task_metrics.py``), or None without a Redis to read them from."""
    from infra.broker import open_redis
    from workers.redis.task_metrics import read_work_seconds

    url = settings.effective_redis_url
    if url is None:
        return None
    client = open_redis(url)
    try:
        return read_work_seconds(client)
    finally:
        client.close()


def throughput(
    turns: int, seconds: float, before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, float]:
    """What `cuemem ingest --wait` reports at the end: turns per second while it waited and, when
    the workers' totals were readable, the share of their task time spent in the embedding model
    (the rest is the pipeline's own work: SQL, messages, the index)."""
    out: dict[str, float] = {
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 2) if seconds else 0.0,
    }
    if before is not None and after is not None:
        embedding = after["embedding_s"] - before["embedding_s"]
        tasks = after["tasks_s"] - before["tasks_s"]
        out["embedding_s"] = round(embedding, 2)
        out["task_s"] = round(tasks, 2)
        if tasks > 0:
            out["embedder_share"] = round(min(1.0, embedding / tasks), 3)
    return out
