"""The checks of a stored field that a published turn does not have: a memory's type and status, an
event's stage, a score, a vector of the deployment's dimension, a time, a list of words, a JSON
document. The API (``shared/lifecycle/curation.py``) and the import (``shared/transfer_rows.py``)
both check through these, so one value gets one answer wherever it comes from; the fields a turn
has (ids, seq, role, content, at, metadata) are checked by ``shared.events`` alone.

Each check returns the value as it is stored, or raises :class:`FieldProblem` with the reason
(the caller names the field).
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from shared.events import MAX_METADATA_DEPTH, bounded_at, id_problem, nesting_depth, text_problem

# The largest value of a Postgres INTEGER column (versions, access counts).
MAX_INT4 = 2**31 - 1
E = TypeVar("E", bound=StrEnum)


class FieldProblem(ValueError):
    """Why a value cannot be stored in its field (without the field's name)."""


def choice(value: Any, kind: type[E], allowed: Iterable[E] | None = None) -> E:
    """One of the enum's values (of ``allowed`` ones, when given)."""
    names = [member.value for member in (kind if allowed is None else allowed)]
    if not isinstance(value, str) or value not in names:
        raise FieldProblem(f"{value!r:.40} is not one of {', '.join(names)}")
    return kind(value)


def number(value: Any, low: float, high: float) -> float:
    """A finite number between ``low`` and ``high``: NaN and the infinities are refused (the
    ranking arithmetic and the index payload cannot hold them)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldProblem(f"must be a number, got {value!r:.40}")
    if not math.isfinite(value) or not low <= value <= high:
        raise FieldProblem(f"must be a finite number between {low:g} and {high:g}, got {value!r:.40}")
    return float(value)


def integer(value: Any, low: int, high: int = MAX_INT4) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldProblem(f"must be an integer, got {value!r:.40}")
    if not low <= value <= high:
        raise FieldProblem(f"must be between {low} and {high}, got {value}")
    return value


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise FieldProblem(f"must be true or false, got {value!r:.40}")
    return value


def instant(value: Any) -> datetime:
    """A zoned ISO 8601 time between 1970 and 2200 (``shared.events.bounded_at``, as publish)."""
    try:
        return bounded_at(value)
    except ValueError as exc:
        raise FieldProblem(str(exc)) from None


def text(value: Any, max_chars: int, *, empty: bool = False) -> str:
    """A string Postgres can store (no NUL, no lone surrogate), not longer than ``max_chars``."""
    if not isinstance(value, str):
        raise FieldProblem(f"must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise FieldProblem("must not be empty")
    if len(value) > max_chars:
        raise FieldProblem(f"is {len(value)} characters long; the limit is {max_chars}")
    if (problem := text_problem(value)) is not None:
        raise FieldProblem(problem)
    return value


def identifier(value: Any, max_chars: int) -> str:
    """An id as the API takes it (``shared.events.id_problem``)."""
    if not isinstance(value, str):
        raise FieldProblem(f"must be a string, got {type(value).__name__}")
    if (problem := id_problem(value, max_chars)) is not None:
        raise FieldProblem(problem)
    return value


def uuid_text(value: Any) -> str:
    """An id cuemem made (memories): a UUID in its canonical form."""
    try:
        canonical = str(uuid.UUID(value)) if isinstance(value, str) else None
    except ValueError:
        canonical = None
    if canonical != value:
        raise FieldProblem(f"{value!r:.60} is not a UUID in canonical form")
    return value


def sha256_hex(value: Any, *also: str) -> str:
    if isinstance(value, str) and (
        value in also or (len(value) == 64 and set(value) <= set("0123456789abcdef"))
    ):
        return value
    raise FieldProblem(f"{value!r:.70} is not a SHA-256 digest in lowercase hex")


def words(value: Any, max_chars: int, max_items: int = 10_000) -> list[str]:
    """A list of non-empty strings (tags, cues, entities, event ids of a window)."""
    if not isinstance(value, list):
        raise FieldProblem(f"must be a list of strings, got {type(value).__name__}")
    if len(value) > max_items:
        raise FieldProblem(f"holds {len(value)} items; the limit is {max_items}")
    for i, item in enumerate(value):
        try:
            text(item, max_chars)
        except FieldProblem as exc:
            raise FieldProblem(f"[{i}] {exc}") from None
    return value


def vector(value: Any, dim: int) -> list[float]:
    """A vector of ``dim`` finite numbers (the dimension of the model that made it)."""
    if not isinstance(value, list):
        raise FieldProblem(f"must be a list of numbers, got {type(value).__name__}")
    if len(value) != dim:
        raise FieldProblem(f"has {len(value)} dimensions; its model has {dim}")
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise FieldProblem(f"holds {x!r:.40}: every component must be a finite number")
    return [float(x) for x in value]


def document(value: Any, max_bytes: int, max_depth: int = MAX_METADATA_DEPTH) -> Any:
    """A JSON document (JSONB): nested no deeper than ``max_depth``, finite numbers only, every
    text storable, at most ``max_bytes`` as JSON."""
    if nesting_depth(value, max_depth) > max_depth:
        raise FieldProblem(f"is nested deeper than {max_depth} levels")
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise FieldProblem(f"is not JSON-serialisable ({exc})") from None
    if "\\u0000" in encoded:
        raise FieldProblem("contains a NUL character")
    if (problem := text_problem(encoded)) is not None:
        raise FieldProblem(problem)
    if len(encoded.encode("utf-8")) > max_bytes:
        raise FieldProblem(f"is larger than {max_bytes} bytes as JSON")
    return value
