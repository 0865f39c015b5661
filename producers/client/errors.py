"""What the client raises, and how an error response becomes a :class:`CuememAPIError`."""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from producers.client.types import FieldProblem

# Only these answers say "try again later"; any other refusal is repeated in vain.
RETRYABLE_STATUSES = frozenset({429, 503})


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


def retry_after(response: httpx.Response) -> float | None:
    """The pause ``Retry-After`` asks for, in seconds (either form RFC 9110 allows), or None."""
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


def field_problems(raw: Any) -> list[FieldProblem]:
    """The ``fields`` list of an error body, tolerating a body that is not the contract."""
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
        fields = field_problems(error.get("fields"))
    elif response.text.strip():
        message = response.text.strip()[:300]
    return CuememAPIError(response.status_code, code, message, fields, retry_after=retry_after(response))
