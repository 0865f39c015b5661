"""The OpenAPI document as the server behaves: FastAPI's, completed from the facts the server
itself acts on, so that a client (or schemathesis) generated from it sends what is accepted.

- **Ids**: every parameter and body field that is an id (``user_id``, ``session_id``,
  ``event_id``, ``tenant_id``, ``memory_id``) gets the pattern of ``shared.events.SAFE_ID`` (the
  one regex ``id_problem`` checks, anchored: it is matched whole) and the length limit the server
  applies (``CUEMEM_MAX_ID_CHARS``; memory ids ``MAX_MEMORY_ID_CHARS``).
- **Errors**: each operation lists the answers the server can give it, in the one error shape
  (``Error``): 401 where a key is needed, 400 and 415 where a JSON body is parsed, 413 where a
  body is read, 404 where a path names a memory, 422 where anything is checked, 429 where a
  budget of ``service/http/rate_limits.py`` is spent (the route depends on ``rate_limits_of``).
  FastAPI's own 422 (``HTTPValidationError``, a shape this API never answers) is replaced.

Built once, on the first request for ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from service.http.deps import MAX_MEMORY_ID_CHARS
from service.http.guard import RoutePolicy, depends_on, policies
from service.http.rate_limits import rate_limits_of
from shared.events import SAFE_ID, SAFE_ID_TEXT
from shared.settings import Settings

# JSON Schema patterns are searched, not matched: anchored, the id is matched whole, as
# ``shared.events.is_safe_id`` does with ``fullmatch``.
ID_PATTERN = f"^(?:{SAFE_ID.pattern})$"

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["field", "problem"],
                        "properties": {"field": {"type": "string"}, "problem": {"type": "string"}},
                    },
                },
            },
        }
    },
}

_ANSWERS = {
    400: "the body is not JSON (a syntax error, not UTF-8, nested too deep): names `body`",
    401: "the API key is missing, invalid or revoked: names `Authorization`",
    404: "no such memory of this user in the key's tenant: names `memory_id`",
    413: "the body is larger than this route's limit: names `body`",
    415: "the body is not sent as `application/json`: names `Content-Type`",
    422: "a field is invalid: each problem names its field",
    429: "over the tenant's rate limit: wait the `Retry-After` seconds and retry",
}


def id_limits(settings: Settings) -> dict[str, int]:
    """The ids the API takes or answers, by field name, with the longest each may be."""
    longest = settings.max_id_chars
    return {
        "user_id": longest,
        "session_id": longest,
        "event_id": longest,
        "tenant_id": longest,
        "memory_id": MAX_MEMORY_ID_CHARS,
    }


def install(app: FastAPI, routes: Sequence[BaseRoute], settings: Settings) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            describe(schema, policies(routes, settings), id_limits(settings))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def describe(
    schema: dict[str, Any], routed: Sequence[tuple[BaseRoute, RoutePolicy]], ids: dict[str, int]
) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = _ERROR
    components.pop("HTTPValidationError", None)
    components.pop("ValidationError", None)
    for body in components.values():
        for name, field in (body.get("properties") or {}).items():
            if name in ids:
                _constrain(field, ids[name])
    for route, policy in routed:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():
            operation = schema["paths"].get(route.path_format, {}).get(method.lower())
            if operation is None:
                continue
            for parameter in operation.get("parameters", []):
                if parameter.get("name") in ids:
                    _constrain(parameter["schema"], ids[parameter["name"]])
            _answers(operation, _statuses(route, policy, method))


def _statuses(route: APIRoute, policy: RoutePolicy, method: str) -> list[int]:
    takes_body = method in ("POST", "PUT", "PATCH")
    checked = bool(route.dependant.path_params or route.dependant.query_params or takes_body)
    wanted = {
        400: policy.json_body,
        401: policy.needs_key,
        404: "{memory_id}" in route.path_format,
        413: takes_body,
        415: policy.json_body,
        422: checked,
        429: depends_on(route.dependant, rate_limits_of),
    }
    return [status for status, applies in wanted.items() if applies]


def _answers(operation: dict[str, Any], statuses: list[int]) -> None:
    responses = operation.setdefault("responses", {})
    # A 4xx a route declares itself (its 409), and FastAPI's 422: in the one error shape too.
    declared = [int(k) for k in responses if k.isdigit() and 400 <= int(k) < 500]
    for status in sorted({*statuses, *declared}):
        answer = responses.setdefault(str(status), {})
        answer.setdefault("description", _ANSWERS.get(status, ""))
        answer["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        if status == 429:
            answer["headers"] = {
                "Retry-After": {"description": "whole seconds", "schema": {"type": "integer"}}
            }


def _constrain(field: dict[str, Any], longest: int) -> None:
    """The id pattern and length on a string schema, or on the string branch of an optional one."""
    branches = field.get("anyOf") or [field]
    for branch in branches:
        if branch.get("type") == "string":
            branch.update(pattern=ID_PATTERN, minLength=1, maxLength=longest)
            branch.setdefault("description", SAFE_ID_TEXT)
