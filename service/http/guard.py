"""What a request must pass before its body is read: its size, its media type and its key.

FastAPI reads and parses a body before it runs a route's dependencies, so a key checked by a
dependency comes after the body is in memory: a 48 MB body without a key grew the process by a
gigabyte before its 401. This middleware runs first, in this order, each answer in the API's one
error shape (service/http/errors.py):

1. a ``Content-Length`` over the route's limit: 413 naming ``body``, nothing read;
2. a body to a route that takes JSON, sent as another media type (or none): 415 naming
   ``Content-Type``, nothing read;
3. a route that needs a key and a missing or invalid one: 401 naming ``Authorization``, nothing
   read; the tenant it finds is left in the scope for ``deps.tenant_of`` and the access log;
4. a body without a length (chunked) is counted as the route reads it: 413 as soon as it crosses
   the limit, so no more than the limit plus one chunk is ever held.

The limits are per route (settings ``max_body_bytes``, ``max_batch_body_bytes``,
``max_import_body_bytes``): FastAPI's own ``max_body_size`` is fixed where a route is declared, and
the routers here are module-level, without settings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from email.message import Message as MimeMessage
from typing import Any

from fastapi import HTTPException
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Match

from service.http.deps import TENANT_SCOPE_KEY, authenticate, key_of, tenant_of
from service.http.errors import ApiError, error_response
from shared.events import FieldError
from shared.settings import Settings
from workers.bootstrap import Container

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class RoutePolicy:
    needs_key: bool
    json_body: bool  # the route parses its body as JSON (FastAPI's body parameters)
    max_body: int


def body_limits(settings: Settings) -> dict[str, int]:
    """The routes with a limit of their own (by path template); every other: ``max_body_bytes``."""
    return {"/v1/events/batch": settings.max_batch_body_bytes, "/v1/import": settings.max_import_body_bytes}


def policies(routes: Sequence[BaseRoute], settings: Settings) -> list[tuple[BaseRoute, RoutePolicy]]:
    limits = body_limits(settings)
    out = []
    for route in routes:
        needs_key = json_body = False
        if isinstance(route, APIRoute):
            needs_key = depends_on(route.dependant, tenant_of)
            json_body = route.body_field is not None or takes_json(route.openapi_extra)
        out.append(
            (
                route,
                RoutePolicy(
                    needs_key, json_body, limits.get(str(getattr(route, "path", "")), settings.max_body_bytes)
                ),
            )
        )
    return out


def takes_json(openapi_extra: dict[str, Any] | None) -> bool:
    """A route that reads its JSON body itself declares it in ``openapi_extra`` (the batch)."""
    content = ((openapi_extra or {}).get("requestBody") or {}).get("content") or {}
    return "application/json" in content


def depends_on(dependant: Any, call: Callable[..., Any]) -> bool:
    return dependant.call is call or any(depends_on(d, call) for d in dependant.dependencies)


def is_json(content_type: str) -> bool:
    message = MimeMessage()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class BodyTooLarge(HTTPException):
    """Raised from ``receive``: FastAPI passes an HTTPException from a body read on as it is, and the
    app's handler answers it (errors.py names ``body``)."""

    def __init__(self, limit: int):
        super().__init__(413, f"the body is larger than this route's limit of {limit} bytes")


class RequestGuard:
    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute], container: Container, auth: bool):
        self.app = app
        self.container = container
        self.auth = auth
        self.policies = policies(routes, container.settings)

    def _policy(self, scope: Scope) -> RoutePolicy | None:
        for route, policy in self.policies:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return policy
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        policy = self._policy(scope) if scope["type"] == "http" else None
        if policy is None:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(policy, headers, str(scope.get("method", "")))
        if refusal is None and policy.needs_key:
            key = key_of(headers.get("authorization"), headers.get("x-api-key"))
            try:
                scope[TENANT_SCOPE_KEY] = await run_in_threadpool(
                    authenticate, self.container, self.auth, key
                )
            except ApiError as exc:
                refusal = exc
        if refusal is not None:
            www = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
            response = error_response(refusal.status, refusal.code, refusal.message, refusal.fields, www)
            await response(scope, receive, send)
            return
        await self.app(scope, _counted(receive, policy.max_body), send)

    @staticmethod
    def _refusal(policy: RoutePolicy, headers: Headers, method: str) -> ApiError | None:
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > policy.max_body:
            return ApiError(
                413,
                f"the body is larger than this route's limit of {policy.max_body} bytes",
                fields=[FieldError("body", f"has {int(length)} bytes; the limit is {policy.max_body}")],
            )
        sends_body = (
            length is not None and length.strip() not in ("", "0")
        ) or "transfer-encoding" in headers
        content_type = headers.get("content-type")
        if (
            policy.json_body
            and sends_body
            and method in ("POST", "PUT", "PATCH")
            and (content_type is None or not is_json(content_type))
        ):
            problem = f"is {content_type or 'missing'}; expected application/json"
            return ApiError(
                415,
                "this route takes a JSON body: send `Content-Type: application/json`",
                fields=[FieldError("Content-Type", problem)],
            )
        return None


def _counted(receive: Receive, limit: int) -> Receive:
    read = 0

    async def receive_counted() -> Message:
        nonlocal read
        message = await receive()
        if message["type"] == "http.request":
            read += len(message.get("body", b""))
            if read > limit:
                raise BodyTooLarge(limit)
        return message

    return receive_counted
