"""``POST /v1/import`` holds a bounded part of its body, never the file (issue 29, finding 4: a
66 MB import grew the process by 1.76 GB). The body arrives in 64 KiB chunks straight from an
ASGI ``receive`` (no test client buffering it) and is made as it is sent; the Python heap's peak
over the whole request (tracemalloc: bytes held, not time) stays under a quarter of the body, in a
file whose rows are long (30,000 characters of content each) so that a batch of rows is large.
Reading the body whole (``await request.body()``), or holding the file's rows, fails here."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

from shared.settings import Settings
from tests.support.api import api_settings, build_env

TABLES = ("events", "event_receipts", "memories", "memory_history")
AT = "2026-03-01T10:00:00+00:00"
TURNS = 1200
CONTENT = 30_000


def _lines(dim: int, model: str) -> Iterator[bytes]:
    head = {"format": "cuemem-export", "version": 1, "tenant_id": "ac:me", "user_id": None,
            "embedding_model": model, "dim": dim, "exported_at": AT}  # fmt: skip
    yield json.dumps(head).encode() + b"\n"
    for i in range(1, TURNS + 1):
        row = {
            "tenant_id": "ac:me", "user_id": f"u{1 + i % 2 * 9}", "event_id": f"e{i}", "session_id": "s1",
            "seq": i, "role": "user", "content": f"{i} " + "x" * CONTENT, "content_hash": f"{i:064x}",
            "at": AT, "metadata": {}, "stage": "done", "extraction_reasons": [],
        }  # fmt: skip
        yield json.dumps({"table": "events", "row": row}).encode() + b"\n"
    yield json.dumps({"end": True, "rows": {**dict.fromkeys(TABLES, 0), "events": TURNS}}).encode() + b"\n"


def _post(app: Any, auth: dict[str, str], body: Iterator[bytes]) -> tuple[int, int, dict[str, Any]]:
    """The request, its body sent in 64 KiB chunks without a length; (status, bytes sent, answer)."""
    headers = {**auth, "Transfer-Encoding": "chunked"}
    sent = 0
    pending = b""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent, pending
        while len(pending) < 1 << 16:
            line = next(body, b"")
            if not line:
                break
            pending += line
        chunk, pending = pending[: 1 << 16], pending[1 << 16 :]
        sent += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunk)}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/import", "raw_path": b"/v1/import", "root_path": "",
        "query_string": b"", "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }  # fmt: skip
    asyncio.run(app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    answer = json.loads(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body"))
    return start["status"], sent, answer


def test_an_import_holds_a_bounded_part_of_its_body(it_settings: Settings) -> None:
    env = build_env(api_settings(it_settings), tenants=("ac", "ac:me"))
    try:
        c = env.container
        app = env.client.app
        # A first import warms what stays for the process (compiled statements, caches).
        status, _, answer = _post(
            app, env.auth("ac:me"), iter(list(_lines(c.embedder.dim, c.embedder.model_name))[:3])
        )
        assert status == 422, answer
        tracemalloc.start()
        try:
            status, sent, answer = _post(
                app, env.auth("ac:me"), _lines(c.embedder.dim, c.embedder.model_name)
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert status == 200 and answer["imported"]["events"] == TURNS, answer
        assert sent > TURNS * CONTENT  # about 36 MB
        assert peak < sent / 4, (peak, sent)
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        env.container.close()
