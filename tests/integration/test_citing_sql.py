"""Which memories cite these turns (by_sources / by_source), against a Python oracle.

Recall asks it for every page of conversation-log hits; since migration 0012 it is one GIN overlap
over the cited event ids (``memory_source_event_ids(sources)``), so the answer must stay exactly
"the user's memories in those statuses with any of those event ids among their sources".
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from sqlalchemy import text

from shared.models import MemoryStatus
from tests.support.plans import plans_of
from tests.support.rows import memory_row
from workers.bootstrap import build_container

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
USERS = [("default", "u1"), ("default", "u2"), ("other", "u1")]


def test_by_sources_finds_exactly_the_memories_citing_any_of_the_turns(clean_db, it_settings):
    c = build_container(it_settings)
    rng = random.Random(12)
    events = [f"e-{n}" for n in range(40)] + ["e-'quote", 'e-"dq', "e-{brace}", "e-,comma"]
    memories = []
    for i in range(150):
        tenant, user = USERS[i % len(USERS)]
        status = rng.choice([MemoryStatus.ACTIVE, MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED])
        memories.append(
            memory_row(i, tenant, user, NOW, cited=rng.sample(events, rng.randint(0, 3)), status=status)
        )
    with c.uow() as uow:
        for m in memories:
            uow.memories.add(m)
        uow.commit()
    checks = 0
    for _ in range(30):
        asked = rng.sample(events, rng.randint(1, 12))
        for tenant, user in USERS:
            for statuses in ([MemoryStatus.ACTIVE], [MemoryStatus.ACTIVE, MemoryStatus.SUPERSEDED]):
                expected = {
                    m.id
                    for m in memories
                    if (m.tenant_id, m.user_id) == (tenant, user)
                    and m.status in statuses
                    and {s["event_id"] for s in m.sources} & set(asked)
                }
                with c.uow() as uow:
                    found = uow.memories.by_sources(tenant, user, asked, statuses)
                    one = uow.memories.by_source(tenant, user, asked[0], statuses)
                assert {m.id for m in found} == expected
                assert len(found) == len(expected)  # each memory once, however many of its turns
                assert {m.id for m in one} == {
                    m.id
                    for m in memories
                    if m.id in expected and asked[0] in {s["event_id"] for s in m.sources}
                }
                checks += bool(expected)
    assert checks > 50  # most questions had an answer: the oracle is not comparing empty sets
    with c.uow() as uow:
        assert uow.memories.by_sources("default", "u1", [], [MemoryStatus.ACTIVE]) == []
    c.close()


def test_the_gin_key_functions_never_plan_a_parallel_worker(clean_db, it_settings):
    """Recall's reads through the two GIN key functions (the memories citing the log's hits, the
    memories holding a query's cues) evaluate those functions in the leader only (migration 0019):
    launching a worker cost 3–4 ms of a 1 ms read at 100k memories. The planner is told here that
    workers are free, so only the functions' PARALLEL RESTRICTED keeps them out of the workers."""
    c = build_container(it_settings)
    with c.uow() as uow:
        for i in range(40):
            uow.memories.add(memory_row(i, "default", "u1", NOW, cited=[f"e-{i}"]))
        uow.commit()
    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        for setting in ("parallel_setup_cost", "parallel_tuple_cost"):
            session.execute(text(f"SET LOCAL {setting} = 0"))
        for setting in ("min_parallel_table_scan_size", "min_parallel_index_scan_size"):
            session.execute(text(f"SET LOCAL {setting} = 0"))
        plans = plans_of(session, lambda: _read_through_both_functions(uow))
        # The control: with the functions PARALLEL SAFE again (in this transaction only, rolled
        # back) the same settings do put them below a Gather, so the check above can fail.
        for function in FUNCTIONS:
            session.execute(text(f"ALTER FUNCTION {function} PARALLEL SAFE"))
        unrestricted = plans_of(session, lambda: _read_through_both_functions(uow))
        uow.rollback()
    c.close()
    assert any("memory_source_event_ids" in p for p in plans)
    assert any("memory_user_cues" in p for p in plans)
    for plan in plans:
        parallel = _under_gather(plan)
        assert "memory_source_event_ids" not in parallel and "memory_user_cues" not in parallel, plan
    control = "\n".join(_under_gather(plan) for plan in unrestricted)
    assert "memory_source_event_ids" in control and "memory_user_cues" in control, unrestricted


FUNCTIONS = ("memory_user_cues(text, text, text[])", "memory_source_event_ids(jsonb)")


def _read_through_both_functions(uow) -> None:  # type: ignore[no-untyped-def]
    uow.memories.by_sources("default", "u1", [f"e-{i}" for i in range(30)], [MemoryStatus.ACTIVE])
    uow.memories.by_cues("default", "u1", ["alpha", "beta"], [MemoryStatus.ACTIVE], 50)


def _under_gather(plan: str) -> str:
    """The plan lines that run in parallel workers: those indented below a Gather node."""
    inside: list[str] = []
    depth: int | None = None  # the indentation of the Gather node we are under
    for line in plan.splitlines():
        indent = len(line) - len(line.lstrip(" ->"))
        if depth is not None and indent <= depth:
            depth = None
        if depth is not None:
            inside.append(line)
        elif "Gather" in line:
            depth = indent
    return "\n".join(inside)


def test_an_id_longer_than_its_column_matches_no_row(clean_db, it_settings):
    """Recall's id reads send their ids as one ``text[]`` (``mapping.among``,
    ``mapping.text_array_param``): a ``varchar(36)[]`` would cut a longer id to the column's
    length, and the cut id would match another row."""
    c = build_container(it_settings)
    stored = memory_row(1, "default", "u1", NOW)
    with c.uow() as uow:
        uow.memories.add(stored)
        uow.memories.add(memory_row(2, "default", "u10", NOW))
        uow.commit()
    assert len(stored.id) == 36
    with c.uow() as uow:
        assert [m.id for m in uow.memories.get_many("default", "u1", [stored.id])] == [stored.id]
        assert uow.memories.get_many("default", "u1", [stored.id + "tail"]) == []
        assert uow.memories.get_many("default", "u10", [stored.id]) == []  # another user's row
    c.close()
