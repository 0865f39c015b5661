"""The Python client for the cuemem HTTP API (`cuemem serve`), sync and async.

    from producers.client import CuememClient

    with CuememClient("http://localhost:8080", api_key="ck_...") as cm:   # or CUEMEM_API_URL / _KEY
        cm.publish(user_id="u42", session_id="chat-7", role="user", content="我不吃香菜")
        out = cm.recall("u42", "我不吃什么？", k=5, session_id="chat-7")
        out["items"][0]["explanation"], out["prompt"]

``AsyncCuememClient`` has the same methods, awaited. Both speak the fixed ``/v1`` contract:
Bearer auth, JSON bodies, errors as ``{"error": {"code", "message", "fields": [...]}}`` raised as
:class:`CuememAPIError`. Connection failures, 429 and 503 are retried with backoff (honouring
``Retry-After``); other errors fail at once, since repeating a refused request changes nothing.

``publish`` returns :class:`producers.publisher.Published` and ``publish_batch``
:class:`producers.publisher.BatchResult`, the same types as the in-process ``Publisher``, so code
(and the agent tools) can switch between the two without change. A publish without ``event_id``
gets one here, before the first attempt: a retried publish then carries the same id and the
pipeline records it once.

Where things are: each call's method, path and body in ``requests`` (written once, sent by both
clients), the answers' types in ``types``, errors in ``errors``, URL/key and the retry policy in
``base``, the two clients in ``sync`` and ``async_``.
"""

from producers.client.async_ import AsyncCuememClient
from producers.client.errors import CuememAPIError, CuememConnectionError, CuememError
from producers.client.sync import CuememClient
from producers.client.types import (
    Deleted,
    FieldProblem,
    MemoryHistory,
    MemoryPage,
    MemoryRecord,
    Readiness,
    RecallItem,
    RecallResult,
    Source,
)

__all__ = [
    "AsyncCuememClient",
    "CuememAPIError",
    "CuememClient",
    "CuememConnectionError",
    "CuememError",
    "Deleted",
    "FieldProblem",
    "MemoryHistory",
    "MemoryPage",
    "MemoryRecord",
    "Readiness",
    "RecallItem",
    "RecallResult",
    "Source",
]
