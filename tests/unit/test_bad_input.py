"""Bad input, fuzzed (issue 8, item 3): hostile events through ``validate_turn`` and hostile bytes
through the JSONL reader. Each is rejected with a reason naming the field, or accepted as a turn
that is safe to send (JSON-serialisable, ids in the safe alphabet); nothing raises anything else.

The fixed cases of each field are in tests/unit/test_events.py; here the values are generated.
Example counts are moderate (other work shares the machine); raise them with
``--hypothesis-seed``/``HYPOTHESIS_PROFILE`` locally when hunting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from producers.jsonl import read_jsonl
from shared.events import (
    MAX_METADATA_DEPTH,
    MAX_SEQ,
    EventLimits,
    InvalidEvent,
    TurnPublished,
    is_safe_id,
    validate_turn,
)
from tests.support.hostile_input import FIELDS, GOOD, INJECTIONS, nested, value_for

LIMITS = EventLimits(max_content_chars=2_000, max_id_chars=128, max_metadata_bytes=4_096)


@st.composite
def mutated_events(draw: st.DrawFn) -> tuple[dict[str, Any], set[str]]:
    """GOOD with one to three fields replaced by hostile values; also returns the fields touched."""
    fields = draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True))
    raw = dict(GOOD)
    for field in fields:
        raw[field] = draw(value_for(field))
    return raw, set(fields)


def check_accepted(event: TurnPublished) -> None:
    for value in (event.event_id, event.tenant_id, event.user_id, event.session_id):
        assert is_safe_id(value) and len(value) <= LIMITS.max_id_chars, value
    assert event.content.strip() and "\x00" not in event.content
    assert len(event.content) <= LIMITS.max_content_chars
    assert 1 <= event.seq <= MAX_SEQ
    # What travels on the broker must be strict JSON and come back as the same turn.
    wire = json.dumps(event.to_message(), ensure_ascii=False, allow_nan=False)
    assert validate_turn(json.loads(wire), LIMITS) == event


TRIED: dict[str, int] = {"accepted": 0, "rejected": 0}


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(mutated_events())
def test_hostile_fields_are_rejected_naming_the_field_or_accepted_safely(
    case: tuple[dict[str, Any], set[str]],
) -> None:
    raw, touched = case
    try:
        event = validate_turn(raw, LIMITS)
    except InvalidEvent as exc:
        TRIED["rejected"] += 1
        named = {e.field for e in exc.errors}
        assert exc.errors and all(e.problem for e in exc.errors)
        # Only fields that were touched can be wrong: the reason points at the culprit.
        assert named <= touched, (named, touched)
        assert len(str(exc)) < 4_000, "a reason must stay readable, not echo a huge value"
        return
    TRIED["accepted"] += 1
    check_accepted(event)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(INJECTIONS), st.sampled_from(["user_id", "session_id", "tenant_id", "event_id"]))
def test_injection_strings_in_ids_are_refused_by_name(value: str, field: str) -> None:
    if is_safe_id(value):  # "tenant-a:alice" is a legal id: it is an opaque string, never parsed
        assert getattr(validate_turn({**GOOD, field: value}, LIMITS), field) == value
        return
    try:
        validate_turn({**GOOD, field: value}, LIMITS)
    except InvalidEvent as exc:
        assert [e.field for e in exc.errors] == [field]
    else:
        raise AssertionError(f"{field}={value!r} was accepted")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(INJECTIONS), st.text(max_size=40))
def test_injection_strings_in_content_are_kept_as_text(injection: str, rest: str) -> None:
    content = f"{injection} {rest}".replace("\x00", "")
    if not content.strip() or any(0xD800 <= ord(ch) <= 0xDFFF for ch in content):
        return
    assert validate_turn({**GOOD, "content": content}, LIMITS).content == content


def test_metadata_nested_thousands_deep_is_refused_not_a_recursion_error() -> None:
    # Found by this suite: the depth walk was recursive and raised RecursionError past ~1,000.
    for depth in (MAX_METADATA_DEPTH + 1, 1_000, 50_000):
        for as_list in (False, True):
            try:
                validate_turn({**GOOD, "metadata": {"deep": nested(depth, as_list)}}, LIMITS)
            except InvalidEvent as exc:
                assert {e.field: e.problem for e in exc.errors} == {
                    "metadata": f"is nested deeper than {MAX_METADATA_DEPTH} levels"
                }
            else:
                raise AssertionError(f"metadata {depth} deep was accepted")
    assert validate_turn({**GOOD, "metadata": {"deep": nested(MAX_METADATA_DEPTH - 1, False)}}, LIMITS)


# --- JSONL -------------------------------------------------------------------------------------


def _json_line(event: dict[str, Any]) -> bytes:
    # Bytes values are written as their repr; lone surrogates pass through as their raw bytes,
    # so the line is invalid UTF-8 exactly where the generated text was.
    try:
        return json.dumps(event, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")
    except RecursionError:  # metadata thousands deep: the encoder gives up, write it by hand
        return b'{"user_id": "u1", "metadata": ' + b'{"k": ' * 5_000 + b"1" + b"}" * 5_001


HOSTILE_EVENT = st.fixed_dictionaries({}, optional={f: value_for(f) for f in FIELDS}).map(
    lambda d: {**GOOD, **d}
)
LINE = st.one_of(
    st.binary(max_size=200),  # anything, invalid UTF-8 included
    HOSTILE_EVENT.map(_json_line),
    st.sampled_from(
        [b"[1,2]", b"null", b'"str"', b"{", b'{"a":}', b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"\x00"]
    ),
    st.integers(min_value=1_000, max_value=100_000).map(lambda n: b"[" * n + b"]" * n),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(st.lists(LINE, min_size=1, max_size=12))
def test_jsonl_reader_yields_a_reason_or_an_object_for_every_line(tmp_path: Path, lines: list[bytes]) -> None:
    path = tmp_path / "fuzz.jsonl"
    # A line may not hold a newline of its own: split the generated bytes the way a file would.
    path.write_bytes(b"\n".join(lines) + b"\n")
    expected = [n for n, raw in enumerate(path.read_bytes().split(b"\n")[:-1], 1) if raw.strip()]
    got = list(read_jsonl(path))
    assert [line.number for line in got] == expected
    for line in got:
        assert (line.data is None) != (line.error is None), line
        if line.data is not None:
            assert isinstance(line.data, dict)
            try:
                validate_turn(line.data, LIMITS, require_seq=False)
            except InvalidEvent as exc:
                assert exc.errors and all(e.field for e in exc.errors)
        else:
            assert line.error and len(line.error) < 200


def test_jsonl_invalid_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({**GOOD, "seq": 2}).encode()
    path.write_bytes(good + b"\n" + b'{"content": "caf\xe9"}\n' + b"\xc3\x28\n")
    got = list(read_jsonl(path))
    assert got[0].data is not None
    assert got[1].error == "not valid UTF-8 (at byte 17 of the line)"
    assert got[2].error == "not valid UTF-8 (at byte 1 of the line)"


@pytest.mark.parametrize("value", ["alice\n", "alice\r\n", "alice\nbob", "\nalice", "alice\x00"])
def test_an_id_with_a_line_break_or_a_nul_is_not_safe(value):
    # With re.match and "$", "alice\n" passed: "$" matches before a final newline.
    assert not is_safe_id(value)
    turn = {"user_id": value, "session_id": "s1", "role": "user", "content": "hi"}
    with pytest.raises(InvalidEvent) as err:
        validate_turn(turn, LIMITS, require_seq=False)
    assert [e.field for e in err.value.errors] == ["user_id"]
