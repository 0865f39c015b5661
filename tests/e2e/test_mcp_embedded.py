"""`cuemem mcp` end to end: the real console script as an MCP server over stdio, library backend.

The test speaks the protocol itself (newline-delimited JSON-RPC, as an agent host does): initialize,
tools/list, tools/call remember, then search_memory, which finds the turn at once (working memory,
read-your-writes) and, once the server's own embedded workers processed it, as a long-term memory;
forget takes that memory out of recall. Closing stdin ends the server, and nothing it started
(embedded Postgres, Redis, workers) may outlive it. It runs on the embedded default under its own
--data-dir, like tests/e2e/test_cli_embedded.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.server  # noqa: F401  (`cuemem mcp` needs it, a dev dependency: missing, this fails, not skips)
import pytest

from tests.support.cli import CUEMEM, assert_nothing_running, child_env, kill_all

USER = "mcp-alice"
START_TIMEOUT_S = 300  # embedded Postgres, Redis and two worker processes on a busy machine
PROCESS_TIMEOUT_S = 240  # until the workers made the remembered turn a memory
CALL_TIMEOUT_S = 120


class McpProcess:
    """A `cuemem mcp` subprocess and a JSON-RPC line reader on its stdout."""

    def __init__(self, data_dir: Path, stderr_path: Path):
        self.data_dir = data_dir
        self._stderr = stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [str(CUEMEM), "mcp", "--user", USER, "--data-dir", str(data_dir)],
            cwd=data_dir.parent,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            start_new_session=True,
        )
        self.stderr_path = stderr_path
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def request(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        request_id = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer to {method} in {timeout:.0f} s\n{self.stderr()}") from None
            if line is None:
                raise AssertionError(f"the server closed stdout during {method}\n{self.stderr()}")
            # Every line on stdout must be a JSON-RPC message: anything else corrupts the wire.
            message = json.loads(line)
            assert message.get("jsonrpc") == "2.0", message
            if message.get("id") == request_id:
                assert "error" not in message, message
                return dict(message["result"])
            # notifications (logging, progress) are allowed and skipped

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """tools/call; returns (isError, the decoded text content or the raw text)."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        [content] = result["content"]
        assert content["type"] == "text"
        try:
            payload = json.loads(content["text"])
        except json.JSONDecodeError:
            payload = content["text"]
        return bool(result.get("isError")), payload

    def stderr(self) -> str:
        self._stderr.flush()
        return "--- stderr\n" + self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> int:
        """Close stdin (the end of the session for a stdio server) and wait for a clean exit."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=120)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._stderr.close()
        kill_all(self.data_dir)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[McpProcess]:
    data_dir = tmp_path / "mcp-data"
    mcp = McpProcess(data_dir, tmp_path / "mcp.stderr")
    try:
        yield mcp
    finally:
        if mcp.proc.poll() is None:
            mcp.kill()


def _items(payload: Any) -> list[dict[str, Any]]:
    assert isinstance(payload, dict) and "items" in payload, payload
    return list(payload["items"])


def test_mcp_over_stdio_remember_search_forget(server: McpProcess) -> None:
    init = server.request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "cuemem-test", "version": "0"},
        },
        timeout=START_TIMEOUT_S,
    )
    assert init["serverInfo"]["name"] == "cuemem"
    assert "tools" in init["capabilities"]
    server.notify("notifications/initialized")

    listed = server.request("tools/list", {})
    assert sorted(t["name"] for t in listed["tools"]) == ["forget", "remember", "search_memory"]

    failed, remembered = server.call(
        "remember", {"content": "我对花生过敏，所有菜都不能放花生。", "kind": "profile"}
    )
    assert not failed, remembered
    assert remembered["seq"] == 1 and remembered["event_id"]

    # Read-your-writes: found at once, before any worker ran (the library searches working memory).
    failed, found = server.call("search_memory", {"query": "我对什么过敏？"})
    assert not failed, found
    assert any("花生" in item["content"] for item in _items(found)), found

    # Then, once the server's workers processed the turn, as a long-term memory.
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    memory: dict[str, Any] | None = None
    while memory is None:
        _, found = server.call("search_memory", {"query": "我对什么过敏？", "k": 5})
        memory = next(
            (i for i in _items(found) if "花生" in i["content"] and i["type"] not in ("working", "turn")),
            None,
        )
        if memory is None:
            assert time.monotonic() < deadline, f"never became a memory: {found}\n{server.stderr()}"
            time.sleep(1.0)
    assert memory["type"] == "profile" and memory["status"] == "active"

    failed, forgot = server.call("forget", {"memory_id": memory["id"]})
    assert not failed, forgot
    assert forgot == {"deleted": [memory["id"]], "hard": False}
    _, after = server.call("search_memory", {"query": "我对什么过敏？", "k": 5})
    assert memory["id"] not in {i["id"] for i in _items(after)}, after

    failed, missing = server.call("forget", {"memory_id": "no-such-memory"})
    assert failed and "no-such-memory" in str(missing)
    failed, bad = server.call("search_memory", {"query": "x", "k": 0})
    assert failed, bad

    assert server.close() == 0, server.stderr()
    assert_nothing_running(server.data_dir)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--user", "a b"], "error: --user: 'a b' must be non-empty and use only"),
        (["--user", "u", "--session", "s/1"], "error: --session: 's/1' must be non-empty and use only"),
        (
            ["--user", "u", "--tenant", "t", "--api-url", "http://127.0.0.1:9"],
            "error: --tenant: with --api-url the tenant is the API key's",
        ),
    ],
)
def test_mcp_option_errors_name_the_option(tmp_path: Path, args: list[str], message: str) -> None:
    run = subprocess.run(
        [str(CUEMEM), "mcp", *args, "--data-dir", str(tmp_path / "d")],
        cwd=tmp_path,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and message in run.stderr, run
    assert run.stdout == ""
