"""What the latency benchmark reads of Postgres itself: table and index sizes, and the plan of the
cue query recall makes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.latency_data import TENANT


def table_stats(db_url: str) -> dict[str, Any]:
    import psycopg

    from bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url)) as conn:
        rows = conn.execute("SELECT count(*) FROM memories").fetchone()
        sizes = conn.execute(
            "SELECT pg_size_pretty(pg_table_size('memories')),"
            # The cue index: keyed by user since migration 0013, global before.
            " pg_size_pretty(pg_relation_size(coalesce(to_regclass('ix_memories_user_cues'),"
            " to_regclass('ix_memories_cues')))),"
            " current_setting('shared_buffers'), current_setting('work_mem'), version()"
        ).fetchone()
    assert rows is not None and sizes is not None
    return {
        "rows": int(rows[0]),
        "table_size": sizes[0],
        "gin_index_size": sizes[1],
        "shared_buffers": sizes[2],
        "work_mem": sizes[3],
        "postgres": str(sizes[4]).split(" on ")[0],
    }


def events_stats(db_url: str) -> dict[str, Any]:
    """Size of the conversation log in Postgres: rows and bytes of ``events``."""
    import psycopg

    from bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url)) as conn:
        row = conn.execute(
            "SELECT count(*), pg_size_pretty(pg_table_size('events')),"
            " pg_size_pretty(pg_indexes_size('events')) FROM events"
        ).fetchone()
    assert row is not None
    return {"events_rows": int(row[0]), "events_table_size": row[1], "events_indexes_size": row[2]}


def explain_cue_query(db_url: str, user_id: str, queries: Sequence[str]) -> list[dict[str, Any]]:
    """EXPLAIN ANALYZE of the cue query recall makes (``workers.db.memories.cue_query`` with the
    cues ``shared.recall.deterministic.fetched`` picks), to show which plan Postgres takes."""
    import psycopg
    from sqlalchemy.dialects import postgresql

    from bench.scratch import libpq_url
    from shared.language.cues import query_cues
    from shared.models import RECALLABLE_STATUSES
    from shared.recall.deterministic import fetched
    from workers.bootstrap import sql_uow_factory
    from workers.db.memories import cue_params, cue_query

    out: list[dict[str, Any]] = []
    uow_factory, dispose = sql_uow_factory(db_url)
    try:
        with psycopg.connect(libpq_url(db_url)) as conn:
            for q in queries:
                keys_ = list(query_cues(q).keys())
                with uow_factory() as uow:
                    _, df = uow.memories.cue_counts(TENANT, user_id, keys_, RECALLABLE_STATUSES)
                chosen = fetched(keys_, df)
                if not chosen:
                    out.append({"query": q, "cue_keys": keys_, "fetched": [], "plan": ["(no cue fetches)"]})
                    continue
                statement = cue_query().params(cue_params(TENANT, user_id, chosen, RECALLABLE_STATUSES, 50))
                sql = str(
                    statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
                )
                rows = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}").fetchall()  # type: ignore[call-overload]
                out.append({"query": q, "cue_keys": keys_, "fetched": chosen, "plan": [r[0] for r in rows]})
    finally:
        dispose()
    return out
