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

from datetime import UTC, datetime
from typing import Any

from psycopg import DataError
from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader

LATEST = datetime.max.replace(tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)


class ClampedTimestamptzLoader(TimestamptzLoader):
    def load(self, data: Any) -> datetime:
        try:
            return super().load(data)
        except DataError:
            text = bytes(data)
            return EARLIEST if text.startswith(b"-") or text.endswith(b" BC") else LATEST


class ClampedTimestamptzBinaryLoader(TimestamptzBinaryLoader):
    def load(self, data: Any) -> datetime:
        try:
            return super().load(data)
        except DataError:
            # Microseconds since 2000-01-01, a signed 64-bit integer (±infinity are its extremes).
            return EARLIEST if int.from_bytes(bytes(data), "big", signed=True) < 0 else LATEST


def clamp_out_of_range_times(connection: Any) -> None:
    """Register the loaders on one psycopg connection (an engine's ``connect`` event)."""
    connection.adapters.register_loader("timestamptz", ClampedTimestamptzLoader)
    connection.adapters.register_loader("timestamptz", ClampedTimestamptzBinaryLoader)
