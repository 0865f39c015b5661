"""Recall's hot reads run statements built once, with named parameters (``workers/db/memories.py``,
``workers/db/events.py``): each call binds its own tenant, user and values, and nothing of one
call is baked into the statement the next one runs. (What they read is checked against Postgres in
``tests/integration/test_plain_reads_sql.py``, ``test_cue_counts_sql.py`` and ``test_citing_sql.py``.)"""

from sqlalchemy.dialects import postgresql

from shared.models import MemoryStatus
from workers.db import events, memories

ACTIVE = [MemoryStatus.ACTIVE]


def _sql(statement, params) -> str:
    return str(
        statement.params(params).compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    )


def test_each_hot_statement_is_built_once_and_names_the_parameters_its_read_binds():
    assert memories.cue_query() is memories.cue_query()
    assert memories.citing_once(memories.WITHOUT_EMBEDDING) is memories.citing_once(
        memories.WITHOUT_EMBEDDING
    )
    assert memories._cue_counts() is memories._cue_counts()
    assert memories._by_ids() is memories._by_ids()
    assert events._of_user(True) is events._of_user(True) and events._of_user(False) is not events._of_user(
        True
    )
    # Every value a read passes has its parameter, and no parameter is left without a value.
    names = {
        memories.cue_query(): set(memories.cue_params("t", "u", ["k:a"], ACTIVE, 5)),
        memories.citing_once(memories.WITHOUT_EMBEDDING): {"tenant", "user", "events", "statuses"},
        memories._cue_counts(): {"tenant", "user", "statuses", "cues"},
        memories._by_ids(): {"tenant", "user", "ids"},
        events._of_user(False): {"tenant", "user", "ids"},
        events._of_user(True): {"tenant", "user", "ids", "lending"},
    }
    for statement, bound in names.items():
        assert set(statement.compile().params) == bound, statement


def test_each_call_binds_its_own_owner_and_values():
    # Owners whose ids could collide: "u1" inside "u10", "t1" inside "t1:x".
    first = _sql(memories.cue_query(), memories.cue_params("t1", "u1", ["k:a"], ACTIVE, 50))
    second = _sql(memories.cue_query(), memories.cue_params("t1:x", "u10", ["k:b"], ACTIVE, 7))
    assert "'t1', 'u1'" in first and "'k:a'" in first and "LIMIT 50" in first
    assert "'t1:x', 'u10'" in second and "'k:b'" in second and "LIMIT 7" in second
    assert "'u1'" not in second and "'k:a'" not in second
    lent = {"tenant": "t2", "user": "u1", "ids": ["e1"], "lending": ["e1:b"]}
    turns = _sql(events._of_user(True), lent)
    assert "events.tenant_id = 't2'" in turns and "'e1:b'" in turns
    counts = {"tenant": "t1", "user": "u10", "statuses": ["active", "archived"], "cues": ["", "k:a"]}
    assert "IN ('active', 'archived')" in _sql(memories._cue_counts(), counts)
    hits = _sql(memories._by_ids(), {"tenant": "t1:x", "user": "u1", "ids": ["m1"]})
    assert "memories.tenant_id = 't1:x'" in hits and "memories.user_id = 'u1'" in hits
    citing = {"tenant": "t2", "user": "u10", "events": ["e1:b"], "statuses": ["active"]}
    cited = _sql(memories.citing_once(memories.WITHOUT_EMBEDDING), citing)
    assert "citing.tenant_id = 't2'" in cited and "citing.user_id = 'u10'" in cited and "'e1:b'" in cited
