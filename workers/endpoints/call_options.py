"""What every model endpoint adapter (embedder, LLM, reranker) checks of its call options, how it
holds its key, how it waits between attempts, and its client in each process.

Kept apart from the adapters, like ``redact``, so that a light one (the reranker) does not import
the openai SDK to use it."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import SecretStr
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)


@dataclass(frozen=True)
class CallOptions:
    """How long one attempt may take, how many attempts, and the backoff between them; refused
    at construction, naming the option, when they cannot work."""

    timeout_s: float
    max_attempts: int
    backoff_initial_s: float
    backoff_max_s: float

    def __post_init__(self) -> None:
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff_initial_s < 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("need 0 <= backoff_initial_s <= backoff_max_s")

    def retrying(
        self,
        transient: Callable[[BaseException], bool],
        retry_after: Callable[[BaseException], float | None],
        before_sleep: Callable[[RetryCallState], None],
    ) -> Retrying:
        """Retry what ``transient`` says may pass, waiting ``BackoffWait``; the last error is raised."""
        return Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=BackoffWait(self.backoff_initial_s, self.backoff_max_s, retry_after),
            retry=retry_if_exception(transient),
            before_sleep=before_sleep,
            reraise=True,
        )

    def log_retries(
        self, log: logging.Logger, where: str, describe: Callable[[BaseException], str]
    ) -> Callable[[RetryCallState], None]:
        """What ``retrying`` calls before it sleeps: one warning, in the adapter's own logger,
        naming the attempt, why it failed (``describe``, which masks the key) and the wait."""

        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "%s: attempt %d of %d failed (%s); retrying in %.2fs",
                where,
                state.attempt_number,
                self.max_attempts,
                describe(exc) if exc else "unknown",
                state.next_action.sleep if state.next_action else 0.0,
            )

        return log_retry


def verdict(retrying: Retrying, transient: bool) -> str:
    """How a call that raised ended, for its error message: given up after its attempts (a
    ``transient`` failure, retried to the limit) or refused at once."""
    attempts = retrying.statistics.get("attempt_number", 1)
    return f"failed after {attempts} attempt(s)" if transient else "refused the request"


def api_key_or_none(api_key: SecretStr | str | None) -> SecretStr | None:
    """The key as a SecretStr, or None when it is unset or empty (no Authorization header then)."""
    if isinstance(api_key, str):
        api_key = SecretStr(api_key)
    return api_key if api_key is not None and api_key.get_secret_value() else None


class BackoffWait:
    """Exponential backoff with jitter, capped, that also honours the server's wait hint (capped too).

    ``initial_s * 2**(attempt - 1)`` plus up to ``initial_s`` of random jitter, never above
    ``max_s``. Jitter spreads out workers that failed together so they do not retry together.
    ``retry_after`` reads the hint (``Retry-After``) from the failure, or None.
    """

    def __init__(
        self, initial_s: float, max_s: float, retry_after: Callable[[BaseException], float | None]
    ) -> None:
        self._max_s = max_s
        self._retry_after = retry_after
        # Composed from primitives that exist in every supported tenacity (>= 8.2).
        self._backoff = wait_exponential(multiplier=initial_s, max=max_s) + wait_random(0, initial_s)

    def __call__(self, state: RetryCallState) -> float:
        delay = min(float(self._backoff(state)), self._max_s)
        exc = state.outcome.exception() if state.outcome else None
        hint = self._retry_after(exc) if exc is not None else None
        if hint is not None:  # the server knows best, within our cap
            delay = max(delay, min(hint, self._max_s))
        return delay


T = TypeVar("T")


class ClientPerProcess(Generic[T]):
    """An HTTP client built on first use in each process, so that building the adapter opens no
    connection, and a connection pool inherited through fork never shares sockets with the parent."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._client: T | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        pid = os.getpid()
        with self._lock:
            if self._client is None or self._pid != pid:
                self._client = self._build()
                self._pid = pid
            return self._client

    def take(self) -> T | None:
        """The current client, forgotten here (the caller closes it); None if none was built."""
        with self._lock:
            client, self._client = self._client, None
            return client
