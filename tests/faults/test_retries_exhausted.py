"""Fault: an outage that outlasts a task's whole retry budget. The task gives up, but a transient
failure is no verdict on the message: nothing is dead-lettered, the event stays at its stage, and
the stalled sweep carries it to ``done`` once the outage is over (``PipelineTask.on_failure`` in
workers/tasks/base.py; docs/RELIABILITY.md, "Retries that run out on an outage").

The outage is the embedding endpoint's (a local stub answering 503 until the test says it is
back): it strikes the fused extract-embed-persist step of ``memory.record`` after the turn is
recorded, and, unlike a Postgres outage, it leaves the dead-letter table writable, so a task that
dead-lettered on giving up would be seen doing so. The Postgres fault test
(test_postgres_restart.py) runs with a retry budget that outlasts its outage and never reaches
this path."""

from __future__ import annotations

import hashlib
import threading
import time

from sqlalchemy import text

from producers.publisher import Publisher
from shared.settings import Settings
from tests.support.openai_stub import RecordedRequest, StubResponse, StubServer, embeddings_body
from tests.support.queues import beat_sweep
from tests.support.services import wait_processed
from workers.bootstrap import Container, build_container
from workers.runtime.processes import check_alive

DIM = 16
GAVE_UP = "left to the stalled sweep"  # PipelineTask.on_failure's log line
DEAD_LETTERED = "dead-lettered"  # workers/failures.py: dead_letter's


class Endpoint:
    """An OpenAI-compatible embedding endpoint that is down (503) until ``restore``."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.refused = 0

    def __call__(self, request: RecordedRequest) -> StubResponse:
        if not self.up.is_set():
            self.refused += 1
            return StubResponse(status=503, json_body={"error": {"message": "service unavailable"}})
        texts = [str(t) for t in request.json["input"]]
        return StubResponse(json_body=embeddings_body([_vector(t) for t in texts]))


def _vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [b / 255.0 + 0.01 for b in digest[:DIM]]


def _log_holding(settings: Settings, *needles: str, timeout: float) -> str:
    """Wait for a worker log line holding one of ``needles``; that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (settings.resolved_data_dir / "logs").glob("*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if any(n in line for n in needles):
                    return line
        time.sleep(0.2)
    raise AssertionError(f"no worker logged any of {needles} in {timeout} s")


def _one(c: Container, sql: str, **params: str) -> object:
    with c.uow() as uow:
        return uow.session.execute(text(sql), params).scalar_one()  # type: ignore[attr-defined]


def test_retries_run_out_during_an_outage_nothing_is_dead_lettered_and_the_sweep_finishes_it(
    it_settings: Settings, start_workers
) -> None:
    endpoint = Endpoint()
    with StubServer(default=endpoint) as stub:
        settings = it_settings.model_copy(
            update={
                "embedder": "openai",
                "embedding_base_url": stub.base_url,
                "embedding_model": "stub-embedder",
                "embedding_dim": DIM,
                # A budget the outage outlasts: one retry, a second apart.
                "max_retries": 1,
                "retry_backoff_max_s": 1,
                # Each try spends the embedder's own attempts (5, backing off up to ~9 s in all)
                # before it fails: a time limit under that would end the try for another reason.
                "task_time_limit_s": 60,
                "visibility_timeout_s": 90,
            }
        )
        c = build_container(settings)
        workers = start_workers(settings)
        with Publisher.from_settings(settings) as pub:
            event_id = pub.publish(user_id="u1", session_id="s1", role="user", content="我不吃香菜").event_id

        line = _log_holding(settings, GAVE_UP, DEAD_LETTERED, timeout=180)
        check_alive(workers)
        assert endpoint.refused > 0
        dead = _one(c, "SELECT count(*) FROM dead_letters")
        assert dead == 0, f"a task that ran out of retries on an outage was dead-lettered: {line}"
        assert GAVE_UP in line and "memory.record" in line, line
        # Recorded (its record step committed), and left there for the sweep.
        assert _one(c, "SELECT stage FROM events WHERE event_id = :e", e=event_id) == "recorded"

        endpoint.up.set()
        beat_sweep(settings, older_than_s=0)()
        wait_processed(c, [event_id], workers, timeout=180)
        assert _one(c, "SELECT stage FROM events WHERE event_id = :e", e=event_id) == "done"
        assert _one(c, "SELECT count(*) FROM memories WHERE status = 'active'") == 1
        assert _one(c, "SELECT count(*) FROM dead_letters") == 0
        c.close()
