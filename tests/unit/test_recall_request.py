"""The one parser of a recall (shared.recall.request.parse_recall): each rule, and a bad value names
its field. The HTTP API, MCP and the CLI answer with these errors (tests/integration/
test_recall_entry_points.py checks that they do)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shared.events import InvalidInput
from shared.models import MemoryStatus
from shared.recall.request import MAX_BUDGET_TOKENS, MAX_K, MAX_QUERY_CHARS, RecallAsk, parse_recall

GOOD: dict[str, Any] = {"user_id": "u1", "query": "我不吃什么？"}


def _problems(**values: Any) -> dict[str, str]:
    with pytest.raises(InvalidInput) as err:
        parse_recall(**{**GOOD, **values})
    assert isinstance(err.value, ValueError)  # the library's callers catch ValueError
    return {e.field: e.problem for e in err.value.errors}


@pytest.mark.parametrize(
    ("values", "field", "problem"),
    [
        # ids: as a published turn's (shared.events.id_problem), with the deployment's length limit
        ({"user_id": ""}, "user_id", "must not be empty"),
        ({"user_id": "u 1"}, "user_id", "'u 1' has characters outside letters, digits"),
        ({"user_id": "u" * 129}, "user_id", "is 129 characters long; the limit is 128"),
        ({"user_id": "u" * 11, "max_id_chars": 10}, "user_id", "the limit is 10"),
        ({"user_id": "u1\x00"}, "user_id", "has characters outside"),
        ({"tenant_id": "acme corp"}, "tenant_id", "has characters outside"),
        ({"tenant_id": ""}, "tenant_id", "must not be empty"),
        ({"session_id": "a/b"}, "session_id", "'a/b' has characters outside"),
        ({"session_id": ""}, "session_id", "must not be empty"),
        # the query: not blank, not too long, storable text
        ({"query": ""}, "query", "must not be empty"),
        ({"query": " \n\t"}, "query", "must not be empty"),
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "query", f"the limit is {MAX_QUERY_CHARS}"),
        ({"query": "a\x00b"}, "query", "contains a NUL character"),
        ({"query": "a\ud800b"}, "query", "lone surrogate"),
        # k: 1 to MAX_K, or to a lower bound the caller promises (the agent tools' 20)
        ({"k": 0}, "k", f"must be between 1 and {MAX_K}, got 0"),
        ({"k": -3}, "k", f"must be between 1 and {MAX_K}, got -3"),
        ({"k": MAX_K + 1}, "k", f"must be between 1 and {MAX_K}, got {MAX_K + 1}"),
        ({"k": 21, "max_k": 20}, "k", "must be between 1 and 20, got 21"),
        # now: ISO 8601 with a time zone, 1970 to 2200
        ({"now": "yesterday"}, "now", "'yesterday' is not an ISO 8601 timestamp"),
        ({"now": ""}, "now", "must be an ISO 8601 timestamp string"),
        ({"now": "2026-11-01T10:00:00"}, "now", "has no timezone; add an offset such as +00:00 or Z"),
        ({"now": datetime(2026, 11, 1, 10)}, "now", "has no timezone"),
        ({"now": "0001-01-01T00:00:00Z"}, "now", "is out of range"),
        ({"now": "9999-12-31T23:59:59Z"}, "now", "is out of range"),
        ({"now": "1969-07-20T20:17:00Z"}, "now", "is out of range"),
        # the token budget: 1 to MAX_BUDGET_TOKENS, when given
        ({"budget_tokens": 0}, "budget_tokens", f"must be between 1 and {MAX_BUDGET_TOKENS}, got 0"),
        ({"budget_tokens": MAX_BUDGET_TOKENS + 1}, "budget_tokens", "must be between 1 and"),
    ],
)
def test_each_rule_refuses_a_bad_value_naming_its_field(
    values: dict[str, Any], field: str, problem: str
) -> None:
    problems = _problems(**values)
    assert list(problems) == [field], problems
    assert problem in problems[field], problems


def test_every_problem_is_named_at_once_in_a_fixed_order() -> None:
    problems = _problems(
        user_id="", tenant_id="a b", session_id="s/1", query="", k=0, now="yesterday", budget_tokens=0
    )
    assert list(problems) == ["user_id", "tenant_id", "session_id", "query", "k", "now", "budget_tokens"]


def test_good_values_and_the_bounds_themselves_are_accepted() -> None:
    assert parse_recall(**GOOD) == RecallAsk(user_id="u1", query="我不吃什么？")
    asked = parse_recall(
        user_id="u" * 128,
        query="x" * MAX_QUERY_CHARS,
        k=MAX_K,
        now="2026-12-01T10:00:00Z",
        session_id="chat-7",
        budget_tokens=MAX_BUDGET_TOKENS,
        reinforce=True,
        tenant_id="acme",
    )
    assert asked.now == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert (asked.k, asked.budget_tokens, asked.session_id, asked.tenant_id) == (
        MAX_K,
        MAX_BUDGET_TOKENS,
        "chat-7",
        "acme",
    )
    assert asked.reinforce and asked.query == "x" * MAX_QUERY_CHARS
    assert parse_recall(**GOOD, k=1, budget_tokens=1).k == 1
    beijing = datetime(2026, 11, 10, 9, tzinfo=timezone(timedelta(hours=8)))
    assert parse_recall(**GOOD, now=beijing).now == beijing  # the zone is kept, the instant is the same
    assert parse_recall(**GOOD, now="2026-11-10T09:00:00+08:00").now == beijing


@pytest.mark.parametrize(
    ("include_archived", "include_history", "statuses"),
    [
        (False, False, {MemoryStatus.ACTIVE}),
        (True, False, {MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED}),
        (
            False,
            True,
            {MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED, MemoryStatus.SUPERSEDED, MemoryStatus.EXPIRED},
        ),
    ],
)
def test_statuses_are_active_plus_what_is_asked_for(
    include_archived: bool, include_history: bool, statuses: set[MemoryStatus]
) -> None:
    asked = parse_recall(**GOOD, include_archived=include_archived, include_history=include_history)
    assert asked.statuses == statuses
    # Never pending drafts (the pipeline's) nor forgotten memories (the audit's).
    assert not asked.statuses & {MemoryStatus.PENDING, MemoryStatus.FORGOTTEN}
