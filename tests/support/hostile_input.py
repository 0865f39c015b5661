"""Hostile event input for the fuzz tests (unit: ``validate_turn``; e2e: through the pipeline):
a good event, its fields, injection strings and Hypothesis strategies of wrong or hostile values."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

GOOD: dict[str, Any] = {
    "user_id": "u1",
    "session_id": "s1",
    "role": "user",
    "content": "我不吃香菜",
    "seq": 1,
}
FIELDS = ["event_id", "tenant_id", "user_id", "session_id", "seq", "role", "content", "at", "metadata"]

INJECTIONS = [
    "alice' OR '1'='1",
    'alice"; DROP TABLE memories; --',
    "../alice",
    "..\\..\\etc\\passwd",
    "*",
    "alice*",
    "alice%",
    "%00",
    "${jndi:ldap://x/a}",
    "{{7*7}}",
    "<script>alert(1)</script>",
    "alice\u200b",
    "alice ",
    " alice",
    "ALICE\u0000",
    "user_id:alice OR tenant_id:*",
    '{"$ne": null}',
    "alice\r\nX-Injected: 1",
    "tenant-a:alice",
]
CONTROL = st.text(alphabet=st.characters(max_codepoint=0x1F), min_size=1, max_size=20)
SURROGATE = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4
)
HOSTILE_TEXT = st.one_of(
    st.sampled_from(INJECTIONS),
    CONTROL,
    SURROGATE.map(lambda s: "ok" + s),
    st.text(max_size=64),
    st.just(""),
    st.just("   \t\n"),
    st.integers(min_value=1, max_value=6).map(lambda n: "x" * (10**n)),  # up to a million characters
)
JSON_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
WRONG_TYPE = st.one_of(
    JSON_SCALAR,
    st.lists(JSON_SCALAR, max_size=3),
    st.dictionaries(st.text(max_size=5), JSON_SCALAR, max_size=3),
    st.binary(max_size=10),
)


def nested(depth: int, as_list: bool) -> Any:
    """A value ``depth`` lists (or objects) deep."""
    node: Any = "leaf"
    for _ in range(depth):
        node = [node] if as_list else {"k": node}
    return node


METADATA = st.one_of(
    st.recursive(
        JSON_SCALAR,
        lambda children: st.one_of(
            st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
        ),
        max_leaves=20,
    ),
    st.integers(min_value=1, max_value=5_000).map(lambda d: {"deep": nested(d, as_list=d % 2 == 0)}),
    st.dictionaries(st.sampled_from(INJECTIONS), HOSTILE_TEXT, max_size=4),
    st.integers(min_value=100, max_value=10_000).map(lambda n: {"blob": "y" * n}),
)


def value_for(field: str) -> st.SearchStrategy[Any]:
    """Hostile values for one event field: wrong types, and the field's own worst cases."""
    if field == "metadata":
        return st.one_of(METADATA, WRONG_TYPE)
    if field == "seq":
        return st.one_of(st.integers(min_value=-(2**70), max_value=2**70), WRONG_TYPE)
    return st.one_of(HOSTILE_TEXT, WRONG_TYPE)
