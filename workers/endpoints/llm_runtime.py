"""The LLM as the pipeline uses it: usage written to Postgres, and a cooldown after failures.

Usage rows are written in their own short transaction, so a reply that failed to parse (and
made the task roll back or fall back) still leaves its token count behind. The cooldown keeps a
dead endpoint from costing every turn its full retry budget: after a few failed questions in a
row the LLM is skipped (rule-based path) until the cooldown has passed.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from pydantic import BaseModel

from shared.llm import LLM, LLMOperation, LLMUsage
from shared.storage import UnitOfWork

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

current_event_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_event_id", default=None
)


class DbUsageSink:
    def __init__(self, uow_factory: Callable[[], UnitOfWork]):
        self._uow = uow_factory

    def record(self, usage: LLMUsage) -> None:
        with self._uow() as uow:
            uow.llm_calls.add(usage, current_event_id.get())
            uow.commit()


class CooldownLLM:
    def __init__(self, inner: LLM, cooldown_s: float, failures_to_open: int = 3,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        self._inner = inner
        self._cooldown = cooldown_s
        self._threshold = failures_to_open
        self._clock = clock
        self._failures = 0
        self._open_until = 0.0

    def ask(
        self, operation: LLMOperation, instructions: str, data: Mapping[str, str], schema: type[T]
    ) -> T | None:
        if self._clock() < self._open_until:
            return None
        answer = self._inner.ask(operation, instructions, data, schema)
        if answer is None:
            self._failures += 1
            if self._failures >= self._threshold:
                self._open_until = self._clock() + self._cooldown
                self._failures = 0
                log.warning(
                    "LLM failed %d times in a row: rule-based path for %.0f s",
                    self._threshold,
                    self._cooldown,
                )
        else:
            self._failures = 0
        return answer
