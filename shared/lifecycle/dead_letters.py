"""Whose is a dead letter: read from its task and its arguments' shape, never by a loose match.

A dead letter stores the task it parked and that task's arguments; it has no tenant or user
column (the pipeline parks what it could not even parse). Two readers need to know whose it is:
the privacy delete (how much of it is the user's) and the inspector, which shows a tenant's key
only the letters of that tenant.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Literal

from shared.events import split_ref
from shared.queues import TaskName

Share = Literal["all", "some", "none"]
# Tasks whose first two arguments are (tenant, user); memory.reinforce has the recall id first.
# The two sweeps are there for the letters of the users they skipped (``shared.bad_rows``).
_USER_FIRST = {
    TaskName.RECONCILE,
    TaskName.CONSOLIDATE,
    TaskName.SYNC_INDEX,
    TaskName.DELETE_POINTS,
    TaskName.ERASE_POINTS,
    TaskName.SEARCH,
    TaskName.SEARCH_BATCH,
}
_EVENT_FIRST = {TaskName.EXTRACT, TaskName.EMBED, TaskName.PERSIST, TaskName.RESOLVE}


def dead_letter_share(
    task: str, args: list[Any], tenant_id: str, user_id: str, events: Set[str]
) -> tuple[Share, list[Any] | None]:
    """How much of a dead letter is the user's: ``all`` (delete it), ``some`` (a batch of several
    users: the arguments without the user's part are returned, to keep the rest replayable) or
    ``none``. By the letter's task and its arguments' shape, never by a loose match: an event id
    is the user's only as one of ``events`` (the user's stored events) in a task that takes event
    ids, and a turn only by its own tenant and user."""

    def mine(message: Any) -> bool:
        owner = (message.get("tenant_id"), message.get("user_id")) if isinstance(message, dict) else None
        return owner == (tenant_id, user_id)

    def my_event(value: Any) -> bool:
        # A stage names the event by its pipeline key (tenant and event id); a message queued
        # before 0017, by the event id alone.
        if not isinstance(value, str):
            return False
        tenant, event_id = split_ref(value)
        return tenant in (None, tenant_id) and event_id in events

    first = args[0] if args else None
    if task == TaskName.RECORD:
        return ("all", None) if mine(first) else ("none", None)
    if task in _USER_FIRST:
        return ("all", None) if args[:2] == [tenant_id, user_id] else ("none", None)
    if task == TaskName.REINFORCE:
        return ("all", None) if args[1:3] == [tenant_id, user_id] else ("none", None)
    if task in _EVENT_FIRST:
        return ("all", None) if my_event(first) else ("none", None)
    if task in (TaskName.RECORD_BATCH, TaskName.INDEX) and isinstance(first, list):
        batch = task == TaskName.RECORD_BATCH
        ours = [i for i in first if (mine(i) if batch else my_event(i))]
        if not ours:
            return "none", None
        if len(ours) == len(first):
            return "all", None
        return "some", [[i for i in first if i not in ours], *args[1:]]
    return "none", None


def dead_letter_tenants(task: str, args: list[Any], event_tenants: Mapping[str, str]) -> set[str] | None:
    """The tenants a dead letter's arguments name, or None when its shape says nothing of one
    (a sweep, an unknown task, an event id not stored). ``event_tenants`` maps the stored event
    ids among its arguments to their tenant."""

    def of_event(value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        tenant, event_id = split_ref(value)  # a pipeline key names its tenant
        return tenant if tenant is not None else event_tenants.get(event_id)

    def of_turn(message: Any) -> str | None:
        tenant = message.get("tenant_id") if isinstance(message, dict) else None
        return tenant if isinstance(tenant, str) else None

    first = args[0] if args else None
    named: list[str | None]
    if task == TaskName.RECORD:
        named = [of_turn(first)]
    elif task in _USER_FIRST:
        named = [first if isinstance(first, str) else None]
    elif task == TaskName.REINFORCE:
        named = [args[1] if len(args) > 1 and isinstance(args[1], str) else None]
    elif task in _EVENT_FIRST:
        named = [of_event(first)]
    elif task in (TaskName.RECORD_BATCH, TaskName.INDEX) and isinstance(first, list):
        named = [of_turn(i) if task == TaskName.RECORD_BATCH else of_event(i) for i in first]
    else:
        return None
    if not named or any(t is None for t in named):
        return None
    return {t for t in named if t is not None}


def event_ids_named(task: str, args: list[Any]) -> list[str]:
    """The bare event ids a dead letter's arguments hold, to look their tenants up (a pipeline key
    names its tenant itself)."""
    first = args[0] if args else None
    named = [first] if task in _EVENT_FIRST else first if task == TaskName.INDEX else []
    if not isinstance(named, list):
        return []
    return [i for i in named if isinstance(i, str) and split_ref(i)[0] is None]
