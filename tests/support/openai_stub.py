"""A scripted, local OpenAI-compatible HTTP server for tests.

Runs a stdlib ``ThreadingHTTPServer`` on 127.0.0.1 with an OS-chosen port, in a daemon thread.
Each request takes the next queued :class:`StubResponse` (optionally only those queued for its
path), so a test can script "429, 429, then 200" or "hang longer than the client timeout".
When nothing is queued the ``default`` answers; without a default the stub answers 500 with a
message saying so, which makes a missing script visible instead of hanging.

Usage::

    with StubServer() as stub:
        stub.enqueue(StubResponse(status=429), times=2)
        stub.enqueue(StubResponse(json_body=embeddings_body([[0.1, 0.2]])))
        client = openai.OpenAI(base_url=stub.base_url, api_key="x")
        ...
        assert len(stub.requests) == 3

The ``openai_stub`` fixture below gives a started server; register it with
``pytest_plugins = ["tests.support.openai_stub"]`` in the root ``tests/conftest.py`` or wrap
``StubServer`` in a local fixture.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class StubResponse:
    """One scripted answer. ``raw_body`` wins over ``json_body`` (use it for broken JSON)."""

    status: int = 200
    json_body: Any = None
    raw_body: bytes | None = None
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


Responder = Callable[[RecordedRequest], StubResponse]


def embeddings_body(vectors: Sequence[Sequence[float]], model: str = "stub-embedder") -> dict[str, Any]:
    """The JSON of a ``POST /v1/embeddings`` answer carrying ``vectors`` (floats, in order)."""
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": list(vec)} for i, vec in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": 0, "total_tokens": 0},
    }


def chat_completion_body(
    content: str, model: str = "stub-llm", finish_reason: str = "stop"
) -> dict[str, Any]:
    """The JSON of a non-streaming ``POST /v1/chat/completions`` answer whose message is ``content``."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def error_body(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "stub_error", "param": None, "code": code}}


class StubServer:
    def __init__(self, default: StubResponse | Responder | None = None) -> None:
        self._default = default
        self._lock = threading.Lock()
        self._queue: list[tuple[str | None, StubResponse]] = []
        self._requests: list[RecordedRequest] = []
        # Set on stop so that handlers sleeping in a scripted delay end at once.
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --------------------------------------------------------------------------

    def enqueue(self, response: StubResponse, *, times: int = 1, path: str | None = None) -> None:
        """Queue ``response`` ``times`` times; with ``path`` only requests to that path take it."""
        with self._lock:
            self._queue.extend((path, response) for _ in range(times))

    def set_default(self, default: StubResponse | Responder | None) -> None:
        with self._lock:
            self._default = default

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("stub server is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url`` (it appends ``/embeddings`` etc.)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True
        # A short poll interval keeps stop() (and so every test's teardown) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- called by the handler --------------------------------------------------------------

    def _take(self, request: RecordedRequest) -> StubResponse:
        with self._lock:
            self._requests.append(request)
            for i, (path, response) in enumerate(self._queue):
                if path is None or path == request.path:
                    del self._queue[i]
                    return response
            default = self._default
        if default is None:
            return StubResponse(status=500, json_body=error_body(f"stub: nothing queued for {request.path}"))
        if isinstance(default, StubResponse):
            return default
        return default(request)


def _make_handler(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so a client that gave up on a hanging answer
        # never gets that stale answer on a reused connection.
        protocol_version = "HTTP/1.0"

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            request = RecordedRequest(
                method=self.command,
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            response = stub._take(request)
            if response.delay_s > 0 and stub._stopping.wait(response.delay_s):
                return
            if response.raw_body is not None:
                payload = response.raw_body
            elif response.json_body is not None:
                payload = json.dumps(response.json_body).encode()
            else:
                payload = b""
            try:
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in response.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # The client timed out and went away: expected in timeout tests.
                pass

        do_POST = _handle
        do_GET = _handle
        do_PUT = _handle
        do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            # Keep pytest output clean; requests are recorded on the stub instead.
            pass

    return Handler


@pytest.fixture
def openai_stub() -> Iterator[StubServer]:
    """A started :class:`StubServer`, stopped after the test."""
    with StubServer() as stub:
        yield stub
