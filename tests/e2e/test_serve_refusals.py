"""`cuemem serve` refuses at once what it cannot serve, with one line naming the problem and a
non-zero exit, before its banner and before any service starts: a data dir another process
serves (its workers own the embedded index; a second server would answer 503), and a port
another process listens on. Every command that starts the data dir's workers (`worker`, `ingest`,
`demo`, `mcp` on the library, `dead-letters replay`) takes the same lock, and is refused the same
way; the commands that only read or change the store (`recall`, `memories`, ...) run beside a
server. The lock lives as long as any worker of the dir: a killed command's orphaned workers
still hold it.

The real console script on the embedded default under the test's own data dirs, as a user runs
it; nothing it started may outlive it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx

from tests.support.cli import CUEMEM, assert_nothing_running, child_env, cuemem, kill_all, wait_or_kill_all
from tests.support.own_servers import free_port
from tests.support.services import wait_until
from workers.runtime.serving import serving

STARTUP_S = 300  # embedded Postgres, Redis and the workers on a busy machine: a safety net only
COMMAND_TIMEOUT_S = 300
BANNER = "cuemem API on"
MCP_STARTED = "cuemem mcp: serving user"
WORKERS_STARTED = "embedded workers and beat running"
# What `cuemem serve`, `cuemem worker` and `cuemem mcp` print once they run: a refused command
# never gets there.
STARTED = (BANNER, WORKERS_STARTED, MCP_STARTED)


def _serve_args(data_dir: Path, port: int) -> list[str]:
    return [str(CUEMEM), "serve", "--data-dir", str(data_dir), "--no-auth", "--port", str(port)]


def _refusal(code: int, stdout: str, stderr: str) -> str:
    """The one line a refused command printed (checked: non-zero exit, no banner, nothing else)."""
    assert code != 0, (code, stdout, stderr)
    assert stdout == "" and BANNER not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def _run_refused(args: list[str], cwd: Path) -> str:
    """Run a command that must be refused; its one line. One that starts instead is stopped as
    soon as it says it runs (it would run until stopped), and the test fails with its output."""
    proc = subprocess.Popen(
        args, cwd=cwd, env=child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None and proc.stdout is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if any(marker in line for marker in STARTED):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=COMMAND_TIMEOUT_S)
            raise AssertionError(f"{' '.join(args[1:])} started instead of refusing:\n{''.join(lines)}")
    code = proc.wait(timeout=COMMAND_TIMEOUT_S)
    return _refusal(code, proc.stdout.read(), "".join(lines))


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/ready", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = cuemem(data_dir, "serve", "--no-auth", "--port", str(port))
    line = _refusal(run.code, run.stdout, run.stderr)
    assert line == (
        f"error: --port: {port} on 127.0.0.1 is already in use by another process; stop it, or "
        "choose another --port"
    ), run
    assert not (data_dir / "pg").exists()  # no embedded service was started


def test_a_second_serve_on_a_served_data_dir_is_refused_naming_the_first(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    port = free_port()
    log_path = tmp_path / "first.log"
    with log_path.open("wb") as log:
        first = subprocess.Popen(
            _serve_args(data_dir, port) + ["--log-format", "text"],
            cwd=tmp_path,
            env=child_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        assert wait_until(lambda: _ready(port), STARTUP_S), log_path.read_text(errors="replace")[-4000:]
        served = f"data dir {data_dir.resolve()} is already served by pid {first.pid} (cuemem serve)"

        line = _run_refused(_serve_args(data_dir, free_port()), tmp_path)
        assert line.startswith(f"error: {served}; "), line
        # Workers of their own beside the server are refused the same way.
        line = _run_refused([str(CUEMEM), "worker", "--data-dir", str(data_dir)], tmp_path)
        assert line.startswith(f"error: {served}; "), line
        # So is every other command that would start workers of its own on the data dir.
        turns = tmp_path / "turns.jsonl"
        turns.write_text(
            json.dumps({"user_id": "u1", "session_id": "s1", "role": "user", "content": "我不吃香菜"})
        )
        for command in (
            ["ingest", str(turns)],
            ["demo"],
            ["mcp", "--user", "u1"],
            ["dead-letters", "replay", "--all"],
        ):
            line = _run_refused([str(CUEMEM), *command, "--data-dir", str(data_dir)], tmp_path)
            assert line.startswith(f"error: {served}; "), (command, line)
        # The commands that only read the store run beside the server (searching through its
        # index worker).
        for command in (["recall", "--user", "u1", "我不吃什么"], ["memories", "--user", "u1"]):
            beside = subprocess.run(
                [str(CUEMEM), *command, "--data-dir", str(data_dir)], cwd=tmp_path, env=child_env(),
                capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
            )  # fmt: skip
            assert beside.returncode == 0, (command, beside.stderr)
        # The first server is unharmed: it still answers, with its own index.
        assert _ready(port)
        recalled = httpx.post(
            f"http://127.0.0.1:{port}/v1/recall", json={"user_id": "u1", "query": "我不吃什么"}, timeout=60
        )
        assert recalled.status_code == 200, recalled.text
    finally:
        os.killpg(first.pid, signal.SIGTERM)
        wait_or_kill_all(first, data_dir, COMMAND_TIMEOUT_S)
    assert_nothing_running(data_dir)
    # The lock went with the process: the data dir can be served again.
    with serving(data_dir.resolve(), "the test"):
        pass


def _wait_for_line(path: Path, marker: str, proc: subprocess.Popen[bytes]) -> bool:
    def said() -> bool:
        assert proc.poll() is None, path.read_text(errors="replace")[-4000:]
        return marker in path.read_text(errors="replace")

    return wait_until(said, STARTUP_S)


def test_an_mcp_server_on_the_library_holds_the_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log_path = tmp_path / "mcp.log"
    with log_path.open("wb") as log:
        mcp = subprocess.Popen(
            [str(CUEMEM), "mcp", "--user", "u1", "--data-dir", str(data_dir)], cwd=tmp_path, env=child_env(),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
        )  # fmt: skip
    try:
        assert _wait_for_line(log_path, MCP_STARTED, mcp), log_path.read_text(errors="replace")[-4000:]
        line = _run_refused(_serve_args(data_dir, free_port()), tmp_path)
        served = f"data dir {data_dir.resolve()} is already served by pid {mcp.pid} (cuemem mcp)"
        assert line.startswith(f"error: {served}; "), line
    finally:
        assert mcp.stdin is not None
        mcp.stdin.close()  # the host closes the server
        wait_or_kill_all(mcp, data_dir, COMMAND_TIMEOUT_S)
    assert_nothing_running(data_dir)


def test_the_workers_of_a_killed_command_still_hold_the_data_dir(tmp_path: Path) -> None:
    """`cuemem worker` SIGKILLed alone leaves its workers running (they have sessions of their
    own): they hold the lock, so no new server starts beside them, nor hands their unacknowledged
    messages out again while they may still run them (workers/runtime/local.py)."""
    data_dir = tmp_path / "data"
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [str(CUEMEM), "worker", "--data-dir", str(data_dir)], cwd=tmp_path, env=child_env(),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        assert _wait_for_line(log_path, WORKERS_STARTED, worker), log_path.read_text(errors="replace")[-4000:]
        worker.send_signal(signal.SIGKILL)  # the command only, not its process group's workers
        worker.wait(timeout=COMMAND_TIMEOUT_S)
        line = _run_refused(_serve_args(data_dir, free_port()), tmp_path)
        assert line.startswith(
            f"error: data dir {data_dir.resolve()} is already served by pid {worker.pid} (cuemem worker), "
            "which exited: its worker processes still run; "
        ), line
    finally:
        kill_all(data_dir)
    assert_nothing_running(data_dir)
    with serving(data_dir.resolve(), "the test"):  # gone with the last of them
        pass
