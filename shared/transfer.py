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
dead letters, LLM call records, recall claims.

Import checks every line before it writes anything, and then writes in one transaction: a row
whose id exists already (the same file imported twice) is kept as it is, so an import is
idempotent; an id that exists for another user (or, for a memory id, another tenant) refuses the
whole file. Event ids are unique per tenant only: another tenant's turn with the same id is no
clash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.events import id_problem

# Ids are checked as the API checks them (``shared.events.id_problem``; the importing deployment
# passes its own limit): an id no command could name again is refused.
MAX_ID_CHARS = 512
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
    if not isinstance(value, dict):
        raise ImportRefused(number, "not a JSON object")
    return value


def parse_header(line: str | None) -> Header:
    if line is None or not line.strip():
        raise ImportRefused(1, "empty file: the first line must be the cuemem-export header")
    head = _load(1, line)
    if head.get("format") != FORMAT:
        raise ImportRefused(1, f"format {head.get('format')!r} is not {FORMAT!r}")
    if head.get("version") != VERSION:
        raise ImportRefused(
            1, f"format version {head.get('version')!r} is not supported; this cuemem reads version {VERSION}"
        )
    tenant, user, model, dim = (head.get(k) for k in ("tenant_id", "user_id", "embedding_model", "dim"))
    if not isinstance(tenant, str) or not (user is None or isinstance(user, str)):
        raise ImportRefused(1, "tenant_id must be a string and user_id a string or null")
    if not isinstance(model, str) or not isinstance(dim, int):
        raise ImportRefused(1, "embedding_model must be a string and dim an integer")
    return Header(tenant, user, model, dim)


def parse_rows(
    lines: list[tuple[int, str]], header: Header, max_id_chars: int = MAX_ID_CHARS
) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Every row line, checked (table known, in order, in the header's tenant and user), by table
    with its line number; the end line last, its counts those of the rows."""
    by_table: dict[str, list[tuple[int, dict[str, Any]]]] = {t: [] for t in TABLES}
    last = 0
    items = [(number, _load(number, line)) for number, line in lines if line.strip()]
    if not items or items[-1][1].get("end") is not True:
        at = items[-1][0] if items else 1
        raise ImportRefused(at, "the file ends without its end line: it was cut short")
    end_at, end = items.pop()
    for number, item in items:
        table, row = item.get("table"), item.get("row")
        if table not in by_table or not isinstance(row, dict):
            raise ImportRefused(number, f"expected {{'table': one of {list(TABLES)}, 'row': {{...}}}}")
        order = TABLES.index(table)
        if order < last:
            raise ImportRefused(
                number, f"a {table} row after {TABLES[last]} rows: tables come in the order {list(TABLES)}"
            )
        last = order
        if row.get("tenant_id") != header.tenant_id or (
            header.user_id is not None and row.get("user_id") != header.user_id
        ):
            raise ImportRefused(
                number, f"row of {row.get('tenant_id')!r}/{row.get('user_id')!r} outside the header's scope"
            )
        for column in ("tenant_id", "user_id", "session_id", "event_id"):
            value = row.get(column)
            if column in row or column in ("tenant_id", "user_id"):
                problem = id_problem(value, max_id_chars) if isinstance(value, str) else "must be a string"
                if problem is not None and not (
                    column == "event_id" and table == "memory_history" and value is None
                ):
                    raise ImportRefused(number, f"{table}.{column} {problem}")
        by_table[table].append((number, row))
    found = {t: len(rows) for t, rows in by_table.items()}
    if end.get("rows") != found:
        raise ImportRefused(end_at, f"the end line counts {end.get('rows')}, the file holds {found}")
    return by_table


def file_lines(text: str) -> list[str]:
    """A file's lines: split at newlines only (a JSON string may hold U+2028 and other
    separators that ``str.splitlines`` would split at)."""
    return [line.removesuffix("\r") for line in text.split("\n")]


class TransferRepository(Protocol):
    """Rows column for column, in a unit of work (``uow.transfer``)."""

    def pin_snapshot(self) -> None:
        """Read one snapshot for the rest of the unit (call first): an export's tables agree."""

    def export_rows(self, table: str, tenant_id: str, user_id: str | None) -> Iterator[dict[str, Any]]:
        """The tenant's (or the user's) rows of ``table``, JSON-safe, in a stable order."""

    def import_rows(self, table: str, rows: Sequence[tuple[int, dict[str, Any]]]) -> set[str]:
        """Insert the rows the table does not hold; the keys inserted. Raises ImportRefused."""

    def drop_vectors(self, memory_ids: Sequence[str]) -> list[tuple[str, str]]:
        """Clear these memories' vectors; their (id, content), to embed again."""

    def set_memory_vectors(self, vectors: dict[str, list[float]], model: str) -> None: ...

    def mark_unindexed(self, tenant_id: str, memory_ids: Sequence[str], event_ids: Sequence[str]) -> None:
        """These rows of the tenant get their points at the next push (event ids are unique per
        tenant only)."""
