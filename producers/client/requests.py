"""Every API call, built once: its method, path, query and body, and how its answer is read.

Each function here takes the call's arguments (the signature both clients show) and returns a
:class:`Request`; :mod:`producers.client.sync` and :mod:`producers.client.async_` only differ in
how they send one, so a call's contract is written in this file and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Generic, ParamSpec, TypeVar, cast
from urllib.parse import quote

import httpx

from producers.client.errors import field_problems
from producers.client.types import Deleted, MemoryHistory, MemoryPage, MemoryRecord, Readiness, RecallResult
from producers.publisher import BatchResult, Published
from shared.events import FieldError, InvalidEvent, new_event_id

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)
class Request(Generic[T]):
    """One call to send: where, with what, and how to read a successful answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    # When the answer is itself a status (readiness), the status is not raised or retried.
    raw_status: bool = False


# --- paths and bodies ---------------------------------------------------------------------------


def _seg(value: str) -> str:
    # Ids are put into paths: quote everything, or a "/" in an id would change the route.
    return quote(value, safe="")


def _user(user_id: str) -> str:
    return f"/users/{_seg(user_id)}/memories"


def _memory(user_id: str, memory_id: str) -> str:
    return f"{_user(user_id)}/{_seg(memory_id)}"


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _given(values: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments the caller gave: an absent one is left to the server's default."""
    return {key: value for key, value in values.items() if value is not None}


def _event_body(raw: Mapping[str, Any]) -> dict[str, Any]:
    body = {k: _iso(v) for k, v in _given(raw).items()}
    # The id is drawn here, before the first attempt: a retried publish carries the same id and
    # the pipeline records it once.
    body.setdefault("event_id", new_event_id())
    return body


# --- answers ------------------------------------------------------------------------------------


def _json(response: httpx.Response) -> Any:
    return response.json()


def _text(response: httpx.Response) -> str:
    return response.text


def _one_published(data: Mapping[str, Any]) -> Published:
    return Published(str(data["event_id"]), int(data["seq"]), str(data["session_id"]), str(data["user_id"]))


def _published(response: httpx.Response) -> Published:
    return _one_published(response.json())


def _batch(response: httpx.Response) -> BatchResult:
    data = response.json()
    result = BatchResult()
    for p in data.get("published") or []:
        result.published.append(_one_published(p))
    for e in data.get("errors") or []:
        problems = [FieldError(f["field"], f["problem"]) for f in field_problems(e.get("fields"))]
        result.errors.append((int(e["index"]), InvalidEvent(problems)))
    return result


def _readiness(response: httpx.Response) -> Readiness:
    try:
        detail = response.json()
    except ValueError:
        detail = {"body": response.text}
    return Readiness(
        response.status_code == 200, response.status_code, detail if isinstance(detail, dict) else {}
    )


def _record(response: httpx.Response) -> MemoryRecord:
    return cast(MemoryRecord, response.json())


# --- the calls ----------------------------------------------------------------------------------


def publish(
    *,
    user_id: str,
    session_id: str,
    role: str,
    content: str,
    at: datetime | str | None = None,
    seq: int | None = None,
    event_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Request[Published]:
    """Publish one turn; without ``event_id`` one is drawn here (see :func:`_event_body`)."""
    event: dict[str, Any] = {"user_id": user_id, "session_id": session_id, "role": role, "content": content}
    event |= {"at": at, "seq": seq, "event_id": event_id, "metadata": metadata}
    return Request("POST", "/events", _published, json=_event_body(event))


def publish_batch(events: Iterable[Mapping[str, Any]]) -> Request[BatchResult]:
    """Publish several turns; invalid ones come back in ``errors`` by position, the rest publish."""
    body = {"events": [_event_body(e) if isinstance(e, Mapping) else e for e in events]}
    return Request("POST", "/events/batch", _batch, json=body)


def recall(
    user_id: str,
    query: str,
    *,
    k: int | None = None,
    now: datetime | str | None = None,
    session_id: str | None = None,
    budget_tokens: int | None = None,
    include_archived: bool = False,
    include_history: bool = False,
    reinforce: bool = False,
) -> Request[RecallResult]:
    """Recall for ``query``: the items, their explanations, the trace and the prompt block.
    Read-only unless ``reinforce``: then the memories returned count as used."""
    body: dict[str, Any] = {"user_id": user_id, "query": query}
    body |= _given({"k": k, "now": _iso(now), "session_id": session_id, "budget_tokens": budget_tokens})
    # Sent only when set, so a server's default stays the server's.
    if include_archived:
        body["include_archived"] = True
    if include_history:
        body["include_history"] = True
    # Always sent: a read-only recall stays read-only on a server whose default was to count it.
    body["reinforce"] = reinforce
    return Request("POST", "/recall", lambda r: cast(RecallResult, r.json()), json=body)


def _as_prompt(build: Callable[P, Request[Any]]) -> Callable[P, Request[str]]:
    """The same recall, asking ``/recall/prompt`` for the prompt block as text only."""

    @functools.wraps(build)
    def prompt(*args: P.args, **kwargs: P.kwargs) -> Request[str]:
        return replace(build(*args, **kwargs), path="/recall/prompt", parse=_text)

    prompt.__doc__ = "Recall for ``query``, answering only the prompt block (text)."
    prompt.__name__ = prompt.__qualname__ = f"{build.__name__}_prompt"
    return prompt


recall_prompt = _as_prompt(recall)


def memories(
    user_id: str,
    *,
    status: str | None = None,
    type: str | None = None,
    limit: int | None = None,
    offset: int | None = None,
) -> Request[MemoryPage]:
    """A page of the user's memories, filtered by status and type."""
    params = _given({"status": status, "type": type, "limit": limit, "offset": offset})
    return Request("GET", _user(user_id), lambda r: cast(MemoryPage, r.json()), params=params)


def memory(user_id: str, memory_id: str) -> Request[MemoryRecord]:
    """One memory."""
    return Request("GET", _memory(user_id, memory_id), _record)


def edit(
    user_id: str,
    memory_id: str,
    *,
    content: str | None = None,
    type: str | None = None,
    tags: list[str] | None = None,
) -> Request[MemoryRecord]:
    """Change a memory's content, type or tags (only those given)."""
    body = _given({"content": content, "type": type, "tags": tags})
    return Request("PATCH", _memory(user_id, memory_id), _record, json=body)


def invalidate(user_id: str, memory_id: str, reason: str) -> Request[MemoryRecord]:
    """Mark a memory as no longer true, saying why."""
    return Request("POST", f"{_memory(user_id, memory_id)}/invalidate", _record, json={"reason": reason})


def restore(user_id: str, memory_id: str) -> Request[MemoryRecord]:
    """Bring a memory back to active."""
    return Request("POST", f"{_memory(user_id, memory_id)}/restore", _record)


def forget(user_id: str, memory_id: str, *, hard: bool = False) -> Request[Deleted]:
    """Forget a memory (``hard``: delete it and its history)."""
    params = {"hard": "true"} if hard else None
    return Request("DELETE", _memory(user_id, memory_id), lambda r: cast(Deleted, r.json()), params=params)


def history(user_id: str, memory_id: str) -> Request[MemoryHistory]:
    """A memory's chain: what it superseded and what happened to it."""
    path = f"{_memory(user_id, memory_id)}/history"
    return Request("GET", path, lambda r: cast(MemoryHistory, r.json()))


def health() -> Request[dict[str, Any]]:
    """Liveness: ``{"status": "ok"}``."""
    return Request("GET", "/health", _json)


def ready() -> Request[Readiness]:
    """Readiness of Postgres, Redis and the index; 503 answers "not ready"."""
    return Request("GET", "/ready", _readiness, raw_status=True)
