"""The export format (``cuemem export`` / ``cuemem import``, ``GET /v1/export`` / ``POST /v1/import``):
JSON Lines, format ``cuemem-export`` version 1.

Line 1 is the header::

    {"format": "cuemem-export", "version": 1, "tenant_id": "acme", "user_id": "u1" | null,
     "embedding_model": "intfloat/multilingual-e5-small", "dim": 384, "exported_at": "…"}

Every other line is one row of one table, in this order (what a row names comes first)::

    {"table": "events" | "event_receipts" | "memories" | "memory_history", "row": {column: value}}

The last line closes the file, so that a file cut short is refused rather than half imported::

    {"end": true, "rows": {"events": 12, "event_receipts": 12, "memories": 5, "memory_history": 7}}

A row holds every column of its table as Postgres has it (times in ISO 8601 with offset, vectors as
lists of floats, ``memory_history`` without its serial id): events keep their seq, stage and
vector, memories their status, history, sources, scores and versions. Derived state is not
exported: cue counts (kept by a trigger), index points (pushed after an import), working memory,
dead letters, LLM call records, recall claims, memory drafts still in the pipeline (``pending``).

Import reads the file a line at a time (``split_lines``, ``ImportFile``) and checks each row as
publish and the API check their fields (``shared/transfer_rows.py``) before it is written, a batch
at a time, all in one transaction that commits after the end line: a bad line anywhere refuses the
whole file, naming the line and the column, and nothing is written. A row whose id exists already
(the same file imported twice) is kept as it is, so an import is idempotent; an event id held by
another user of the tenant refuses the file. Event ids are unique per tenant only: another
tenant's turn with the same id is no clash. Memory ids are made the tenant's own: a file's memory
id stays only when the importing user holds it already, any other becomes
``shared.models.imported_memory_id``, so what an import answers never depends on another tenant.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.events import EventLimits, InvalidEvent, id_problem, text_problem
from shared.transfer_rows import MAX_LINE_CHARS, check_row, specs

# Ids are checked as the API checks them (``shared.events.id_problem``; the importing deployment
# passes its own limit): an id no command could name again is refused.
MAX_ID_CHARS = 512
MAX_DIM = 65_536
BATCH_CHARS = 2 << 20  # the characters of the lines of one batch, at most (beyond its last line)
FORMAT = "cuemem-export"
VERSION = 1
TABLES = ("events", "event_receipts", "memories", "memory_history")


class ImportRefused(ValueError):
    """The file cannot be imported; ``line`` (1-based, 0 for the file as a whole) says where."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}" if line else problem)
        self.line = line
        self.problem = problem


@dataclass(frozen=True)
class Header:
    tenant_id: str
    user_id: str | None
    embedding_model: str
    dim: int

    def to_line(self, exported_at: str) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "tenant_id": self.tenant_id,
                "user_id": self.user_id,
                "embedding_model": self.embedding_model,
                "dim": self.dim,
                "exported_at": exported_at,
            },
            ensure_ascii=False,
        )


def row_line(table: str, row: dict[str, Any]) -> str:
    return json.dumps({"table": table, "row": row}, ensure_ascii=False, separators=(",", ":"))


def end_line(counts: dict[str, int]) -> str:
    return json.dumps({"end": True, "rows": counts})


def _load(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportRefused(number, f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ImportRefused(number, "nested too deep to be a row of an export") from None
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise ImportRefused(number, f"not a value cuemem can read ({str(exc)[:80]})") from None
    if not isinstance(value, dict):
        raise ImportRefused(number, "not a JSON object")
    return value


def parse_header(line: str | None, max_id_chars: int = MAX_ID_CHARS) -> Header:
    if line is None or not line.strip():
        raise ImportRefused(1, "empty file: the first line must be the cuemem-export header")
    head = _load(1, line)
    if head.get("format") != FORMAT:
        raise ImportRefused(1, f"format {str(head.get('format'))[:40]!r} is not {FORMAT!r}")
    if head.get("version") != VERSION:
        raise ImportRefused(
            1,
            f"format version {head.get('version')!r:.20} is not supported; "
            f"this cuemem reads version {VERSION}",
        )
    tenant, user, model, dim = (head.get(k) for k in ("tenant_id", "user_id", "embedding_model", "dim"))
    if not isinstance(tenant, str) or not (user is None or isinstance(user, str)):
        raise ImportRefused(1, "tenant_id must be a string and user_id a string or null")
    for name, value in (("tenant_id", tenant), ("user_id", user)):
        if value is not None and (problem := id_problem(value, max_id_chars)) is not None:
            raise ImportRefused(1, f"{name} {problem}")
    if (
        not isinstance(model, str)
        or (problem := text_problem(model)) is not None
        or not 0 < len(model) <= 200
    ):
        raise ImportRefused(1, "embedding_model must be a model's name (a string of 1 to 200 characters)")
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 < dim <= MAX_DIM:
        raise ImportRefused(1, f"dim must be an integer between 1 and {MAX_DIM}")
    return Header(tenant, user, model, dim)


Batch = list[tuple[int, dict[str, Any]]]


class ImportFile:
    """An export read line by line: the header at once, then the rows in batches of one table,
    each row checked (``shared/transfer_rows.py``) and in the header's scope, as they are read.
    Nothing is held but the batch being handed out, so a file of any size costs one batch; the end
    line is checked after the last batch, so the caller must write all batches in one transaction
    and commit only when ``batches`` has finished (a bad line late in the file writes nothing)."""

    def __init__(self, lines: Iterable[str], limits: EventLimits) -> None:
        self._lines = enumerate(lines, start=1)
        self.limits = limits
        first = next(self._lines, None)
        self.header = parse_header(first[1] if first else None, limits.max_id_chars)
        self.counts = dict.fromkeys(TABLES, 0)
        self._specs = specs(limits, self.header.dim)

    def batches(self, size: int, max_chars: int = BATCH_CHARS) -> Iterator[tuple[str, Batch]]:
        """Batches of at most ``size`` rows of one table, cut sooner when their lines reach
        ``max_chars`` characters (a line may hold 32,000 characters of content and a vector)."""
        batch: Batch = []
        chars = 0
        table = TABLES[0]
        last = 1  # the last line that is not blank
        for number, line in self._lines:
            if not line.strip():
                continue
            last = number
            item = _load(number, line)
            if item.get("end") is True:
                self._check_end(number, item)
                if batch:
                    yield table, batch
                return
            row = self._row(number, item, table)
            if item["table"] != table and batch:
                yield table, batch
                batch, chars = [], 0
            table = item["table"]
            self.counts[table] += 1
            batch.append((number, row))
            chars += len(line)
            if len(batch) >= size or chars >= max_chars:
                yield table, batch
                batch, chars = [], 0
        raise ImportRefused(last, "the file ends without its end line: it was cut short")

    def _row(self, number: int, item: dict[str, Any], current: str) -> dict[str, Any]:
        table, row = item.get("table"), item.get("row")
        if table not in TABLES or not isinstance(row, dict):
            raise ImportRefused(number, f"expected {{'table': one of {list(TABLES)}, 'row': {{...}}}}")
        if TABLES.index(table) < TABLES.index(current):
            raise ImportRefused(
                number, f"a {table} row after {current} rows: tables come in the order {list(TABLES)}"
            )
        header = self.header
        if row.get("tenant_id") != header.tenant_id or (
            header.user_id is not None and row.get("user_id") != header.user_id
        ):
            owner = f"{str(row.get('tenant_id'))[:40]!r}/{str(row.get('user_id'))[:40]!r}"
            raise ImportRefused(number, f"row of {owner} outside the header's scope")
        try:
            return check_row(table, row, self._specs[table], self.limits)
        except InvalidEvent as exc:
            raise ImportRefused(number, str(exc.errors[0])) from None

    def _check_end(self, number: int, end: dict[str, Any]) -> None:
        for later, line in self._lines:
            if line.strip():
                raise ImportRefused(later, "a line after the end line")
        if end.get("rows") != self.counts:
            raise ImportRefused(
                number, f"the end line counts {str(end.get('rows'))[:200]}, the file holds {self.counts}"
            )


def split_lines(chunks: Iterable[bytes], max_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """The lines of a file read in chunks of bytes, decoded as UTF-8 as they come and split at
    newlines only (a JSON string may hold U+2028 and other separators that ``str.splitlines``
    would split at); raises ImportRefused naming the line that is not UTF-8 or is too long."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending: list[str] = []
    held = 0
    number = 1
    for chunk in chunks:
        held_bytes, _ = decoder.getstate()
        try:
            text = decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            # The line of the bad byte: the lines of this chunk before it end before it.
            at = number + (held_bytes + chunk)[: exc.start].count(b"\n")
            raise ImportRefused(at, f"not UTF-8 ({exc.reason})") from None
        *complete, rest = text.split("\n")
        for part in complete:
            line = "".join([*pending, part]) if pending else part
            pending, held = [], 0
            if len(line) > max_chars:
                raise ImportRefused(number, f"longer than {max_chars} characters")
            yield line.removesuffix("\r")
            number += 1
        pending.append(rest)
        held += len(rest)
        if held > max_chars:
            raise ImportRefused(number, f"longer than {max_chars} characters")
    try:
        rest = "".join(pending) + decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ImportRefused(number, f"not UTF-8 ({exc.reason})") from None
    if rest:
        yield rest.removesuffix("\r")


def file_lines(text: str) -> list[str]:
    """A text's lines, split as ``split_lines`` splits (tests and small inputs)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


class TransferRepository(Protocol):
    """Rows column for column, in a unit of work (``uow.transfer``)."""

    def pin_snapshot(self) -> None:
        """Read one snapshot for the rest of the unit (call first): an export's tables agree."""

    def export_rows(self, table: str, tenant_id: str, user_id: str | None) -> Iterator[dict[str, Any]]:
        """The tenant's (or the user's) rows of ``table``, JSON-safe, in a stable order."""

    def import_rows(self, table: str, rows: Sequence[tuple[int, dict[str, Any]]]) -> set[str]:
        """Insert the rows the table does not hold; the keys inserted. Raises ImportRefused."""

    def held_memory_ids(self, tenant_id: str, memory_ids: Sequence[str]) -> set[tuple[str, str]]:
        """(user, id) of the memories of these ids that the tenant holds; no other tenant's."""

    def drop_vectors(self, memory_ids: Sequence[str]) -> list[tuple[str, str]]:
        """Clear these memories' vectors; their (id, content), to embed again."""

    def set_memory_vectors(self, vectors: dict[str, list[float]], model: str) -> None: ...

    def mark_unindexed(self, tenant_id: str, memory_ids: Sequence[str], event_ids: Sequence[str]) -> None:
        """These rows of the tenant get their points at the next push (event ids are unique per
        tenant only)."""
