"""Recall as an operator runs it (``cuemem recall``, the demo, the LoCoMo benchmark).

It is ``recall_for`` (which refuses to search an index of another embedding model: the operator
is told to reindex rather than shown wrong neighbours) and, like it, counts as a use only when
asked (``reinforce``): it is how operators inspect memory, and re-running the demo, a benchmark or
a recall must leave the memories as they were.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.operations.recall import recall_for
from workers.bootstrap import Container


def operator_recall(
    container: Container,
    user: str,
    query: str,
    *,
    k: int,
    now: datetime,
    session: str | None,
    budget: int | None = None,
    include_archived: bool = False,
    reinforce: bool = False,
    include_history: bool = False,
) -> dict[str, Any]:
    """`cuemem recall --json` output (plus "prompt")."""
    return recall_for(
        container,
        user,
        query,
        k=k,
        now=now,
        session_id=session,
        budget_tokens=budget,
        include_archived=include_archived,
        reinforce=reinforce,
        include_history=include_history,
    )
