"""After a killed run on the embedded default, the next start hands back at once what the dead
workers held (issue 31, item 3).

kombu notes a delivered message in its ``unacked`` hash and gives it back only once it has been
unacked for the visibility timeout (an hour): a worker killed mid-task left its message there, and
``wait_for`` (``cuemem ingest --wait``, the benchmarks) waited that hour. A process that starts the
embedded workers holds the data-dir lock, which every worker of the dir holds too while it lives,
so nothing can still be working on such a message: ``open_runtime`` restores it before its own
workers start.

In-process on the embedded default under the test's own data dir, with production's visibility
timeout: a message that came back only by timeout would not come back during the test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infra.broker import open_redis
from producers.publisher import Publisher
from service.operations.waiting import wait_for
from shared.queues import Queue
from shared.settings import Settings
from tests.support.cli import assert_nothing_running
from workers.broker import UNACKED, queue_depths
from workers.runtime.local import open_runtime

SAFETY_S = 300.0  # a hang guard for a loaded machine; the message otherwise returns after 3,600 s

# A worker as kombu's Redis transport runs one, killed mid-task: it takes the next message of the
# queue (BRPOP, then the message and its delivery tag into ``unacked`` / ``unacked_index``, as
# every consumer's QoS does) and dies before it acknowledges it.
DYING_WORKER = """
import os, signal, sys
from kombu import Connection
with Connection(sys.argv[1]) as conn:
    message = conn.default_channel.basic_get(sys.argv[2], no_ack=False)
    print(message.delivery_tag if message else "", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _settings(data_dir: Path) -> Settings:
    """The embedded default, whatever the test's environment names."""
    return Settings(
        data_dir=data_dir,
        database_url=None,
        broker_url=None,
        redis_url=None,
        qdrant_url=None,
        embedder="hash",
        log_level="INFO",
    )


def test_a_message_a_killed_worker_held_is_delivered_at_the_next_start(tmp_path: Path) -> None:
    settings = _settings(tmp_path / "data")
    assert settings.visibility_timeout_s >= 3600  # production's: no redelivery by timeout here
    with open_runtime(settings) as rt:  # the services only: no worker of ours runs
        with Publisher.from_settings(rt.settings) as publisher:
            ref = publisher.publish(user_id="u1", session_id="s1", role="user", content="我不吃香菜").ref
        broker = str(rt.settings.broker_url)
        died = subprocess.run(
            [sys.executable, "-c", DYING_WORKER, broker, Queue.INGEST.value], capture_output=True, text=True
        )
        assert died.returncode == -9 and died.stdout.strip(), died  # it took the message and died
        client = open_redis(broker)
        try:
            left = queue_depths(client)
        finally:
            client.close()
        assert left[UNACKED] == 1 and left[Queue.INGEST.value] == 0, left

    # The next embedded start: the data-dir lock is its own, so no worker of the dir is alive.
    with open_runtime(settings, start_workers=True, command="the test") as rt:
        state = wait_for(rt, [ref], SAFETY_S, show=False)
        assert state.states[ref] == "done", state.states
    assert_nothing_running(tmp_path / "data")
