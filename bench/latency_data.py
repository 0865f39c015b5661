"""The latency benchmark's data: the embedded text pool, synthetic memories bulk-loaded into
Postgres (binary COPY) and the vector index, and the working-memory fill.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from bench.latency import LatencyConfig
    from bench.latency_log import LogWriter
    from bench.synthetic import PoolAnalysis, PoolEntry, SyntheticMemory

TENANT = "default"


def noisy_unit(base: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """``base`` plus Gaussian noise of ``sigma`` per dimension, renormalised to unit length."""
    import numpy as np

    v = base + rng.normal(0.0, sigma, size=base.shape).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def load_pool_vectors(
    embedder: Any, pool: Sequence[PoolEntry], cache_dir: Path
) -> tuple[np.ndarray, dict[str, Any]]:
    """The pool texts' E5 passage vectors, from the disk cache when the same texts were embedded before."""
    return load_text_vectors(embedder, [e.text for e in pool], cache_dir)


def load_text_vectors(
    embedder: Any, texts: Sequence[str], cache_dir: Path, prefix: str = "pool"
) -> tuple[np.ndarray, dict[str, Any]]:
    """E5 passage vectors of ``texts``, from the disk cache when the same texts were embedded before."""
    import numpy as np
    from tqdm import tqdm

    digest = hashlib.sha256(
        json.dumps([embedder.model_name, list(texts)], ensure_ascii=False).encode()
    ).hexdigest()[:16]
    path = cache_dir / f"{prefix}-{digest}.npy"
    if path.is_file():
        return np.load(path), {"source": f"cached in {path}", "embed_s": None}
    texts = list(texts)
    out: list[list[float]] = []
    t = time.perf_counter()
    batch = 32
    with tqdm(total=len(texts), desc=f"embed {prefix} (E5 passages)", unit="text") as bar:
        for i in range(0, len(texts), batch):
            out.extend(embedder.embed_passages(texts[i : i + batch]))
            bar.update(len(texts[i : i + batch]))
    elapsed = time.perf_counter() - t
    arr = np.asarray(out, dtype=np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path, arr)
    return arr, {
        "source": f"embedded now in {elapsed:.0f} s, cached in {path}",
        "embed_s": round(elapsed, 1),
        "passages_per_s": round(len(texts) / elapsed, 1),
    }


_COPY_COLUMNS = (
    ("id", "text"),
    ("tenant_id", "text"),
    ("user_id", "text"),
    ("type", "text"),
    ("content", "text"),
    ("content_hash", "text"),
    ("importance", "float8"),
    ("status", "text"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
    ("last_accessed_at", "timestamptz"),
    ("access_count", "int4"),
    ("score", "float8"),
    ("tags", "text[]"),
    ("entities", "text[]"),
    ("cues", "text[]"),
    ("sources", "jsonb"),
    ("origin_event_id", "text"),
    ("embedding", "float4[]"),
    ("embedding_model", "text"),
    ("version", "int4"),
    ("indexed_version", "int4"),
)
_OPTIONAL_COPY_COLUMNS = (("valid_from", "timestamptz"),)
_COPY_BATCH = 10_000
_FLOAT4_OID = 700
_FLOAT4_ARRAY_OID = 1021


def float4_array_binary(values: Any) -> bytes:
    """Postgres binary wire format of a one-dimensional ``real[]`` without NULLs (what COPY BINARY
    expects), built with numpy: psycopg's own list dumper is pure Python and was the load's
    bottleneck (60 % of the time for 384-float vectors)."""
    import struct

    import numpy as np

    arr = np.asarray(values, dtype=">f4").ravel()
    body = np.empty(arr.size, dtype=[("len", ">i4"), ("val", ">f4")])
    body["len"] = 4
    body["val"] = arr
    return struct.pack(">iiiii", 1, 0, _FLOAT4_OID, arr.size, 1) + body.tobytes()


def _register_float4_array_dumper(conn: Any) -> None:
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class Float4ArrayDumper(Dumper):
        format = Format.BINARY
        oid = _FLOAT4_ARRAY_OID

        def dump(self, obj: Any) -> bytes:
            return float4_array_binary(obj)

    conn.adapters.register_dumper(None, Float4ArrayDumper)


def load_user(
    db_url: str,
    index: Any,
    user_id: str,
    count: int,
    pool: Sequence[PoolEntry],
    analyses: Sequence[PoolAnalysis | None],
    pool_vectors: np.ndarray,
    rng: np.random.Generator,
    cfg: LatencyConfig,
    now: datetime,
    *,
    with_vectors: bool,
    log: LogWriter | None = None,
    sample_size: int = 2000,
) -> list[SyntheticMemory]:
    """Binary COPY of ``count`` memories (and their index points, with the keyword terms the
    pipeline's ``memory_point`` gives them); with ``log``, also each memory's conversation turns
    (``bench.latency_log``). Returns a sample for queries."""
    import psycopg
    from psycopg.types.json import Jsonb
    from tqdm import tqdm

    from bench import synthetic
    from bench.latency_log import turn_seq
    from bench.scratch import bulk_load, libpq_url
    from shared.events import content_hash
    from shared.language.sparse import sparse_document
    from shared.ports import IndexPoint
    from workers.endpoints.embedders.e5 import E5_MODEL_NAME

    reservoir: list[SyntheticMemory] = []
    pick = random.Random(f"{cfg.seed}:{user_id}:sample")
    memories = synthetic.generate_memories(user_id, count, pool, analyses, seed=cfg.seed, now=now)
    with (
        psycopg.connect(libpq_url(db_url)) as conn,
        bulk_load(conn),  # the cue-count trigger off, one recount at the end
        tqdm(total=count, desc=f"load {user_id}", unit="row", unit_scale=True) as bar,
    ):
        _register_float4_array_dumper(conn)
        present = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories'"
            ).fetchall()
        }
        # Columns added by later migrations are filled when the schema has them.
        copy_columns = [c for c in (*_COPY_COLUMNS, *_OPTIONAL_COPY_COLUMNS) if c[0] in present]
        names = [c for c, _ in copy_columns]
        copy_sql = f"COPY memories ({', '.join(names)}) FROM STDIN (FORMAT BINARY)"
        done = 0
        while done < count:
            n = min(_COPY_BATCH, count - done)
            batch = [next(memories) for _ in range(n)]
            points: list[IndexPoint] = []
            vectors: list[np.ndarray] = []
            with conn.cursor() as cur, cur.copy(copy_sql) as cp:
                cp.set_types([t for _, t in copy_columns])
                for m in batch:
                    vector = noisy_unit(pool_vectors[m.pool], rng, cfg.noise) if with_vectors else None
                    source = {"event_id": m.event_id, "session_id": m.session_id, "seq": turn_seq(m.seq, 0),
                              "at": m.created_at.isoformat()}  # fmt: skip
                    row = {
                        "id": m.id, "tenant_id": TENANT, "user_id": user_id, "type": m.type,
                        "content": m.content,
                        "content_hash": content_hash(m.type, " ".join(m.content.split()).lower()),
                        "importance": m.importance, "status": m.status, "created_at": m.created_at,
                        "updated_at": now, "last_accessed_at": m.created_at, "access_count": 0,
                        "score": m.importance, "tags": m.tags, "entities": m.entities, "cues": m.cues,
                        "sources": Jsonb([source]), "origin_event_id": m.event_id, "embedding": vector,
                        "embedding_model": E5_MODEL_NAME if vector is not None else None,
                        "version": 1, "indexed_version": 1, "valid_from": m.created_at,
                    }  # fmt: skip
                    cp.write_row(tuple(row[c] for c in names))
                    if vector is not None:
                        vectors.append(vector)
                        payload = {"status": m.status, "type": m.type, "importance": m.importance,
                                   "score": m.importance, "created_at": m.created_at.isoformat(),
                                   "version": 1}  # fmt: skip
                        points.append(
                            IndexPoint(
                                m.id, TENANT, user_id, vector.tolist(), payload, sparse_document(m.content)
                            )
                        )
            conn.commit()
            if points and index is not None:
                index.upsert(points)
            if log is not None:
                if len(vectors) != len(batch):
                    raise ValueError("a conversation log needs the memories' vectors (with_vectors=True)")
                log.write(conn, user_id, batch, vectors, rng)
            for m in batch:  # reservoir sample, for queries that name stored entities
                if len(reservoir) < sample_size:
                    reservoir.append(m)
                else:
                    j = pick.randrange(done + 1)
                    if j < sample_size:
                        reservoir[j] = m
                done += 1
            bar.update(n)
    return reservoir


def vacuum_analyze(db_url: str) -> None:
    """Flush the GIN pending list and refresh planner statistics after a bulk load."""
    import psycopg

    from bench.scratch import libpq_url

    with psycopg.connect(libpq_url(db_url), autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) memories")
        conn.execute("VACUUM (ANALYZE) events")
        # The counts recounted after the bulk load (bench.scratch.bulk_load), as autovacuum would
        # analyze them within its next pass.
        if conn.execute("SELECT to_regclass('memory_cue_counts') IS NOT NULL").fetchone() == (True,):
            conn.execute("VACUUM (ANALYZE) memory_cue_counts")


def fill_working_memory(client: Any, users: Sequence[str], now: datetime) -> None:
    from bench import synthetic
    from infra import redis_layout
    from shared.events import Role, TurnPublished

    for n, user in enumerate(users):
        turns = synthetic.make_turns(20, users=1, seed=100 + n)
        session = f"{user}-live"
        wm_key = redis_layout.working_memory_key(TENANT, user, session)
        pipe = client.pipeline()
        for seq, turn in enumerate(turns, start=1):
            # The entry the Publisher writes (the one format: infra/redis_layout.py).
            event = TurnPublished(
                f"wm-{user}-{seq}", TENANT, user, session, seq, Role(turn.role), turn.content, now, {}
            )
            pipe.zadd(wm_key, {redis_layout.working_memory_member(event): seq})
        pipe.zadd(redis_layout.user_sessions_key(TENANT, user), {session: int(now.timestamp() * 1000)})
        pipe.execute()
