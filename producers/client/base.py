"""What both clients share besides the calls: the URL and key, the retry policy, reading an answer."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from tenacity import (
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_any,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from producers.client.errors import CuememAPIError, CuememConnectionError, api_error
from producers.client.requests import Request

API_PREFIX = "/v1"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ATTEMPTS = 4
# A server asking for a longer pause than this is not waited for: the caller gets the error and
# decides (an agent loop should not hang for minutes inside one tool call).
MAX_RETRY_AFTER_S = 30.0

T = TypeVar("T")

CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)


class Retry(Exception):
    """A retryable answer (429, 503), carrying the error to raise once attempts run out."""

    def __init__(self, error: CuememAPIError):
        self.error = error
        super().__init__(str(error))


def _wait(backoff: Callable[[RetryCallState], float]) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, Retry) and exc.error.retry_after is not None:
            return min(exc.error.retry_after, MAX_RETRY_AFTER_S)
        return backoff(state)

    return wait


class _StopOnLongRetryAfter(stop_base):
    """Give up at once when the server asks for a pause longer than we are willing to wait."""

    def __call__(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        return isinstance(exc, Retry) and (exc.error.retry_after or 0.0) > MAX_RETRY_AFTER_S


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


class ClientBase:
    """Settings and retry policy; a subclass sends a :class:`Request` with its own httpx client."""

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

    # What ends an attempt to be tried again, until attempts run out (then ``_failed`` maps it).
    _retried = (Retry, *CONNECT_ERRORS)

    @staticmethod
    def _answer(request: Request[T], response: httpx.Response) -> T:
        """The parsed answer; an error raises, as :class:`Retry` when another attempt may succeed."""
        if request.raw_status and response.status_code in (200, 503):
            return request.parse(response)
        if response.status_code >= 400:
            error = api_error(response)
            if error.retryable:
                raise Retry(error)
            raise error
        return request.parse(response)

    def _retry_kwargs(self) -> dict[str, Any]:
        return {
            "retry": retry_if_exception_type(self._retried),
            "stop": stop_any(stop_after_attempt(self.max_attempts), _StopOnLongRetryAfter()),
            "wait": _wait(self._backoff),
            "reraise": True,
        }

    def _failed(self, request: Request[Any], exc: Exception) -> Exception:
        if isinstance(exc, Retry):
            return exc.error
        return CuememConnectionError(
            f"{request.method} {self.base_url}{request.path}: {type(exc).__name__}: {exc} "
            f"(after {self.max_attempts} attempts)"
        )
