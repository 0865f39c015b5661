"""The pure parts of the HTTP API: key format and checks, header parsing, input validation (a
recall's: tests/unit/test_recall_request.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.http.deps import key_of
from service.http.serve import ServeRefused, check_options
from shared.api_keys import hash_key, issue_key, key_prefix, matches
from shared.lifecycle import curation
from shared.models import MemoryStatus, MemoryType

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_issued_keys_are_random_hashed_and_found_by_prefix() -> None:
    a, b = issue_key("acme", "app", NOW), issue_key("acme", "app", NOW)
    assert a.key != b.key and a.record.id != b.record.id
    assert a.key.startswith("cm_") and key_prefix(a.key) == a.record.prefix
    assert a.key_hash == hash_key(a.key) and a.key not in a.key_hash
    assert matches(a.key, a.key_hash) and not matches(b.key, a.key_hash)
    assert "key" not in a.record.to_public() and a.record.to_public()["revoked_at"] is None
    for malformed in ("", "cm_", "cm_zzzzzzzz_" + "x" * 40, "sk-" + "x" * 40, a.key + " x", a.key[:-30]):
        assert key_prefix(malformed) is None, malformed


def test_the_key_of_a_request_is_bearer_first_then_x_api_key() -> None:
    assert key_of("Bearer k1", "k2") == "k1"
    assert key_of("bearer  k1 ", None) == "k1"
    assert key_of("Basic k1", "k2") == "k2"
    assert key_of(None, " k2 ") == "k2"
    assert key_of("Bearer ", "") == "" and key_of(None, None) == ""


def test_statuses_types_ids_edits_and_reasons() -> None:
    assert curation.parse_statuses(None) == {MemoryStatus.ACTIVE}
    assert curation.parse_statuses("all") == set(MemoryStatus)
    assert curation.parse_statuses("archived, forgotten") == {MemoryStatus.ARCHIVED, MemoryStatus.FORGOTTEN}
    with pytest.raises(curation.InvalidInput, match="status"):
        curation.parse_statuses("active,deleted")
    assert curation.parse_type("fact") is MemoryType.FACT and curation.parse_type("") is None
    with pytest.raises(curation.InvalidInput) as err:
        curation.check_ids({"user_id": "a b", "session_id": None, "memory_id": "x" * 200}, 128)
    assert [e.field for e in err.value.errors] == ["user_id", "memory_id"]

    edit = curation.check_edit(" new text ", "fact", ["Diet", "diet", "x"], 100)
    assert edit == curation.Edit("new text", MemoryType.FACT, ("diet", "x")) and edit.fields == [
        "content",
        "type",
        "tags",
    ]
    with pytest.raises(curation.InvalidInput) as err:
        curation.check_edit("", "", [""], 100)
    assert [e.field for e in err.value.errors] == ["content", "type", "tags[0]"]
    with pytest.raises(curation.InvalidInput, match="body"):
        curation.check_edit(None, None, None, 100)
    assert curation.check_reason("  moved  ") == "moved"
    with pytest.raises(curation.InvalidInput, match="reason"):
        curation.check_reason("x" * 1001)


def test_no_auth_only_on_loopback() -> None:
    check_options("127.0.0.1", auth=False)
    check_options("0.0.0.0", auth=True)
    with pytest.raises(ServeRefused, match="--no-auth"):
        check_options("0.0.0.0", auth=False)
