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
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, NotRequired, TypedDict, TypeVar, cast
from urllib.parse import quote

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from producers.publisher import BatchResult, Published
from shared.events import FieldError, InvalidEvent, new_event_id

API_PREFIX = "/v1"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ATTEMPTS = 4
# A server asking for a longer pause than this is not waited for: the caller gets the error and
# decides (an agent loop should not hang for minutes inside one tool call).
MAX_RETRY_AFTER_S = 30.0
RETRYABLE_STATUSES = frozenset({429, 503})

T = TypeVar("T")

# --- what the API answers -----------------------------------------------------------------------


class FieldProblem(TypedDict):
    field: str
    problem: str


class Source(TypedDict):
    event_id: str
    session_id: str
    seq: int
    at: str


class RecallItem(TypedDict):
    """One recalled item, as ``cuemem recall --json`` prints it."""

    id: str
    content: str
    type: str
    status: str
    score: float
    importance: float
    created_at: str
    sources: list[Source]
    explanation: dict[str, Any]


class RecallResult(TypedDict):
    stage: str  # "deterministic" | "vector" | "none"
    items: list[RecallItem]
    trace: dict[str, Any]
    prompt: str


class MemoryRecord(TypedDict):
    """A stored memory, as ``cuemem memories --json`` prints it (the API may add keys)."""

    id: str
    content: str
    type: str
    status: str
    importance: float
    access_count: int
    score: float
    tags: list[str]
    entities: list[str]
    sources: list[Source]
    created_at: str
    updated_at: str
    last_accessed_at: NotRequired[str]
    embedding_model: NotRequired[str | None]


class MemoryPage(TypedDict):
    items: list[MemoryRecord]
    total: int


class Deleted(TypedDict):
    deleted: list[str]
    hard: bool


class MemoryHistory(TypedDict):
    """A memory's chain, as ``cuemem history --json`` prints it."""

    memories: list[dict[str, Any]]
    history: list[dict[str, Any]]


@dataclass(frozen=True)
class Readiness:
    """``GET /v1/ready``: 503 is an answer here (not ready), not an error to retry."""

    ready: bool
    status_code: int
    detail: dict[str, Any] = field(default_factory=dict)


# --- errors -------------------------------------------------------------------------------------


class CuememError(Exception):
    """Anything this client raises."""


class CuememAPIError(CuememError):
    """The API refused the request (or failed): its status, stable code, message and the fields."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: list[FieldProblem] | None = None,
        *,
        retry_after: float | None = None,
    ):
        self.status = status
        self.code = code
        self.message = message
        self.fields: list[FieldProblem] = list(fields or [])
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"HTTP {self.status} {self.code}: {self.message}"
        if self.fields:
            text += " (" + "; ".join(f"{f['field']}: {f['problem']}" for f in self.fields) + ")"
        return text

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE_STATUSES


class CuememConnectionError(CuememError):
    """The API could not be reached after every attempt."""


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the other form RFC 9110 allows: an HTTP date
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _fields(raw: Any) -> list[FieldProblem]:
    if not isinstance(raw, list):
        return []
    return [
        FieldProblem(field=str(f.get("field", "")), problem=str(f.get("problem", "")))
        for f in raw
        if isinstance(f, Mapping)
    ]


def api_error(response: httpx.Response) -> CuememAPIError:
    """Map an error response to :class:`CuememAPIError`, whatever its body (a proxy's HTML page too)."""
    code, message, fields = f"http_{response.status_code}", response.reason_phrase or "error", []
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(error, Mapping):
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
        fields = _fields(error.get("fields"))
    elif response.text.strip():
        message = response.text.strip()[:300]
    return CuememAPIError(response.status_code, code, message, fields, retry_after=_retry_after(response))


# --- requests: built once, sent by either client ----------------------------------------------


@dataclass(frozen=True)
class _Request(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    # When the answer is itself a status (readiness), the status is not raised or retried.
    raw_status: bool = False


def _seg(value: str) -> str:
    # Ids are put into paths: quote everything, or a "/" in an id would change the route.
    return quote(value, safe="")


def _json(response: httpx.Response) -> Any:
    return response.json()


def _user(user_id: str) -> str:
    return f"/users/{_seg(user_id)}/memories"


def _memory(user_id: str, memory_id: str) -> str:
    return f"{_user(user_id)}/{_seg(memory_id)}"


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _event_body(raw: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: _iso(v) for k, v in raw.items() if v is not None}
    body.setdefault("event_id", new_event_id())  # retries stay idempotent (see the module doc)
    return body


def _published(response: httpx.Response) -> Published:
    data = response.json()
    return Published(str(data["event_id"]), int(data["seq"]), str(data["session_id"]), str(data["user_id"]))


def _batch(response: httpx.Response) -> BatchResult:
    data = response.json()
    result = BatchResult()
    for p in data.get("published") or []:
        result.published.append(
            Published(str(p["event_id"]), int(p["seq"]), str(p["session_id"]), str(p["user_id"]))
        )
    for e in data.get("errors") or []:
        problems = [FieldError(f["field"], f["problem"]) for f in _fields(e.get("fields"))]
        result.errors.append((int(e["index"]), InvalidEvent(problems)))
    return result


def _recall_body(
    user_id: str,
    query: str,
    k: int | None,
    now: datetime | str | None,
    session_id: str | None,
    budget_tokens: int | None,
    include_archived: bool,
    include_history: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {"user_id": user_id, "query": query}
    optional = {"k": k, "now": _iso(now), "session_id": session_id, "budget_tokens": budget_tokens}
    body.update({key: value for key, value in optional.items() if value is not None})
    if include_archived:
        body["include_archived"] = True
    if include_history:
        body["include_history"] = True
    return body


def _readiness(response: httpx.Response) -> Readiness:
    try:
        detail = response.json()
    except ValueError:
        detail = {"body": response.text}
    return Readiness(
        response.status_code == 200, response.status_code, detail if isinstance(detail, dict) else {}
    )


class _Requests:
    """Every API call as a :class:`_Request`; the two clients only differ in how they send one."""

    @staticmethod
    def publish(**event: Any) -> _Request[Published]:
        return _Request("POST", "/events", _published, json=_event_body(event))

    @staticmethod
    def publish_batch(events: Iterable[Mapping[str, Any]]) -> _Request[BatchResult]:
        body = {"events": [_event_body(e) if isinstance(e, Mapping) else e for e in events]}
        return _Request("POST", "/events/batch", _batch, json=body)

    @staticmethod
    def recall(body: dict[str, Any]) -> _Request[RecallResult]:
        return _Request("POST", "/recall", lambda r: cast(RecallResult, r.json()), json=body)

    @staticmethod
    def recall_prompt(body: dict[str, Any]) -> _Request[str]:
        return _Request("POST", "/recall/prompt", lambda r: r.text, json=body)

    @staticmethod
    def memories(
        user_id: str, status: str | None, type: str | None, limit: int | None, offset: int | None
    ) -> _Request[MemoryPage]:
        params = {
            k: v
            for k, v in {"status": status, "type": type, "limit": limit, "offset": offset}.items()
            if v is not None
        }
        return _Request("GET", _user(user_id), lambda r: cast(MemoryPage, r.json()), params=params)

    @staticmethod
    def memory(user_id: str, memory_id: str) -> _Request[MemoryRecord]:
        return _Request("GET", _memory(user_id, memory_id), lambda r: cast(MemoryRecord, r.json()))

    @staticmethod
    def edit(
        user_id: str, memory_id: str, content: str | None, type: str | None, tags: list[str] | None
    ) -> _Request[MemoryRecord]:
        body = {k: v for k, v in {"content": content, "type": type, "tags": tags}.items() if v is not None}
        return _Request(
            "PATCH", _memory(user_id, memory_id), lambda r: cast(MemoryRecord, r.json()), json=body
        )

    @staticmethod
    def invalidate(user_id: str, memory_id: str, reason: str) -> _Request[MemoryRecord]:
        return _Request(
            "POST",
            f"{_memory(user_id, memory_id)}/invalidate",
            lambda r: cast(MemoryRecord, r.json()),
            json={"reason": reason},
        )

    @staticmethod
    def restore(user_id: str, memory_id: str) -> _Request[MemoryRecord]:
        return _Request(
            "POST", f"{_memory(user_id, memory_id)}/restore", lambda r: cast(MemoryRecord, r.json())
        )

    @staticmethod
    def forget(user_id: str, memory_id: str, hard: bool) -> _Request[Deleted]:
        return _Request(
            "DELETE",
            _memory(user_id, memory_id),
            lambda r: cast(Deleted, r.json()),
            params={"hard": "true"} if hard else None,
        )

    @staticmethod
    def history(user_id: str, memory_id: str) -> _Request[MemoryHistory]:
        return _Request(
            "GET", f"{_memory(user_id, memory_id)}/history", lambda r: cast(MemoryHistory, r.json())
        )

    @staticmethod
    def health() -> _Request[dict[str, Any]]:
        return _Request("GET", "/health", _json)

    @staticmethod
    def ready() -> _Request[Readiness]:
        return _Request("GET", "/ready", _readiness, raw_status=True)


# --- retry policy -------------------------------------------------------------------------------


class _Retry(Exception):
    """A retryable answer (429, 503), carrying the error to raise once attempts run out."""

    def __init__(self, error: CuememAPIError):
        self.error = error
        super().__init__(str(error))


_CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)


def _wait(backoff: Callable[[RetryCallState], float]) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retry) and exc.error.retry_after is not None:
            return min(exc.error.retry_after, MAX_RETRY_AFTER_S)
        return backoff(state)

    return wait


class _StopOnLongRetryAfter(stop_base):
    """Give up at once when the server asks for a pause longer than we are willing to wait."""

    def __call__(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        return isinstance(exc, _Retry) and (exc.error.retry_after or 0.0) > MAX_RETRY_AFTER_S


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    url = base_url or os.environ.get("CUEMEM_API_URL")
    if not url:
        raise ValueError("base_url: not given and CUEMEM_API_URL is not set")
    url = url.rstrip("/")
    if url.endswith(API_PREFIX):  # accept ".../v1" as well as the server root
        url = url[: -len(API_PREFIX)]
    key = api_key if api_key is not None else os.environ.get("CUEMEM_API_KEY")
    headers = {"Accept": "application/json", "User-Agent": "cuemem-client/0.1"}
    if key:  # the embedded default may run without auth on localhost
        headers["Authorization"] = f"Bearer {key}"
    return url + API_PREFIX, headers


def _check(request: _Request[T], response: httpx.Response) -> T:
    if request.raw_status and response.status_code in (200, 503):
        return request.parse(response)
    if response.status_code >= 400:
        error = api_error(response)
        if error.retryable:
            raise _Retry(error)
        raise error
    return request.parse(response)


class _Base:
    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_attempts: int,
        backoff_s: float,
    ):
        self.base_url, self._headers = _settings(base_url, api_key)
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self._backoff = wait_exponential_jitter(multiplier=backoff_s, max=MAX_RETRY_AFTER_S)

    def _retry_kwargs(self) -> dict[str, Any]:
        return {
            "retry": retry_if_exception_type((_Retry, *_CONNECT_ERRORS)),
            "stop": stop_any(stop_after_attempt(self.max_attempts), _StopOnLongRetryAfter()),
            "wait": _wait(self._backoff),
            "reraise": True,
        }

    def _failed(self, request: _Request[Any], exc: Exception) -> Exception:
        if isinstance(exc, _Retry):
            return exc.error
        return CuememConnectionError(
            f"{request.method} {self.base_url}{request.path}: {type(exc).__name__}: {exc} "
            f"(after {self.max_attempts} attempts)"
        )


# --- the clients --------------------------------------------------------------------------------


class CuememClient(_Base):
    """Blocking client. ``transport`` lets tests hand in an ``httpx.MockTransport``; ``sleep``
    replaces ``time.sleep`` between retries (tests record the waits instead of waiting)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(base_url, api_key, timeout, max_attempts, backoff_s)
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    def _send(self, request: _Request[T]) -> T:
        try:
            for attempt in Retrying(sleep=self._sleep, **self._retry_kwargs()):
                with attempt:
                    response = self._http.request(
                        request.method, request.path, json=request.json, params=request.params
                    )
                    return _check(request, response)
        except (_Retry, *_CONNECT_ERRORS) as exc:
            raise self._failed(request, exc) from exc
        raise AssertionError("unreachable")  # Retrying re-raises on the last attempt

    # publishing

    def publish(
        self,
        *,
        user_id: str,
        session_id: str,
        role: str,
        content: str,
        at: datetime | str | None = None,
        seq: int | None = None,
        event_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Published:
        return self._send(
            _Requests.publish(
                user_id=user_id,
                session_id=session_id,
                role=role,
                content=content,
                at=at,
                seq=seq,
                event_id=event_id,
                metadata=metadata,
            )
        )

    def publish_batch(self, events: Iterable[Mapping[str, Any]]) -> BatchResult:
        return self._send(_Requests.publish_batch(events))

    # recall

    def recall(
        self,
        user_id: str,
        query: str,
        *,
        k: int | None = None,
        now: datetime | str | None = None,
        session_id: str | None = None,
        budget_tokens: int | None = None,
        include_archived: bool = False,
        include_history: bool = False,
    ) -> RecallResult:
        body = _recall_body(
            user_id, query, k, now, session_id, budget_tokens, include_archived, include_history
        )
        return self._send(_Requests.recall(body))

    def recall_prompt(
        self,
        user_id: str,
        query: str,
        *,
        k: int | None = None,
        now: datetime | str | None = None,
        session_id: str | None = None,
        budget_tokens: int | None = None,
        include_archived: bool = False,
        include_history: bool = False,
    ) -> str:
        body = _recall_body(
            user_id, query, k, now, session_id, budget_tokens, include_archived, include_history
        )
        return self._send(_Requests.recall_prompt(body))

    # memories

    def memories(
        self,
        user_id: str,
        *,
        status: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> MemoryPage:
        return self._send(_Requests.memories(user_id, status, type, limit, offset))

    def memory(self, user_id: str, memory_id: str) -> MemoryRecord:
        return self._send(_Requests.memory(user_id, memory_id))

    def edit(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        type: str | None = None,
        tags: list[str] | None = None,
    ) -> MemoryRecord:
        return self._send(_Requests.edit(user_id, memory_id, content, type, tags))

    def invalidate(self, user_id: str, memory_id: str, reason: str) -> MemoryRecord:
        return self._send(_Requests.invalidate(user_id, memory_id, reason))

    def restore(self, user_id: str, memory_id: str) -> MemoryRecord:
        return self._send(_Requests.restore(user_id, memory_id))

    def forget(self, user_id: str, memory_id: str, *, hard: bool = False) -> Deleted:
        return self._send(_Requests.forget(user_id, memory_id, hard))

    def history(self, user_id: str, memory_id: str) -> MemoryHistory:
        return self._send(_Requests.history(user_id, memory_id))

    # service

    def health(self) -> dict[str, Any]:
        return self._send(_Requests.health())

    def ready(self) -> Readiness:
        return self._send(_Requests.ready())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> CuememClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncCuememClient(_Base):
    """The same calls as :class:`CuememClient`, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        max_attempts: int = DEFAULT_ATTEMPTS,
        backoff_s: float = 0.2,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        super().__init__(base_url, api_key, timeout, max_attempts, backoff_s)
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=timeout, transport=transport
        )

    async def _send(self, request: _Request[T]) -> T:
        try:
            async for attempt in AsyncRetrying(sleep=self._sleep, **self._retry_kwargs()):
                with attempt:
                    response = await self._http.request(
                        request.method, request.path, json=request.json, params=request.params
                    )
                    return _check(request, response)
        except (_Retry, *_CONNECT_ERRORS) as exc:
            raise self._failed(request, exc) from exc
        raise AssertionError("unreachable")

    async def publish(
        self,
        *,
        user_id: str,
        session_id: str,
        role: str,
        content: str,
        at: datetime | str | None = None,
        seq: int | None = None,
        event_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Published:
        return await self._send(
            _Requests.publish(
                user_id=user_id,
                session_id=session_id,
                role=role,
                content=content,
                at=at,
                seq=seq,
                event_id=event_id,
                metadata=metadata,
            )
        )

    async def publish_batch(self, events: Iterable[Mapping[str, Any]]) -> BatchResult:
        return await self._send(_Requests.publish_batch(events))

    async def recall(
        self,
        user_id: str,
        query: str,
        *,
        k: int | None = None,
        now: datetime | str | None = None,
        session_id: str | None = None,
        budget_tokens: int | None = None,
        include_archived: bool = False,
        include_history: bool = False,
    ) -> RecallResult:
        body = _recall_body(
            user_id, query, k, now, session_id, budget_tokens, include_archived, include_history
        )
        return await self._send(_Requests.recall(body))

    async def recall_prompt(
        self,
        user_id: str,
        query: str,
        *,
        k: int | None = None,
        now: datetime | str | None = None,
        session_id: str | None = None,
        budget_tokens: int | None = None,
        include_archived: bool = False,
        include_history: bool = False,
    ) -> str:
        body = _recall_body(
            user_id, query, k, now, session_id, budget_tokens, include_archived, include_history
        )
        return await self._send(_Requests.recall_prompt(body))

    async def memories(
        self,
        user_id: str,
        *,
        status: str | None = None,
        type: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> MemoryPage:
        return await self._send(_Requests.memories(user_id, status, type, limit, offset))

    async def memory(self, user_id: str, memory_id: str) -> MemoryRecord:
        return await self._send(_Requests.memory(user_id, memory_id))

    async def edit(
        self,
        user_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        type: str | None = None,
        tags: list[str] | None = None,
    ) -> MemoryRecord:
        return await self._send(_Requests.edit(user_id, memory_id, content, type, tags))

    async def invalidate(self, user_id: str, memory_id: str, reason: str) -> MemoryRecord:
        return await self._send(_Requests.invalidate(user_id, memory_id, reason))

    async def restore(self, user_id: str, memory_id: str) -> MemoryRecord:
        return await self._send(_Requests.restore(user_id, memory_id))

    async def forget(self, user_id: str, memory_id: str, *, hard: bool = False) -> Deleted:
        return await self._send(_Requests.forget(user_id, memory_id, hard))

    async def history(self, user_id: str, memory_id: str) -> MemoryHistory:
        return await self._send(_Requests.history(user_id, memory_id))

    async def health(self) -> dict[str, Any]:
        return await self._send(_Requests.health())

    async def ready(self) -> Readiness:
        return await self._send(_Requests.ready())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncCuememClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
