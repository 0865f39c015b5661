from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.events import EventLimits, InvalidEvent, Role, validate_turn

GOOD = {"user_id": "u1", "session_id": "s1", "role": "user", "content": "我不吃香菜", "seq": 1}


def errors_of(raw, limits=None, **kw):
    with pytest.raises(InvalidEvent) as info:
        validate_turn(raw, limits, **kw)
    return {e.field: e.problem for e in info.value.errors}


def test_valid_turn_gets_defaults():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    e = validate_turn(GOOD, now=now)
    assert e.tenant_id == "default" and e.role is Role.USER and e.at == now and e.metadata == {}
    assert len(e.event_id) == 32 and e.seq == 1


def test_a_turn_may_claim_a_time_at_most_a_day_ahead_of_the_receiving_clock():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ahead = validate_turn({**GOOD, "at": "2026-01-01T23:00:00Z"}, now=now)
    assert ahead.at == datetime(2026, 1, 1, 23, tzinfo=UTC)
    assert "out of range" in errors_of({**GOOD, "at": "2026-01-02T00:00:01Z"}, now=now)["at"]
    # The recorder checks without a clock: only the absolute bounds (1970 to 2200).
    assert validate_turn({**GOOD, "at": "2100-01-01T00:00:00Z"}).at.year == 2100


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("user_id", "", "must not be empty"),
        ("user_id", "   ", "must not be empty"),
        ("session_id", "a b", "characters outside"),
        ("user_id", "x" * 129, "129 characters long; the limit is 128"),
        ("tenant_id", "*", "characters outside"),
        ("event_id", "id;drop table", "characters outside"),
        ("role", "admin", "'admin' is not one of user, assistant, system, tool"),
        ("content", "", "must not be empty"),
        ("content", "  \n", "must not be empty"),
        ("content", 42, "must be a string"),
        ("content", "a\x00b", "NUL"),
        ("content", "bad \ud800 surrogate", "not valid UTF-8"),
        ("at", "yesterday", "not an ISO 8601 timestamp"),
        ("at", "2026-01-01T10:00:00", "has no timezone"),
        # Year 9999 at -14:00 was stored as year 10000 and broke every tenant's index repair.
        ("at", "9999-12-31T20:00:00-14:00", "out of range"),
        ("at", "2999-01-01T00:00:00Z", "out of range"),
        ("at", "1969-12-31T23:59:59Z", "out of range"),
        ("seq", 0, "between 1 and 2^53 - 1"),
        # Lua's doubles read 2^53 + 1 as 2^53: the next publish got the same seq (issue 18).
        ("seq", 2**53, "between 1 and 2^53 - 1"),
        ("seq", 9007199254740993, "between 1 and 2^53 - 1"),
        ("seq", "3", "must be a positive integer"),
        ("seq", True, "must be a positive integer"),
        ("metadata", [1], "must be a JSON object"),
        ("metadata", {"a": float("nan")}, "not JSON-serialisable"),
    ],
)
def test_each_bad_field_is_named(field, value, problem):
    errs = errors_of({**GOOD, field: value})
    assert field in errs, errs
    assert problem in errs[field]


def test_all_problems_reported_at_once():
    errs = errors_of({"user_id": "", "session_id": "", "role": "x", "content": ""})
    assert set(errs) == {"user_id", "session_id", "role", "content", "seq"}


def test_content_limit_is_configurable():
    limits = EventLimits(max_content_chars=10)
    assert "limit is 10" in errors_of({**GOOD, "content": "x" * 11}, limits)["content"]
    assert validate_turn({**GOOD, "content": "x" * 10}, limits).content == "x" * 10
    assert validate_turn({**GOOD, "content": "x" * 32_000}).content  # default limit 32,000
    assert "32000" in errors_of({**GOOD, "content": "x" * 32_001})["content"]


def test_unknown_field_rejected():
    assert "not a known field" in errors_of({**GOOD, "usr_id": "u"})["usr_id"]


def test_deep_metadata_rejected():
    deep: dict = {}
    node = deep
    for _ in range(12):
        node["a"] = {}
        node = node["a"]
    assert "nested deeper" in errors_of({**GOOD, "metadata": deep})["metadata"]


def test_zulu_and_offsets_parse():
    assert validate_turn({**GOOD, "at": "2026-03-01T10:00:00Z"}).at.utcoffset().total_seconds() == 0
    assert validate_turn({**GOOD, "at": "2026-03-01T10:00:00+08:00"}).at.hour == 10


def test_seq_optional_for_producer():
    assert validate_turn({k: v for k, v in GOOD.items() if k != "seq"}, require_seq=False).seq == 0
    assert "seq" in errors_of({k: v for k, v in GOOD.items() if k != "seq"})


def test_non_mapping_rejected():
    assert "must be a JSON object" in errors_of([1, 2])["event"]


def test_message_round_trip():
    e = validate_turn({**GOOD, "at": "2026-03-01T10:00:00+08:00", "metadata": {"k": [1, "二"]}})
    assert validate_turn(e.to_message()) == e


def test_property_tests_run_without_a_deadline():
    """The profile of tests/conftest.py: a slow machine makes an example slower, never red."""
    assert settings().deadline is None


@given(
    st.dictionaries(
        st.text(max_size=12), st.one_of(st.none(), st.text(), st.integers(), st.booleans()), max_size=8
    )
)
def test_arbitrary_input_never_crashes(raw):
    try:
        validate_turn(raw)
    except InvalidEvent as exc:
        assert exc.errors and all(e.field and e.problem for e in exc.errors)
