"""The body of ``POST /v1/events/batch``, parsed one turn at a time, in the thread pool.

Parsed whole, a 16 MB batch of turns whose metadata held thousands of empty lists became 311 MB of
Python objects in one ``json.loads`` call of 3.5 s, which holds the GIL throughout: the process
grew by 430 MB and the event loop (every other tenant's requests) stood still for 5 s. Here the
body's text is walked with the standard library's decoder (``JSONDecoder.raw_decode``), one value
at a time, and no value is parsed from more than ``max_body_bytes`` (the most one ``POST /v1/events``
may send) of text: a turn over it is refused with 413 naming ``events[i]``, before it is parsed.
A first pass checks every turn and notes where each starts and ends (nothing kept); the route then
spends the rate limit for the count and parses each turn again as the publisher takes it, 64 to a
message, so no more than one message's turns are held as objects. Each call parses one value,
so the GIL is let go between turns.

Every answer is the one FastAPI gave when it parsed the body: the same 400 for a body that is not
JSON (``json_invalid`` with its position; not UTF-8 or nested too deep: a 400 caused by the
parser's exception) and the same 422s from the same model (``BatchIn``: no ``events``, an unknown
field, more than 1,000 turns, a body that is not an object).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from service.http.errors import ApiError
from service.http.schemas import BatchIn
from shared.events import FieldError

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")
_FIRST_TRY = 64 << 10  # text decoded at first for a value; most turns are shorter
# A value cut short by the end of its window fails within a token of it, or as an open string.
_NEAR_END = 8

Span = tuple[int, int]


class _TooLarge(Exception):
    pass


def batch_text(body: bytes) -> str:
    """The body as text, as ``json.loads`` decodes bytes (UTF-8, or UTF-16/32 by their marks)."""
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required"}])
    try:
        return body.decode(json.detect_encoding(body), "surrogatepass")
    except UnicodeDecodeError as exc:
        raise HTTPException(400, "There was an error parsing the body") from exc


def event_spans(text: str, max_value_chars: int) -> list[Span]:
    """Where each turn of the batch starts and ends in ``text``, every turn parsed once and
    dropped. Raises the API's answer for a body that is not a valid batch."""
    try:
        return _spans(text, max_value_chars)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ]
        ) from exc
    except RecursionError as exc:
        raise HTTPException(400, "There was an error parsing the body") from exc


def event_at(text: str, span: Span) -> Any:
    """The turn at ``span`` (from ``event_spans``)."""
    value, _ = _DECODER.raw_decode(text, span[0])
    return value


def _spans(text: str, limit: int) -> list[Span]:
    at = _skip(text, 0)
    if not text.startswith("{", at):
        value, end = _value(text, at, limit, "body")
        _expect_end(text, end)
        _check_shape(value)  # not an object: the model's own 422
    shape: dict[str, Any] = {}
    spans: list[Span] = []
    at = _skip(text, at + 1)
    if text.startswith("}", at):
        at += 1
    else:
        while True:
            key, at = _key(text, at)
            at = _skip(text, at)
            if not text.startswith(":", at):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
            at = _skip(text, at + 1)
            if key == "events" and text.startswith("[", at):
                spans, at = _array(text, at, limit)
                shape[key] = [None] * len(spans)  # the model checks the count, not the turns
            else:
                shape[key], at = _value(text, at, limit, key)
            at = _skip(text, at)
            if text.startswith(",", at):
                at = _skip(text, at + 1)
                continue
            if text.startswith("}", at):
                at += 1
                break
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)
    _expect_end(text, at)
    _check_shape(shape)
    return spans


def _array(text: str, at: int, limit: int) -> tuple[list[Span], int]:
    spans: list[Span] = []
    at = _skip(text, at + 1)
    if text.startswith("]", at):
        return spans, at + 1
    while True:
        _, end = _value(text, at, limit, f"events[{len(spans)}]")
        spans.append((at, end))
        at = _skip(text, end)
        if text.startswith(",", at):
            at = _skip(text, at + 1)
        elif text.startswith("]", at):
            return spans, at + 1
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, at)


def _value(text: str, at: int, limit: int, field: str) -> tuple[Any, int]:
    """The JSON value at ``at``, parsed from no more than ``limit`` characters of text."""
    window = min(_FIRST_TRY, limit)
    while True:
        try:
            return _windowed(text, at, window)
        except _TooLarge:
            if window >= limit:
                raise ApiError(
                    413,
                    f"{field} is larger than {limit} characters, the most one turn may hold",
                    fields=[FieldError(field, f"is larger than {limit} characters")],
                ) from None
            window = limit


def _windowed(text: str, at: int, window: int) -> tuple[Any, int]:
    end = at + window
    if end >= len(text):
        return _DECODER.raw_decode(text, at)
    try:
        value, stop = _DECODER.raw_decode(text[at:end])
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Unterminated string") or exc.pos >= window - _NEAR_END:
            raise _TooLarge from None
        raise json.JSONDecodeError(exc.msg, text, at + exc.pos) from None
    return value, at + stop


def _check_shape(shape: Any) -> None:
    try:
        BatchIn.model_validate(shape)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from None


def _expect_end(text: str, at: int) -> None:
    at = _skip(text, at)
    if at != len(text):
        raise json.JSONDecodeError("Extra data", text, at)


def _skip(text: str, at: int) -> int:
    match = _WS.match(text, at)
    return match.end() if match else at


def _key(text: str, at: int) -> tuple[str, int]:
    if not text.startswith('"', at):
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
    key, end = _DECODER.raw_decode(text, at)
    return str(key), end
