"""Read a JSONL file of turns: each line a JSON object, or a reason why it is not one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Line:
    number: int
    data: dict[str, Any] | None
    error: str | None = None


def read_jsonl(path: Path) -> Iterator[Line]:
    """Yield every non-blank line, parsed or with its error; never stop at a bad line."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                yield Line(number, None, f"not valid UTF-8 (at byte {exc.start + 1} of the line)")
                continue
            if number == 1:
                text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                yield Line(number, None, f"invalid JSON ({exc.msg} at column {exc.pos + 1})")
                continue
            except RecursionError:
                yield Line(number, None, "invalid JSON (nested too deeply)")
                continue
            if not isinstance(data, dict):
                yield Line(number, None, f"event: must be a JSON object, got {type(data).__name__}")
                continue
            yield Line(number, data)


def count_lines(path: Path) -> int:
    with open(path, "rb") as handle:
        return sum(1 for raw in handle if raw.strip())
