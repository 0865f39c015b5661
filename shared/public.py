"""JSON-ready views of domain values: the dicts that ``--json`` prints and the HTTP API answers.

A view names its fields in the order they are shown, since key order is part of the contract
(clients and tests read the JSON as printed). Every view renders values the same way: a datetime
as its ISO 8601 text, an enum as its value, anything else (None included) as it is. A field that
needs more, such as a rounded score or a copied list, is given its value by the view.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any


def json_ready(value: Any) -> Any:
    """A datetime as ISO 8601 text, an enum as its value, any other value unchanged."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value


def public_fields(obj: object, names: str, /, **given: Any) -> dict[str, Any]:
    """The attributes ``names`` (space-separated, in the order shown) of ``obj``, JSON-ready;
    a field named in ``given`` takes that value instead, at its place in the order."""
    shown = names.split()
    unknown = sorted(given.keys() - set(shown))
    if unknown:
        # A given value for a field that is not shown would be silently dropped.
        raise ValueError(f"values given for fields not shown: {', '.join(unknown)}")
    return {name: given[name] if name in given else json_ready(getattr(obj, name)) for name in shown}
