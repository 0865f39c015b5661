"""memory_cue_counts (migration 0010) against a count over the rows themselves.

Recall weighs each query cue by how many of the user's memories hold it, read from counts a
trigger keeps. The oracle here is the per-query aggregate recall ran before (``unnest(cues)`` over
the user's rows): after every kind of write the pipeline, curation, the lifecycle sweeps, a
privacy delete or a bulk load makes, both must agree for every user, status and cue. Pending
drafts are never counted (migration 0015), so the oracle leaves them out too.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from shared.models import RECALLABLE_STATUSES, Memory, MemoryStatus
from tests.support.plans import plans_of
from tests.support.rows import memory_row
from workers.bootstrap import build_container

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
CUES = [f"k:word{i}" for i in range(8)] + ["e:Alice", "e:Bob", "t:preference"]
USERS = [("default", "u1"), ("default", "u2"), ("other", "u1")]


def _oracle(
    session, tenant: str, user: str, statuses: list[str], cues: list[str]
) -> tuple[int, dict[str, int]]:
    total = session.execute(
        text(
            "SELECT count(*) FROM memories "
            "WHERE tenant_id = :t AND user_id = :u AND status = ANY(:s) AND status <> 'pending'"
        ),
        {"t": tenant, "u": user, "s": statuses},
    ).scalar_one()
    rows = session.execute(
        text(
            "SELECT c, count(*) FROM memories, LATERAL (SELECT DISTINCT unnest(cues) AS c) k "
            "WHERE tenant_id = :t AND user_id = :u AND status = ANY(:s) AND status <> 'pending' "
            "GROUP BY c"
        ),
        {"t": tenant, "u": user, "s": statuses},
    ).all()
    return int(total), {str(c): int(n) for c, n in rows if c in cues}


def _agree(c) -> int:
    """Every user and status set: the kept counts equal the oracle's. Returns the checks made."""
    checks = 0
    status_sets = [list(RECALLABLE_STATUSES), [MemoryStatus.ACTIVE], list(MemoryStatus)]
    with c.uow() as uow:
        for tenant, user in USERS:
            for statuses in status_sets:
                asked = [*CUES, "k:late", "k:never"]
                kept = uow.memories.cue_counts(tenant, user, asked, statuses)
                expected = _oracle(uow.session, tenant, user, [s.value for s in statuses], asked)
                assert kept == expected, (tenant, user, statuses)
                checks += 1
    return checks


def test_counts_follow_every_kind_of_write(clean_db, it_settings):
    c = build_container(it_settings)
    rng = random.Random(16)
    memories: list[Memory] = []
    with c.uow() as uow:
        for i in range(60):
            tenant, user = USERS[i % len(USERS)]
            m = memory_row(i, tenant, user, NOW, cues=rng.sample(CUES, rng.randint(0, 4)))
            uow.memories.add(m)
            memories.append(m)
        uow.commit()
    assert _agree(c) == 9
    with c.uow() as uow:
        total, df = uow.memories.cue_counts("default", "u1", ["e:Alice"], [MemoryStatus.ACTIVE])
    assert total == 20  # a third of the 60, all active
    assert 0 < df["e:Alice"] < total

    # The pipeline and curation save whole rows: a status change, new cues, an unchanged row.
    with c.uow() as uow:
        uow.memories.save(replace(memories[0], status=MemoryStatus.SUPERSEDED))
        uow.memories.save(replace(memories[1], cues=["k:word0", "k:word0", "e:Bob"]))  # a repeat
        uow.memories.save(replace(memories[2], importance=9.0))
        uow.commit()
    _agree(c)

    # Set-based writes as the lifecycle sweeps make them, and a decay that moves scores only.
    with c.uow() as uow:
        uow.session.execute(text("UPDATE memories SET status = 'archived' WHERE id LIKE '%1'"))
        uow.session.execute(text("UPDATE memories SET status = 'active' WHERE id LIKE '%11'"))
        uow.session.execute(text("UPDATE memories SET score = score + 1"))
        uow.commit()
    _agree(c)

    # A rolled-back write leaves the counts as they were.
    with c.uow() as uow:
        uow.session.execute(text("UPDATE memories SET cues = '{}'"))
    _agree(c)

    # Deletes: a pending draft dropped by the pipeline, rows removed by a privacy delete.
    with c.uow() as uow:
        draft = memory_row(500, "default", "u1", NOW, cues=["k:word1"], status=MemoryStatus.PENDING)
        uow.memories.add(draft)
        uow.commit()
    _agree(c)
    with c.uow() as uow:
        uow.memories.delete(draft.id)
        uow.session.execute(text("DELETE FROM memories WHERE user_id = 'u2'"))
        uow.commit()
    _agree(c)
    with c.uow() as uow:
        assert uow.memories.cue_counts("default", "u2", CUES, RECALLABLE_STATUSES) == (0, {})
    c.close()


def test_a_pending_draft_takes_no_lock_on_the_users_counts(clean_db, it_settings):
    """Two ingest units of one user run extraction and embedding in parallel, each in one open
    transaction (``shared/ingest/advance.py``). A draft's insert must not lock the user's counts,
    or the second unit waits for the first to commit (migration 0015). With 0010's trigger, the
    second insert below waited on the first's count row ``''`` and hit the lock timeout."""
    a, b = build_container(it_settings), build_container(it_settings)
    with a.uow() as first:
        first.memories.add(memory_row(1, "default", "u1", NOW, cues=["k:word1"], status=MemoryStatus.PENDING))
        first.session.flush()
        seen = first.session.execute(text("SELECT count(*) FROM memory_cue_counts")).scalar_one()
        assert seen == 0  # not even this transaction's own draft is counted
        with b.uow() as second:
            second.session.execute(text("SET LOCAL lock_timeout = '5s'"))
            draft = memory_row(2, "default", "u1", NOW, cues=["k:word1"], status=MemoryStatus.PENDING)
            second.memories.add(draft)
            second.memories.save(replace(draft, status=MemoryStatus.ACTIVE))  # persist counts it
            second.commit()
        first.commit()
    with a.uow() as uow:
        counted = uow.memories.cue_counts("default", "u1", ["k:word1"], list(MemoryStatus))
    assert counted == (1, {"k:word1": 1})
    _agree(a)
    a.close()
    b.close()


def test_a_recount_gives_what_the_trigger_kept_and_truncate_empties(clean_db, it_settings):
    c = build_container(it_settings)
    with c.uow() as uow:
        for i in range(12):
            uow.memories.add(memory_row(i, "default", "u1", NOW, cues=CUES[: i % 5]))
        uow.commit()
        kept = uow.session.execute(text("SELECT * FROM memory_cue_counts ORDER BY 1, 2, 3, 4")).all()
    with c.uow() as uow:
        # A bulk load with the trigger off, then the recount, as `cuemem bench latency` loads.
        uow.session.execute(text("ALTER TABLE memories DISABLE TRIGGER USER"))
        uow.session.execute(
            text("UPDATE memories SET cues = array_append(cues, 'k:late') WHERE id LIKE '%0'")
        )
        uow.session.execute(text("ALTER TABLE memories ENABLE TRIGGER USER"))
        uow.session.execute(text("SELECT memory_cue_counts_rebuild()"))
        uow.commit()
    _agree(c)
    with c.uow() as uow:
        uow.session.execute(text("UPDATE memories SET cues = array_remove(cues, 'k:late')"))
        uow.commit()
        again = uow.session.execute(text("SELECT * FROM memory_cue_counts WHERE n <> 0 ORDER BY 1, 2, 3, 4"))
        assert again.all() == [r for r in kept if r.n != 0]
        uow.session.execute(text("TRUNCATE memories"))
        uow.commit()
        assert uow.session.execute(text("SELECT count(*) FROM memory_cue_counts")).scalar_one() == 0
    c.close()


def test_stage_one_weighs_cues_by_the_kept_counts(clean_db, it_settings):
    """The rarity recall gives a cue comes from the counts: a name on every memory weighs little."""
    from shared.language.cues import ENTITY_WEIGHT, KEYWORD_WEIGHT, query_cues
    from shared.recall import deterministic
    from shared.recall.request import RecallRequest

    c = build_container(it_settings)
    with c.uow() as uow:
        for i in range(30):
            cues = ["e:alice", "k:alice"] + (["k:violin", "k:lessons"] if i == 7 else [])
            uow.memories.add(memory_row(i, "default", "u1", NOW, cues=cues))
        uow.commit()
    request = RecallRequest("default", "u1", "Alice violin lessons", now=NOW + timedelta(days=1))
    with c.uow() as uow:
        weights, pool = deterministic.cue_matches(uow, request, query_cues(request.query))
    # rarity: 1 for a cue one memory holds; log(2) / log(31) = 0.20 for one all 30 hold.
    assert weights["k:violin"] == KEYWORD_WEIGHT
    assert weights["e:alice"] == pytest.approx(ENTITY_WEIGHT * math.log(2) / math.log(31))
    assert next(iter(sorted(pool.values(), key=lambda cand: -cand.cue_score))).item.content == "memory 7"
    c.close()


def test_the_cue_query_reads_only_the_users_postings_and_answers_as_before(clean_db, it_settings):
    """by_cues and conflict candidates over the user-scoped cue index (migration 0013), against a
    Python oracle: the user's memories in the statuses holding any of the cues, best score first;
    other users holding the same keys (in this tenant and another) never come back."""
    c = build_container(it_settings)
    rng = random.Random(13)
    memories: list[Memory] = []
    with c.uow() as uow:
        for i in range(240):
            tenant, user = USERS[i % len(USERS)]
            status = rng.choice([MemoryStatus.ACTIVE, MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED])
            m = replace(
                memory_row(i, tenant, user, NOW, cues=rng.sample(CUES, rng.randint(0, 4)), status=status),
                score=rng.choice([1.0, 2.5, 2.5, 7.0]),
                slot=rng.choice([None, "diet", "port"]),
            )
            uow.memories.add(m)
            memories.append(m)
        uow.commit()
    answered = 0
    for _ in range(40):
        asked = rng.sample(CUES, rng.randint(1, 4))
        limit = rng.choice([3, 10, 100])
        for tenant, user in USERS:
            for statuses in ([MemoryStatus.ACTIVE], [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED]):
                mine = [m for m in memories if (m.tenant_id, m.user_id) == (tenant, user)]
                expected = sorted(
                    (m for m in mine if m.status in statuses and set(m.cues) & set(asked)),
                    key=lambda m: (-m.score, m.id),
                )[:limit]
                with c.uow() as uow:
                    found = uow.memories.by_cues(tenant, user, asked, statuses, limit)
                assert [m.id for m in found] == [m.id for m in expected]
                answered += bool(expected)
            slot = rng.choice([None, "diet"])
            expected_ids = {
                m.id
                for m in mine
                if m.status is MemoryStatus.ACTIVE and (set(m.cues) & set(asked) or (slot and m.slot == slot))
            }
            with c.uow() as uow:
                candidates = uow.memories.candidates(tenant, user, slot, asked, [], 1000)
            assert {m.id for m in candidates} == expected_ids
    assert answered > 100  # the oracle compared real answers, not empty lists
    c.close()


def test_the_cue_and_citing_reads_read_each_memory_row_once(clean_db, it_settings):
    """Stage 1's cue query and recall's read of the memories citing the log's hits read the rows
    inside the MATERIALIZED GIN lookup, and scope, filter and order them there. Reading ids there
    and each row again by id read a popular cue's rows twice. The citing read scans ``memories``
    once; the cue query reads whole only the rows it returns (its lookup keeps id and score)."""
    c = build_container(it_settings)
    with c.uow() as uow:
        for i in range(300):
            tenant, user = USERS[i % len(USERS)]
            cues = ["e:Alice", f"k:word{i % 8}"]
            uow.memories.add(memory_row(i, tenant, user, NOW, cues=cues, cited=[f"e-{i % 30}"]))
        uow.commit()
    cued: list[Memory] = []
    citing: list[Memory] = []
    with c.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        session.execute(text("ANALYZE memories"))
        # As at scale: a table this small would be read whole.
        session.execute(text("SET LOCAL enable_seqscan = off"))
        plans = plans_of(
            session,
            lambda: (
                cued.extend(uow.memories.by_cues("default", "u1", ["e:Alice"], RECALLABLE_STATUSES, 20)),
                citing.extend(uow.memories.by_sources("default", "u1", ["e-3", "e-6"], RECALLABLE_STATUSES)),
            ),
            explain="EXPLAIN (ANALYZE)",
        )
        uow.rollback()
    c.close()
    # u1 of "default" holds every third memory: 100 hold e:Alice, 20 come back.
    assert len(cued) == 20 and {(m.tenant_id, m.user_id) for m in cued} == {("default", "u1")}
    # e-3 and e-6 are cited by memories 3, 6, 33, 36, ...
    expected = [i for i in range(300) if i % 30 in (3, 6) and i % 3 == 0]
    assert sorted(int(m.content.split()[-1]) for m in citing) == expected
    cue_plan, citing_plan = plans
    assert "ix_memories_user_cues" in cue_plan and "ix_memories_source_events" in citing_plan, plans
    # One bitmap heap scan, the lookup's; any other read is of the 20 rows returned, by key.
    reads = [line for line in cue_plan.splitlines() if " on memories" in line]
    assert len([line for line in reads if "Bitmap Heap Scan" in line]) == 1, cue_plan
    for line in (line for line in reads if "Bitmap Heap Scan" not in line):
        assert "memories_pkey" in line and _rows_read(line) <= 20, cue_plan
    assert len([line for line in citing_plan.splitlines() if " on memories" in line]) == 1, citing_plan


def _rows_read(plan_line: str) -> int:
    """rows x loops of an EXPLAIN ANALYZE node: how many rows it read."""
    actual = plan_line.split("(actual ")[1]
    rows = int(actual.split("rows=")[1].split()[0])
    loops = int(actual.split("loops=")[1].split(")")[0])
    return rows * loops
