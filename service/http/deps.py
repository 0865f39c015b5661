"""What the API's routes receive through FastAPI dependencies: the container, the metrics and the
publisher ``create_app`` put on ``app.state``, the tenant of the request's key, and checked path ids.

Routers (``service/http/routes/``) are module-level and hold no state of their own, so one process
can build several apps (the tests do) and each route reads its app's state from the request.
"""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from producers.publisher import Publisher
from service.http.errors import ApiError
from service.http.metrics import ApiMetrics
from service.operations import curation as api
from shared.events import FieldError
from shared.lifecycle import curation
from shared.settings import Settings
from workers.bootstrap import Container

MAX_MEMORY_ID_CHARS = 128
_BEARER = HTTPBearer(auto_error=False, description="an API key from `cuemem keys create`")
_API_KEY = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key, another header")


class LazyPublisher:
    """The app's publisher, built once on first use: a server without Redis still answers reads,
    and a broker that cannot be reached fails the publish (503), not the server's start."""

    def __init__(self, settings: Settings, publisher: Publisher | None = None):
        self._settings = settings
        self._publisher = publisher
        self._lock = threading.Lock()

    def get(self) -> Publisher:
        with self._lock:
            if self._publisher is None:
                self._publisher = Publisher.from_settings(self._settings)
            return self._publisher

    def close(self) -> None:
        if self._publisher is not None:
            self._publisher.close()


def container_of(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


def metrics_of(request: Request) -> ApiMetrics:
    metrics: ApiMetrics = request.app.state.metrics
    return metrics


def publisher_of(request: Request) -> LazyPublisher:
    publisher: LazyPublisher = request.app.state.publisher
    return publisher


# Where the guard (service/http/guard.py) leaves the tenant it authenticated, before the body is read.
TENANT_SCOPE_KEY = "cuemem.tenant_id"


def key_of(authorization: str | None, x_api_key: str | None) -> str:
    """The API key a request sends (``Authorization: Bearer <key>`` first, then ``X-API-Key``), as
    FastAPI's ``HTTPBearer`` and ``APIKeyHeader`` read them; "" when there is none."""
    scheme, credentials = get_authorization_scheme_param(authorization)
    if authorization and scheme.lower() == "bearer" and credentials:
        return credentials.strip()
    return (x_api_key or "").strip()


def authenticate(container: Container, auth: bool, key: str) -> str:
    """The tenant of ``key``, or 401; without auth (``--no-auth``), ``CUEMEM_TENANT_ID``."""
    if not auth:
        return container.settings.tenant_id
    if not key:
        raise ApiError(
            401,
            "an API key is required: send `Authorization: Bearer <key>` or `X-API-Key`",
            fields=[FieldError("Authorization", "is missing")],
        )
    tenant = api.tenant_of_key(container, key)
    if tenant is None:
        raise ApiError(
            401,
            "the API key is invalid or revoked",
            fields=[FieldError("Authorization", "is not a valid key")],
        )
    return tenant


def tenant_of(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)] = None,
    x_api_key: Annotated[str | None, Security(_API_KEY)] = None,
) -> str:
    """The tenant of the request's key: the guard has checked it already (before the body was
    read); the check here serves an app built without it. The Security parameters put both
    headers in the OpenAPI document."""
    checked = request.scope.get(TENANT_SCOPE_KEY)
    if isinstance(checked, str):
        return checked
    key = bearer.credentials.strip() if bearer is not None else (x_api_key or "").strip()
    return authenticate(container_of(request), request.app.state.auth, key)


def checked_user(request: Request, user_id: str) -> str:
    return checked_user_id(container_of(request), user_id)


def checked_user_id(container: Container, user_id: str) -> str:
    curation.check_ids({"user_id": user_id}, container.settings.max_id_chars)
    return user_id


def checked_memory_id(memory_id: str) -> str:
    curation.check_ids({"memory_id": memory_id}, MAX_MEMORY_ID_CHARS)
    return memory_id


AppContainer = Annotated[Container, Depends(container_of)]
Metrics = Annotated[ApiMetrics, Depends(metrics_of)]
Publishers = Annotated[LazyPublisher, Depends(publisher_of)]
Tenant = Annotated[str, Depends(tenant_of)]
User = Annotated[str, Depends(checked_user)]
MemoryId = Annotated[str, Depends(checked_memory_id)]
