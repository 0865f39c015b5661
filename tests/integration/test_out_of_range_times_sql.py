"""The timestamptz loaders cuemem registers on every connection (workers/db/out_of_range.py): a
time Python cannot hold is read at the edge of its range, and every other time exactly as psycopg
reads it by default, by psycopg's own (compiled, when installed) parser."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import postgres
from psycopg.pq import Format
from sqlalchemy.engine import make_url

from workers.db.out_of_range import (
    EARLIEST,
    LATEST,
    ClampedTimestamptzBinaryLoader,
    ClampedTimestamptzLoader,
    clamp_out_of_range_times,
)

pytestmark = pytest.mark.integration

TIMES = [
    "2026-12-06 10:00:00.123456+08",
    "2026-03-29 01:30:00+00",
    "1999-12-31 23:59:59.999999-05",
    "0001-01-01 00:00:00+00",
    "9999-12-30 23:59:59.999999+00",
]
OUT_OF_RANGE = [("infinity", LATEST), ("-infinity", EARLIEST), ("10000-01-01 00:00+00", LATEST),
                ("294276-01-01 00:00+00", LATEST), ("4713-01-01 00:00+00 BC", EARLIEST)]  # fmt: skip


def _connect(database_url: str) -> psycopg.Connection:
    url = make_url(database_url)
    return psycopg.connect(
        host=url.host, port=url.port, user=url.username, dbname=url.database, password=url.password
    )


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("zone", ["UTC", "Asia/Shanghai"])
def test_times_read_as_psycopg_reads_them_and_out_of_range_times_at_the_edge(
    database_url: str, binary: bool, zone: str
) -> None:
    sql = "SELECT " + ", ".join(f"%s::timestamptz AS t{i}" for i in range(len(TIMES)))
    with _connect(database_url) as plain, _connect(database_url) as clamped:
        clamp_out_of_range_times(clamped)
        for conn in (plain, clamped):
            conn.execute(f"SET TIME ZONE '{zone}'")
        want = plain.cursor(binary=binary).execute(sql, TIMES).fetchone()
        got = clamped.cursor(binary=binary).execute(sql, TIMES).fetchone()
        assert got == want
        assert [t.utcoffset() for t in got] == [t.utcoffset() for t in want]
        for text, edge in OUT_OF_RANGE:
            with pytest.raises(psycopg.DataError):
                plain.cursor(binary=binary).execute("SELECT %s::timestamptz", [text]).fetchone()
            [value] = clamped.cursor(binary=binary).execute("SELECT %s::timestamptz", [text]).fetchone()
            assert value == edge, text


def test_the_loaders_parse_with_psycopgs_default_parser() -> None:
    # A subclass of the pure-Python loader parsed every time in Python: 8 µs a value instead of 1.
    oid = postgres.types["timestamptz"].oid
    for loader, fmt in (
        (ClampedTimestamptzLoader, Format.TEXT),
        (ClampedTimestamptzBinaryLoader, Format.BINARY),
    ):
        default = postgres.adapters.get_loader(oid, fmt)
        assert isinstance(loader(oid)._parse.__self__, default)  # type: ignore[attr-defined]
        if psycopg.pq.__impl__ in ("c", "binary"):
            assert default.__module__.startswith(("psycopg_c", "psycopg_binary"))
