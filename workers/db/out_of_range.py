"""Times Postgres holds and Python cannot: read at the edge of Python's range, not raised.

Postgres keeps timestamps up to year 294276 and ``±infinity``; Python's ``datetime`` ends at year
9999, and psycopg raises ``DataError`` on reading anything past it. One such row (a turn stored at
year 10000 before the API bounded ``at``, a value written by hand) made every read of its user's
rows fail: the index repair of every tenant, the stalled sweep and the timeline. psycopg's own
recipe for this is a loader that maps the out-of-range values to ``datetime.min``/``max``
(https://www.psycopg.org/psycopg3/docs/basic/adapt.html, "Example: handling infinity date"): the
row is read, sorts last (or first) as it does in Postgres, and shows a time no one mistakes for a
real one. Nothing is written back unless the row itself is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from psycopg import DataError, abc, postgres
from psycopg.adapt import Loader
from psycopg.pq import Format

LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)

_TIMESTAMPTZ = postgres.types["timestamptz"].oid


def _default(fmt: Format) -> type[abc.Loader]:
    loader = postgres.adapters.get_loader(_TIMESTAMPTZ, fmt)
    if loader is None:  # psycopg registers both formats at import
        raise RuntimeError(f"psycopg has no timestamptz loader for {fmt.name}")
    return loader


def _edge_of_text(data: bytes) -> datetime:
    return EARLIEST if data.startswith(b"-") or data.endswith(b" BC") else LATEST


def _edge_of_binary(data: bytes) -> datetime:
    # Microseconds since 2000-01-01, a signed 64-bit integer (±infinity are its extremes).
    return EARLIEST if int.from_bytes(data, "big", signed=True) < 0 else LATEST


class _Clamped(Loader):
    """Parses with psycopg's default loader for the format, the compiled one when psycopg's C
    implementation is installed, and clamps what it refuses. Not a subclass of it: the compiled
    classes cannot be subclassed, and a subclass of the pure-Python loader parsed every timestamp in
    Python, 8 µs a value against 1 µs (about 1,500 values in a recall's re-reads)."""

    format: Format
    parses: type[abc.Loader]  # psycopg's default loader of ``timestamptz`` in ``format``
    edge: Callable[[bytes], datetime]  # the value for a time the parser refuses

    def __init__(self, oid: int, context: abc.AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        self._parse = self.parses(oid, context).load

    def load(self, data: Any) -> datetime:
        try:
            return self._parse(data)  # type: ignore[no-any-return]
        except DataError:
            return self.edge(bytes(data))


class ClampedTimestamptzLoader(_Clamped):
    format = Format.TEXT
    parses = _default(Format.TEXT)
    edge = staticmethod(_edge_of_text)


class ClampedTimestamptzBinaryLoader(_Clamped):
    format = Format.BINARY
    parses = _default(Format.BINARY)
    edge = staticmethod(_edge_of_binary)


def clamp_out_of_range_times(connection: Any) -> None:
    """Register the loaders on one psycopg connection (an engine's ``connect`` event)."""
    connection.adapters.register_loader("timestamptz", ClampedTimestamptzLoader)
    connection.adapters.register_loader("timestamptz", ClampedTimestamptzBinaryLoader)
