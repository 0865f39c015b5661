"""The Redis key encoding (infra/redis_layout.py) is injective over any ids, keeps one user's keys
under one hash tag (one Redis Cluster slot) and gives another user another tag; the ledger member
and the re-drive counter name one (tenant, event) pair each."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infra import redis_layout as layout

# Any text, the separators and brackets of the encoding among them, lone surrogates included.
IDS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=":{}%@\x1f/ *?[]\\ab", max_size=8),
    st.text(alphabet=st.characters(codec=None), max_size=6),
    st.sampled_from(
        ["", ":", "{", "}", "{}", "%3A", "ac", "ac:me", "me:bob", "bob", "u1", "u10", "é", "\ud800"]
    ),
)
TRIPLES = st.tuples(IDS, IDS, IDS)


@st.composite
def near_pairs(draw: st.DrawFn, sep: str = ":", n: int = 3) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Two tuples of ``n`` ids whose ids joined by ``sep`` read the same (``ac`` + ``me:bob`` and
    ``ac:me`` + ``bob``): where a naive encoding collides. Half the time, two independent tuples."""
    a = tuple(draw(st.lists(IDS, min_size=n, max_size=n)))
    if draw(st.booleans()):
        return a, tuple(draw(st.lists(IDS, min_size=n, max_size=n)))
    flat = sep.join(a)
    seps = [i for i, c in enumerate(flat) if c == sep]
    cuts = sorted(draw(st.lists(st.sampled_from(seps), min_size=n - 1, max_size=n - 1, unique=True)))
    bounds = [-1, *cuts, len(flat)]
    return a, tuple(flat[bounds[k] + 1 : bounds[k + 1]] for k in range(n))


def _all_keys(tenant: str, user: str, session: str) -> list[str]:
    return [
        layout.seq_key(tenant, user, session),
        layout.working_memory_key(tenant, user, session),
        layout.user_sessions_key(tenant, user),
    ]


def hash_tag(key: str) -> str:
    """What Redis Cluster hashes: between the first ``{`` and the first ``}`` after it, when that
    is not empty; else the whole key."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key


@settings(max_examples=400, deadline=None)
@given(near_pairs())
def test_no_two_triples_share_a_key(pair: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    a, b = pair
    for build in (layout.seq_key, layout.working_memory_key):
        assert (build(*a) == build(*b)) == (a == b)
    assert (layout.user_sessions_key(*a[:2]) == layout.user_sessions_key(*b[:2])) == (a[:2] == b[:2])
    # Families never meet: a seq counter is never a working memory or a session list.
    assert len(set(_all_keys(*a)) | {layout.working_memory_key(*b), layout.user_sessions_key(*b[:2])}) >= 3


@settings(max_examples=400, deadline=None)
@given(TRIPLES, IDS)
def test_one_users_keys_share_one_tag_and_another_user_has_another(
    a: tuple[str, str, str], other_session: str
) -> None:
    tenant, user, session = a
    tags = {hash_tag(k) for k in _all_keys(tenant, user, session) + _all_keys(tenant, user, other_session)}
    assert tags == {layout.user_tag(tenant, user)[1:-1]}


@settings(max_examples=400, deadline=None)
@given(near_pairs())
def test_two_users_never_share_a_tag(pair: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    (t1, u1, _), (t2, u2, _) = pair
    same = hash_tag(layout.user_sessions_key(t1, u1)) == hash_tag(layout.user_sessions_key(t2, u2))
    assert same == ((t1, u1) == (t2, u2))


@settings(max_examples=300, deadline=None)
@given(near_pairs("\x1f", 2), near_pairs(":", 2))
def test_ledger_members_and_redrive_counters_name_one_pair(
    ledger: tuple[tuple[str, ...], tuple[str, ...]], redrive: tuple[tuple[str, ...], tuple[str, ...]]
) -> None:
    (t1, e1), (t2, e2) = ledger
    assert (layout.ledger_member(t1, e1) == layout.ledger_member(t2, e2)) == ((t1, e1) == (t2, e2))
    # (stage, event ref): the ref is the pipeline's tenant/event key, any text here.
    (s1, r1), (s2, r2) = redrive
    assert (layout.redrives_key(r1, s1) == layout.redrives_key(r2, s2)) == ((s1, r1) == (s2, r2))


@settings(max_examples=300, deadline=None)
@given(IDS, IDS, IDS, IDS)
def test_scan_patterns_match_one_user_and_one_tenant(t1: str, u1: str, t2: str, u2: str) -> None:
    import fnmatch

    def matches(pattern: str, key: str) -> bool:
        # The encoded ids hold no glob character, so fnmatch reads the patterns as Redis does.
        return fnmatch.fnmatchcase(key, pattern)

    for family in layout.USER_FAMILIES:
        session = None if family == layout.SESSIONS else "s:1"
        key = layout.family_key(family, t2, u2, session)
        assert matches(layout.user_pattern(family, t1, u1), key) == ((t1, u1) == (t2, u2))
        assert matches(layout.tenant_pattern(family, t1), key) == (t1 == t2)


def test_the_issue_pairs_get_their_own_keys() -> None:
    """Tenant ``ac`` user ``me:bob`` and tenant ``ac:me`` user ``bob`` shared every key; ``u1`` and
    ``u10``, tenants ``ac`` and ``ac:me`` are prefixes of each other."""
    assert layout.seq_key("ac", "me:bob", "s1") == "cuemem:seq:{ac:me%3Abob}:s1"
    assert layout.seq_key("ac:me", "bob", "s1") == "cuemem:seq:{ac%3Ame:bob}:s1"
    assert layout.user_sessions_key("acme", "bob@example.com") == "cuemem:sessions:{acme:bob@example.com}"
    assert layout.ledger_member("ac:me", "e1") == "ac:me\x1fe1"  # valid ids read as they did
    assert layout.redrives_key("acme/e1", "extracted") == "cuemem:redrives:extracted:acme/e1"
