"""An import is checked like publish (issue 29, finding 2): each value the probe stored through
``POST /v1/import`` (a time in year 9999, seq 2^62 and -5, role ``robot``, stage ``bogus``, 40,000
characters of content, type ``bogus``, status ``pending``, a 3-dimension vector, NaN and infinite
scores, a line nested 100k deep, a lone surrogate) refuses the file naming its line and field;
the file is read a line at a time (a bad line stops the reading there), and its lines are split
from a byte stream as it comes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from shared.events import EventLimits
from shared.transfer import TABLES, ImportFile, ImportRefused, end_line, row_line, split_lines
from shared.transfer_rows import specs
from workers.db.tables import EventRow, HistoryRow, MemoryRow, ReceiptRow

AT = "2026-03-01T10:00:00+00:00"
DIM = 4
MEMORY_ID = "00000000-0000-4000-8000-000000000001"
HEADER = {
    "format": "cuemem-export",
    "version": 1,
    "tenant_id": "acme",
    "user_id": None,
    "embedding_model": "hash",
    "dim": DIM,
    "exported_at": AT,
}


def _event(user: str = "u1", seq: int = 1) -> dict[str, Any]:
    return {
        "tenant_id": "acme", "user_id": user, "event_id": f"e-{user}-{seq}", "session_id": "s1",
        "seq": seq, "role": "user", "content": "I keep bees", "content_hash": "a" * 64, "at": AT,
        "metadata": {}, "stage": "done", "importance": 2.0, "extraction_reasons": [],
        "received_at": AT, "done_at": AT, "stage_at": AT, "embedding": [0.5] * DIM,
        "embedding_model": "hash", "turn_indexed": True, "window_ids": [], "trace_context": None,
        "happened_from": None, "happened_to": None,
    }  # fmt: skip


def _receipt() -> dict[str, Any]:
    return {
        "tenant_id": "acme", "user_id": "u1", "event_id": "e-u1-1", "outcome": "accepted",
        "canonical_event_id": None, "reason": None, "payload": None, "received_at": AT,
    }  # fmt: skip


def _memory() -> dict[str, Any]:
    return {
        "tenant_id": "acme", "user_id": "u1", "id": MEMORY_ID, "type": "fact", "content": "keeps bees",
        "content_hash": "b" * 64, "importance": 3.0, "status": "active", "created_at": AT,
        "updated_at": AT, "last_accessed_at": AT, "access_count": 0, "score": 3.0, "tags": ["bees"],
        "entities": [], "cues": ["bees"], "origin_event_id": "e-u1-1", "embedding": [0.1] * DIM,
        "sources": [{"event_id": "e-u1-1", "session_id": "s1", "seq": 1, "at": AT}],
        "embedding_model": "hash", "version": 1, "indexed_version": 1, "valid_from": AT,
        "valid_to": None, "superseded_by": None, "slot": None, "status_reason": None, "due_at": None,
        "indexed_score": 3.0, "happened_from": None, "happened_to": None,
    }  # fmt: skip


def _history() -> dict[str, Any]:
    return {
        "tenant_id": "acme", "user_id": "u1", "memory_id": MEMORY_ID, "action": "created",
        "related_id": None, "reason": "extracted", "judge": "rules", "event_id": "e-u1-1", "at": AT,
        "details": {}, "recorded_at": AT,
    }  # fmt: skip


def _rows() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("events", _event("u1", 1)),
        ("events", _event("u10", 1)),
        ("event_receipts", _receipt()),
        ("memories", _memory()),
        ("memory_history", _history()),
    ]


def _file(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    counts = {t: sum(1 for table, _ in rows if table == t) for t in TABLES}
    return [json.dumps(HEADER), *(row_line(t, r) for t, r in rows), end_line(counts)]


def _read(lines: list[str] | Iterator[str], batch: int = 500) -> list[tuple[str, list[Any]]]:
    file = ImportFile(lines, EventLimits())
    return list(file.batches(batch))


def test_a_good_file_reads_in_batches_of_one_table() -> None:
    batches = _read(_file(_rows()), batch=1)
    assert [(t, [n for n, _ in b]) for t, b in batches] == [
        ("events", [2]),
        ("events", [3]),
        ("event_receipts", [4]),
        ("memories", [5]),
        ("memory_history", [6]),
    ]
    (_, [(_, memory)]) = batches[3]
    assert memory["created_at"].year == 2026  # times as the database takes them


BAD: list[tuple[int, str, Any, str]] = [
    # (row index in _rows(), column, value, what the refusal says)
    (0, "at", "9999-12-31T23:59:59+00:00", "events.at: '9999-12-31T23:59:59+00:00' is out of range"),
    (0, "seq", 2**62, "events.seq: must be between 1 and 2^53 - 1"),
    (0, "seq", -5, "events.seq: must be between 1 and 2^53 - 1, got -5"),
    (0, "role", "robot", "events.role: 'robot' is not one of user"),
    (0, "stage", "bogus", "events.stage: 'bogus' is not one of recorded"),
    (0, "content", "x" * 40_000, "events.content: is 40000 characters long; the limit is 32000"),
    (0, "content", "lone \ud800 surrogate", "events.content: is not valid UTF-8"),
    (0, "embedding", [0.5, 0.5, 0.5], "events.embedding: has 3 dimensions; its model has 4"),
    (0, "importance", float("nan"), "events.importance: must be a finite number"),
    (0, "metadata", {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}, "events.metadata"),
    (0, "user_id", "u1", None),  # the control: a good value passes
    (0, "at_offset_s", 8 * 3600, None),  # the offset ``at`` was sent with (+08:00)
    (0, "at_offset_s", 24 * 3600, "events.at_offset_s: must be between -86399 and 86399, got 86400"),
    (0, "at_offset_s", "+08:00", "events.at_offset_s: must be an integer"),
    (1, "event_id", "e:1\n", "events.event_id: 'e:1\\n' has characters outside"),
    (2, "outcome", "maybe", "event_receipts.outcome: 'maybe' is not one of accepted"),
    (3, "type", "bogus", "memories.type: 'bogus' is not one of preference"),
    (3, "status", "pending", "memories.status: 'pending' is not one of active"),
    (3, "content", "x" * 40_000, "memories.content: is 40000 characters long; the limit is 32000"),
    (3, "embedding", [0.1, 0.2, 0.3], "memories.embedding: has 3 dimensions; its model has 4"),
    (3, "importance", float("inf"), "memories.importance: must be a finite number between 0 and 10"),
    (3, "score", float("nan"), "memories.score: must be a finite number"),
    (3, "score", True, "memories.score: must be a number"),
    (3, "embedding", [0.1, float("nan"), 0.3, 0.4], "memories.embedding: holds nan"),
    (3, "id", "not-a-uuid", "memories.id: 'not-a-uuid' is not a UUID"),
    (3, "version", 2**40, "memories.version: must be between 1 and 2147483647"),
    (3, "created_at", "yesterday", "memories.created_at: 'yesterday' is not an ISO 8601"),
    (3, "sources", [{"event_id": "e1"}], "memories.sources: [0] must be a string"),
    (3, "happened_from", AT, "memories.happened_to: must follow happened_from"),
    (3, "tags", ["ok", "\x00"], "memories.tags: [1] contains a NUL"),
    (3, "bogus_column", 1, "memories.bogus_column: is not a column of this table"),
    (4, "details", {"k": "\ud800"}, "memory_history.details: is not valid UTF-8"),
    (4, "at", None, "memory_history.at: must not be null"),
]


@pytest.mark.parametrize(("index", "column", "value", "problem"), BAD)
def test_each_bad_value_refuses_the_file_naming_its_line_and_field(
    index: int, column: str, value: Any, problem: str | None
) -> None:
    rows = _rows()
    rows[index] = (rows[index][0], {**rows[index][1], column: value})
    if problem is None:
        assert _read(_file(rows))
        return
    with pytest.raises(ImportRefused) as refused:
        _read(_file(rows))
    assert refused.value.line == index + 2, refused.value
    assert refused.value.problem.startswith(problem), refused.value.problem


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep"),
        ('{"table": "events", "row": ' * 3000 + "{}" + "}" * 3000, "nested too deep"),
        ('{"table": "events", "row": {"seq": ' + "9" * 5000 + "}}", "not a value cuemem can read"),
        (row_line("events", {**_event(), "seq": float("nan")}), "events.seq: must be a positive integer"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_line_json_cannot_hold_as_a_row_is_named_not_a_crash(line: str, problem: str) -> None:
    lines = _file(_rows())
    with pytest.raises(ImportRefused) as refused:
        _read([lines[0], line, *lines[1:]])
    assert refused.value.line == 2 and problem in refused.value.problem, refused.value


def test_the_header_is_checked_as_an_id_and_a_dimension() -> None:
    for head, problem in [
        ({**HEADER, "tenant_id": "ac me"}, "tenant_id 'ac me' has characters outside"),
        ({**HEADER, "user_id": ""}, "user_id must not be empty"),
        ({**HEADER, "dim": 0}, "dim must be an integer between 1 and"),
        ({**HEADER, "dim": True}, "dim must be an integer"),
        ({**HEADER, "embedding_model": "\ud800"}, "embedding_model must be"),
    ]:
        with pytest.raises(ImportRefused, match=f"^line 1: {problem}"):
            ImportFile([json.dumps(head)], EventLimits())


def test_a_row_outside_the_header_scope_is_refused_u1_is_not_u10() -> None:
    rows = _rows()
    head = {**HEADER, "user_id": "u1"}
    with pytest.raises(ImportRefused, match=r"^line 3: row of 'acme'/'u10' outside the header's scope"):
        list(ImportFile([json.dumps(head), *_file(rows)[1:]], EventLimits()).batches(10))
    other = [(t, {**r, "tenant_id": "acme:me"}) if i == 3 else (t, r) for i, (t, r) in enumerate(rows)]
    with pytest.raises(ImportRefused, match=r"^line 5: row of 'acme:me'/'u1' outside"):
        _read(_file(other))


def test_a_redacted_turn_is_read_its_words_erased() -> None:
    rows = _rows()
    rows[0] = (
        "events",
        {**rows[0][1], "content": "", "metadata": {"redacted": True}, "content_hash": "redacted"},
    )
    assert _read(_file(rows))
    rows[0] = ("events", {**rows[0][1], "metadata": {}})
    with pytest.raises(ImportRefused, match=r"^line 2: events.content: must not be empty"):
        _read(_file(rows))


def test_the_file_is_read_as_it_is_checked_a_bad_line_stops_the_reading() -> None:
    """Nothing reads ahead: a bad line 3 of a file of a million lines is refused after line 3 was
    read, the lines after it never pulled (the import held one batch, not the file)."""
    pulled = []

    def lines() -> Iterator[str]:
        good = _file(_rows())
        yield good[0]
        yield good[1]
        yield "{broken"
        for n in range(1_000_000):
            pulled.append(n)
            yield good[2]

    with pytest.raises(ImportRefused, match="^line 3: not JSON"):
        _read(lines())
    assert pulled == []


def test_batches_are_handed_out_before_the_file_is_read_to_its_end() -> None:
    good = _file([("events", _event("u1", n)) for n in range(1, 2001)])
    consumed = 0

    def lines() -> Iterator[str]:
        nonlocal consumed
        for line in good:
            consumed += 1
            yield line

    batches = ImportFile(lines(), EventLimits()).batches(500)
    table, first = next(batches)
    assert (table, len(first)) == ("events", 500) and consumed <= 502
    assert sum(len(b) for _, b in batches) == 1500
    # Long lines cut a batch sooner: it holds a bounded number of characters, not only of rows.
    sizes = [len(b) for _, b in ImportFile(good, EventLimits()).batches(500, max_chars=3 * len(good[1]))]
    assert sizes == [3] * 666 + [2]


def test_the_end_line_is_checked_after_the_last_batch() -> None:
    lines = _file(_rows())
    with pytest.raises(ImportRefused, match=r"^line 6: the file ends without its end line"):
        _read(lines[:-1])
    with pytest.raises(ImportRefused, match=r"^line 9: a line after the end line"):
        _read([*lines, "", lines[1]])
    counts = json.loads(lines[-1])
    counts["rows"]["events"] = 3
    with pytest.raises(ImportRefused, match=r"^line 7: the end line counts"):
        _read([*lines[:-1], json.dumps(counts)])


def test_lines_are_split_from_bytes_as_they_come() -> None:
    text = "ab\r\ncé\u2028d\n\nlast".encode()
    # Every cut, even one inside the two bytes of é.
    for cut in range(1, len(text)):
        assert list(split_lines([text[:cut], text[cut:]])) == ["ab", "cé\u2028d", "", "last"]
    with pytest.raises(ImportRefused, match=r"^line 2: not UTF-8"):
        list(split_lines([b"ok\n", b"\xff\xfe\n"]))
    with pytest.raises(ImportRefused, match=r"^line 4: not UTF-8"):  # in the chunk of lines 2 to 5
        list(split_lines([b"ok\n", b"a\nb\nc\xe9\nd\n"]))
    with pytest.raises(ImportRefused, match=r"^line 2: not UTF-8"):  # cut inside a character
        list(split_lines([b"ok\nab\xc3", b"(\n"]))
    with pytest.raises(ImportRefused, match=r"^line 2: longer than 10 characters"):
        list(split_lines([b"ok\n", b"x" * 6, b"x" * 6, b"\n"], max_chars=10))
    held = []

    def chunks() -> Iterator[bytes]:
        for n in range(1000):
            held.append(n)
            yield b'{"n": 1}\n'

    lines = split_lines(chunks())
    assert next(lines) == '{"n": 1}' and held == [0]  # one chunk read, not the stream


def test_the_checks_know_every_column_the_tables_have() -> None:
    """The import's column checks and the tables agree: a column added to a table without its
    check (or the other way round) fails here."""
    tables = {
        "events": EventRow,
        "event_receipts": ReceiptRow,
        "memories": MemoryRow,
        "memory_history": HistoryRow,
    }
    checks = specs(EventLimits(), DIM)
    for name, row in tables.items():
        columns = {c.name for c in row.__table__.columns} - ({"id"} if name == "memory_history" else set())
        assert set(checks[name]) == columns, name
