"""`cuemem serve --workers 2`: two API processes on one port (issue 16).

The real command on the machine's Postgres and Redis, with the real pipeline workers and index
owner: both API processes come up with their own container from the settings the parent
exported, a turn published through one is recalled through either (each searching through the
index worker), and stopping the command stops both.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

import httpx
import psutil

from shared.settings import Settings
from tests.support.own_servers import free_port
from tests.support.services import CUEMEM, wait_until
from workers.runtime.embedded import settings_env

STARTUP_S = 120  # only so that a broken server fails the test instead of hanging it
READY = re.compile(r"API process (\d+) ready")


def _up(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_two_api_processes_answer_on_one_port(it_settings: Settings, start_workers, tmp_path) -> None:
    start_workers()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    env = {**settings_env(it_settings), "CUEMEM_LOG_LEVEL": "INFO"}
    with log_path.open("w") as out:
        proc = subprocess.Popen(
            [CUEMEM, "serve", "--workers", "2", "--no-auth", "--port", str(port), "--log-format", "text"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        assert wait_until(lambda: _up(base + "/v1/ready"), STARTUP_S), log_path.read_text()
        assert wait_until(lambda: len(set(READY.findall(log_path.read_text()))) == 2, STARTUP_S)
        ready = {int(pid) for pid in READY.findall(log_path.read_text())}
        api = {p.pid for p in psutil.Process(proc.pid).children(recursive=True)} & ready
        assert len(api) == 2, (ready, log_path.read_text())
        assert "2 API processes" in log_path.read_text()

        with httpx.Client(base_url=base, timeout=30) as client:
            published = client.post(
                "/v1/events",
                json={
                    "user_id": "w2",
                    "session_id": "s1",
                    "role": "user",
                    "content": "生产环境部署端口是8443",
                },
            )
            assert published.status_code == 202, published.text

            def recalled() -> bool:
                answer = client.post("/v1/recall", json={"user_id": "w2", "query": "部署端口是多少"})
                assert answer.status_code == 200, answer.text
                return any(i["content"] == "生产环境部署端口是8443" and i["type"] != "working"
                           for i in answer.json()["items"])  # fmt: skip

            assert wait_until(recalled, STARTUP_S), "the turn never became a recallable memory"
            # Many recalls on fresh connections: the supervisor's processes share the socket, and
            # every answer carries the long-term memory whichever process gave it.
            for _ in range(20):
                with httpx.Client(base_url=base, timeout=30) as fresh:
                    answer = fresh.post("/v1/recall", json={"user_id": "w2", "query": "部署端口是多少"})
                assert answer.status_code == 200
                assert answer.json()["items"][0]["content"] == "生产环境部署端口是8443"
                assert answer.json()["trace"]["vector_backend"] == "qdrant-edge (via the index worker)"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in api)
