"""Export and import: a user's memory made by the real pipeline (worker processes, the index at
its owner), exported with the CLI, imported into a fresh database and data dir, answers the same
recalls (the same items, each memory under the id the import gives it in its tenant); a
second import changes nothing; a file of another format version or with a broken line is refused
naming the line, with nothing imported; a file made with another embedding model is re-embedded;
the API does the same within the key's tenant. The two-tenant cases: test_import_tenants.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from service.http.app import create_app
from service.operations.curation import create_key
from shared.models import imported_memory_id
from shared.settings import Settings
from tests.support.api import publish_turns
from tests.support.databases import SPARE_REDIS_URL, scratch_database
from tests.support.services import run_cuemem, wait_processed, wait_until
from workers.bootstrap import build_api_container
from workers.db.migrate import upgrade

TURNS = {
    "u1": [
        "My sister Ana lives in Porto and teaches piano",
        "我下周三要去上海出差，住在静安区",
        "I switched from coffee to green tea last month",
        "The staging database password rotates every 30 days",
    ],
    "u2": ["I am learning Rust on weekends", "我的猫叫豆豆"],
}
ELSEWHERE = ("Valparaiso", "Trondheim")  # the look-alikes' turns: acme:me's u1, acme's u10
QUERIES = ["where does my sister live", "出差住哪里", "what do I drink now", "database password", "tea"]
NOW = datetime.now(UTC) + timedelta(days=1)
OWNER_UP_S = 300  # a safety net only, so that an owner that never starts fails instead of hanging


@pytest.fixture
def target(it_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """A second deployment: its own database, data dir (embedded index) and Redis database."""
    with scratch_database("cuemem_import") as url:
        engine = create_engine(url)
        upgrade(engine)
        engine.dispose()
        redis_url = SPARE_REDIS_URL
        import redis

        redis.Redis.from_url(redis_url).flushdb()
        yield it_settings.model_copy(
            update={
                "database_url": url,
                "redis_url": redis_url,
                "broker_url": redis_url,
                "data_dir": tmp_path / "target",
                "embedder": "hash",
            }
        )


def _answers(client: TestClient, key: str, user: str) -> list[list[tuple[str, str]]]:
    out = []
    for query in QUERIES:
        r = client.post(
            "/v1/recall",
            json={"user_id": user, "query": query, "k": 5, "reinforce": False, "now": NOW.isoformat()},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert r.status_code == 200, r.text
        out.append([(i["id"], i["content"]) for i in r.json()["items"]])
    return out


def _count(url: str, table: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    return int(n)


def test_a_round_trip_answers_the_same_recalls(
    it_settings: Settings, target: Settings, start_workers: Any, tmp_path: Path
) -> None:
    source = it_settings.model_copy(update={"embedder": "hash", "turn_window": 3})
    target = target.model_copy(update={"turn_window": 3})
    container = build_api_container(source)
    key = create_key(container, "acme", "test")["key"]
    client = TestClient(create_app(container), raise_server_exceptions=False)
    try:
        workers = start_workers(source)
        published = []
        for user, turns in TURNS.items():
            published += publish_turns(client, key, user, turns)
        # Look-alikes that must stay out of acme's u1 file: the other tenant's u1, acme's u10.
        other_key = create_key(container, "acme:me", "test")["key"]
        published += publish_turns(client, other_key, "u1", [f"My sister lives in {ELSEWHERE[0]}"])
        published += publish_turns(client, key, "u10", [f"My sister lives in {ELSEWHERE[1]}"])
        wait_processed(container, published, workers)
        before = _answers(client, key, "u1")
        assert sum(map(len, before)) >= 5 and any(
            "Porto" in c for (c,) in [(c,) for a in before for _, c in a]
        )

        # The CLI, on the source's services: the user's file.
        exported = tmp_path / "u1.jsonl"
        done = run_cuemem(source, "export", "--user", "u1", "--tenant", "acme", "--out", str(exported))
        assert done.returncode == 0, done.stderr
        lines = exported.read_text().splitlines()
        header = json.loads(lines[0])
        assert header["format"] == "cuemem-export" and header["version"] == 1 and header["user_id"] == "u1"
        tables = [json.loads(line)["table"] for line in lines[1:-1]]
        assert tables.count("events") == 4 and "memories" in tables and "memory_history" in tables
        assert all(json.loads(line)["row"]["user_id"] == "u1" for line in lines[1:-1])
        assert all(json.loads(line)["row"]["tenant_id"] == "acme" for line in lines[1:-1])
        assert not any(place in line for place in ELSEWHERE for line in lines)
        assert json.loads(lines[-1]) == {
            "end": True,
            "rows": {
                t: tables.count(t)
                for t in dict.fromkeys(["events", "event_receipts", "memories", "memory_history"])
            },
        }

        # Refused files: nothing imported, the line named.
        bad_version = tmp_path / "v2.jsonl"
        bad_version.write_text("\n".join([json.dumps({**header, "version": 2}), *lines[1:]]) + "\n")
        refused = run_cuemem(target, "import", str(bad_version))
        assert refused.returncode != 0 and "line 1: format version 2 is not supported" in refused.stderr
        broken = tmp_path / "broken.jsonl"
        broken.write_text("\n".join([*lines[:3], "{not json", *lines[3:]]) + "\n")
        refused = run_cuemem(target, "import", str(broken))
        assert refused.returncode != 0 and "line 4: not JSON" in refused.stderr, refused.stderr
        assert _count(target.database_url or "", "events") == 0

        imported = run_cuemem(target, "import", str(exported))
        assert imported.returncode == 0, imported.stderr
        report = json.loads(imported.stdout)
        assert report["imported"]["events"] == 4 and report["reembedded"] == 0
        assert report["indexed"] == {"u1": "indexed"}
        second = run_cuemem(target, "import", str(exported))
        assert second.returncode == 0, second.stderr
        again = json.loads(second.stdout)
        assert again["imported"] == {"events": 0, "event_receipts": 0, "memories": 0, "memory_history": 0}
        truncated = tmp_path / "cut.jsonl"
        truncated.write_text("\n".join(lines[:-1]) + "\n")
        refused = run_cuemem(target, "import", str(truncated))
        assert refused.returncode != 0 and "the file ends without its end line" in refused.stderr
        assert again["already_present"]["events"] == 4

        # The target's own workers (its index owner serves the API's searches), started after the
        # import, which pushed the points itself (no owner was running).
        start_workers(target)
        target_container = build_api_container(target)
        target_key = create_key(target_container, "acme", "test")["key"]
        target_client = TestClient(create_app(target_container), raise_server_exceptions=False)
        # A search the owner does not answer in time is left out of the recall, not an error: wait
        # until the owner just started answers (a busy machine boots it slowly).
        assert wait_until(lambda: target_client.get("/v1/ready").status_code == 200, OWNER_UP_S)
        # The same answers, each memory under the id the import gives it in its tenant
        # (shared.models.imported_memory_id: ids are never taken from a file as they are); equal
        # scores are ordered by id, so a tie may come in another order under the new ids.
        expected = [
            sorted(
                (i if i.startswith("event:") else imported_memory_id("acme", "u1", i), c) for i, c in answer
            )
            for answer in before
        ]
        assert [sorted(answer) for answer in _answers(target_client, target_key, "u1")] == expected
        assert all(not a for a in _answers(target_client, target_key, "u2"))  # not exported
        # Seqs kept: the next turn of the conversation continues after the imported ones.
        with target_container.uow() as uow:
            seqs = sorted(s.event.seq for s in uow.events.recent("acme", "u1", 10, "s1"))
        assert seqs == [1, 2, 3, 4]

        # The API: the key's tenant only; another tenant's file is refused naming line 1.
        r = client.get("/v1/export", params={"user_id": "u2"}, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        u2_lines = r.text.splitlines()
        other_key = create_key(target_container, "globex", "test")["key"]
        r = target_client.post(
            "/v1/import", content="\n".join(u2_lines), headers={"Authorization": f"Bearer {other_key}"}
        )
        assert r.status_code == 422 and r.json()["error"]["fields"][0]["field"] == "line 1", r.text
        r = target_client.post(
            "/v1/import", content="\n".join(u2_lines), headers={"Authorization": f"Bearer {target_key}"}
        )
        assert r.status_code == 200 and r.json()["imported"]["events"] == 2, r.text
        assert any("豆豆" in c for a in _answers(target_client, target_key, "u2") for _, c in a) or any(
            "Rust" in c for a in _answers(target_client, target_key, "u2") for _, c in a
        )
        target_container.close()
    finally:
        container.close()


def test_a_file_of_another_model_is_embedded_again(
    e5_settings: Settings, target: Settings, tmp_path: Path
) -> None:
    """No worker needed: rows written straight, exported with the hash embedder's name, imported
    where the model is e5: the memories get e5 vectors, and recall finds them."""
    from service.operations.transfer import export_lines, import_lines
    from shared.transfer import ImportRefused, file_lines
    from tests.support.rows import memory_row
    from workers.bootstrap import build_container

    hashed = build_container(target)
    now = datetime.now(UTC)
    with hashed.uow() as uow:
        # U+2028 and U+0085 stay unescaped in the file: lines are split at newlines only.
        content = "I keep bees in the garden\u2028and\u0085hives"
        uow.memories.add(replace(memory_row(1, "acme", "u1", now), content=content))
        # Look-alikes left out of acme's u1 file (else more than one memory is embedded again).
        uow.memories.add(memory_row(2, "acme:me", "u1", now))
        uow.memories.add(memory_row(3, "acme", "u10", now))
        uow.commit()
    lines = list(export_lines(hashed, "acme", "u1"))
    hashed.close()
    e5 = build_container(e5_settings)
    text_ = "\n".join(lines) + "\n"
    with pytest.raises(ImportRefused, match=r"^line 2: the file ends without its end line"):
        import_lines(e5, file_lines(text_)[:-2])  # cut before the end line
    report = import_lines(e5, file_lines(text_))
    assert report["reembedded"] == 1 and report["embedding_model"]["here"] == e5.embedder.model_name
    with e5.uow() as uow:
        (memory,) = uow.memories.for_user("acme", "u1", None)
    assert memory.embedding_model == e5.embedder.model_name and len(memory.embedding or []) == e5.embedder.dim
    assert memory.content == content
    e5.close()
