"""Export and import between two tenants whose ids pair up (``ac`` / ``ac:me``), each with users
whose ids do too (``u1`` / ``u10``), over the API on real Postgres (issue 29):

- an export carries the rows of its tenant and user only, in every table (no other tenant's
  ``u1``, not ``u10`` for ``u1``);
- a memory id another tenant holds imports exactly as an id nobody holds: the same answer, and
  the importing user's memory under the id the import gives it (no existence oracle, and no way
  to take an id another tenant's pipeline will mint);
- a file is refused whole, naming the line and the field, for the values the probe stored (a
  time in year 9999, a role ``robot``, a NaN score, a 3-dimension vector) and for a bad line
  after more than one batch was written: nothing of it stays, in either tenant;
- ``cuemem import`` of a line nested 100k deep or holding a lone surrogate prints one line naming
  it and exits non-zero, without a traceback.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from service.operations.transfer import BATCH, export_lines
from shared.events import EventLimits
from shared.ingest.record import record_event
from shared.models import MemoryStatus, imported_memory_id, memory_id
from shared.settings import Settings
from tests.support.api import ApiEnv, api_settings, build_env, seed_memory
from tests.support.services import run_cuemem

TENANTS = ("ac", "ac:me")
USERS = ("u1", "u10")
TABLES = ("events", "event_receipts", "memories", "memory_history")
AT = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    env = build_env(api_settings(it_settings), tenants=TENANTS)
    c = env.container
    for tenant in TENANTS:
        for user in USERS:
            with c.uow() as uow:
                turn = {
                    "event_id": f"e-{user}", "tenant_id": tenant, "user_id": user, "session_id": "s1",
                    "seq": 1, "role": "user", "content": f"{tenant}/{user} keeps bees", "at": AT.isoformat(),
                }  # fmt: skip
                record_event(uow, turn, EventLimits())
                uow.commit()
            seed_memory(c, tenant, user, f"{tenant}/{user} drinks green tea", at=AT)
    try:
        yield env
    finally:
        env.client.app.state.close()  # type: ignore[attr-defined]
        c.close()


def _counts(env: ApiEnv) -> dict[tuple[str, str, str], int]:
    with env.container.uow() as uow:
        session = uow.session  # type: ignore[attr-defined]
        return {
            (table, str(tenant), str(user)): int(n)
            for table in TABLES
            for tenant, user, n in session.execute(
                text(f"SELECT tenant_id, user_id, count(*) FROM {table} GROUP BY 1, 2")
            )
        }


def _post(env: ApiEnv, tenant: str, lines: list[str]) -> Any:
    return env.client.post("/v1/import", content="\n".join(lines) + "\n", headers=env.auth(tenant))


def test_an_export_carries_its_tenant_and_user_only(env: ApiEnv) -> None:
    for tenant in TENANTS:
        for user in (*USERS, None):
            params = {"user_id": user} if user else {}
            r = env.client.get("/v1/export", params=params, headers=env.auth(tenant))
            assert r.status_code == 200, r.text
            items = [json.loads(line) for line in r.text.splitlines()[1:-1]]
            owners = {(i["row"]["tenant_id"], i["row"]["user_id"]) for i in items}
            assert owners == ({(tenant, user)} if user else {(tenant, u) for u in USERS}), (tenant, user)
            # Every table holds one row per user: a filter missing from any of them shows.
            per_table = {t: sum(1 for i in items if i["table"] == t) for t in TABLES}
            assert per_table == dict.fromkeys(TABLES, 1 if user else len(USERS)), (tenant, user)
    # The CLI's export (the same function) for the first tenant's u1: its own rows only.
    lines = list(export_lines(env.container, "ac", "u1"))
    assert {json.loads(line)["row"]["content"] for line in lines if '"table":"memories"' in line} == {
        "ac/u1 drinks green tea"
    }


def _moved(env: ApiEnv, user: str, new_id: str) -> list[str]:
    """The export of ac:me's u1, moved to ``user`` (new event ids), its memory as ``new_id``."""
    out = []
    for line in export_lines(env.container, "ac:me", "u1"):
        item = json.loads(line)
        if "format" in item:
            item["user_id"] = user
        row = item.get("row")
        if row is not None:
            row["user_id"] = user
            for column in ("event_id", "origin_event_id"):
                if row.get(column):
                    row[column] = f"{row[column]}-{user}"
            if item["table"] == "memories":
                row["id"] = new_id
            if item["table"] == "memory_history":
                row["memory_id"] = new_id
        out.append(json.dumps(item, ensure_ascii=False))
    return out


def _same_shape(answer: dict[str, Any], user: str) -> str:
    return json.dumps(answer).replace(f'"{user}"', '"USER"')


def test_a_memory_id_of_another_tenant_imports_as_one_nobody_holds(env: ApiEnv) -> None:
    held = memory_id("ac", "u1", "ev-ac-u1-0", 0)  # ac's u1's memory (seed_memory's id)
    nobody = str(uuid.uuid4())
    before = _counts(env)
    answers = {}
    for user, file_id in (("u2", held), ("u20", nobody)):
        r = _post(env, "ac:me", _moved(env, user, file_id))
        assert r.status_code == 200, r.text
        answers[user] = r.json()
        assert answers[user]["imported"] == dict.fromkeys(TABLES, 1)
    assert _same_shape(answers["u2"], "u2") == _same_shape(answers["u20"], "u20")
    for user, file_id in (("u2", held), ("u20", nobody)):
        r = env.client.get(f"/v1/users/{user}/memories", headers=env.auth("ac:me"))
        assert [m["id"] for m in r.json()["items"]] == [imported_memory_id("ac:me", user, file_id)]
        # Imported again: found in place, under the same id.
        again = _post(env, "ac:me", _moved(env, user, file_id)).json()
        assert again["imported"] == dict.fromkeys(TABLES, 0), again
        assert again["already_present"] == dict.fromkeys(TABLES[:3], 1)
    # ac's memory is untouched, and ac still holds exactly what it held.
    r = env.client.get(f"/v1/users/u1/memories/{held}", headers=env.auth("ac"))
    assert r.status_code == 200 and r.json()["content"] == "ac/u1 drinks green tea", r.text
    after = _counts(env)
    assert {k: v for k, v in after.items() if k[1] == "ac"} == {
        k: v for k, v in before.items() if k[1] == "ac"
    }


@pytest.mark.parametrize(
    ("table", "column", "value", "problem"),
    [
        (
            "events",
            "at",
            "9999-12-31T23:59:59+00:00",
            "events.at: '9999-12-31T23:59:59+00:00' is out of range",
        ),
        ("events", "role", "robot", "events.role: 'robot' is not one of"),
        ("memories", "score", float("nan"), "memories.score: must be a finite number"),
        ("memories", "embedding", [0.1, 0.2, 0.3], "memories.embedding: has 3 dimensions"),
        ("memories", "status", "pending", "memories.status: 'pending' is not one of"),
    ],
)
def test_a_bad_value_refuses_the_file_naming_line_and_field(
    env: ApiEnv, table: str, column: str, value: Any, problem: str
) -> None:
    lines = _moved(env, "u3", str(uuid.uuid4()))
    at = next(i for i, line in enumerate(lines) if f'"table": "{table}"' in line)
    item = json.loads(lines[at])
    item["row"][column] = value
    lines[at] = json.dumps(item)
    before = _counts(env)
    r = _post(env, "ac:me", lines)
    assert r.status_code == 422, r.text
    (field,) = r.json()["error"]["fields"]
    assert field["field"] == f"line {at + 1}" and field["problem"].startswith(problem), field
    assert "nothing was imported" in r.json()["error"]["message"]
    assert _counts(env) == before


def test_a_bad_line_after_several_written_batches_leaves_nothing(env: ApiEnv) -> None:
    """More turns than one batch holds: the first batches are written (in the one transaction)
    before the bad last line is read; the refusal rolls them back."""
    n = 2 * BATCH + 7
    head = json.loads(_moved(env, "u4", str(uuid.uuid4()))[0])
    turns = [
        {
            "tenant_id": "ac:me",
            "user_id": "u4",
            "event_id": f"big-{i}",
            "session_id": "s1",
            "seq": i,
            "role": "user",
            "content": f"turn {i}",
            "content_hash": f"{i:064x}",
            "at": AT.isoformat(),
            "metadata": {},
            "stage": "done",
            "extraction_reasons": [],
        }  # fmt: skip
        for i in range(1, n + 1)
    ]
    end = {"end": True, "rows": {**dict.fromkeys(TABLES, 0), "events": n}}
    good = [json.dumps(head), *(json.dumps({"table": "events", "row": t}) for t in turns), json.dumps(end)]
    bad = [*good[:-2], json.dumps({"table": "events", "row": {**turns[-1], "seq": -5}}), good[-1]]
    before = _counts(env)
    r = _post(env, "ac:me", bad)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["fields"] == [
        {"field": f"line {n + 1}", "problem": "events.seq: must be between 1 and 2^53 - 1, got -5"}
    ]
    assert _counts(env) == before
    r = _post(env, "ac:me", good)
    assert r.status_code == 200 and r.json()["imported"]["events"] == n, r.text
    assert _counts(env)[("events", "ac:me", "u4")] == n


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[" * 100_000 + "]" * 100_000, "line 2: nested too deep"),
        ("surrogate", "line 2: events.content: is not valid UTF-8 (it holds a lone surrogate)"),
    ],
)
def test_the_cli_names_the_line_without_a_traceback(
    env: ApiEnv, tmp_path: Path, line: str, problem: str
) -> None:
    lines = list(export_lines(env.container, "ac", "u1"))
    if line == "surrogate":  # the turn of line 2, its content a lone surrogate (escaped: valid UTF-8)
        item = json.loads(lines[1])
        line = json.dumps({**item, "row": {**item["row"], "content": "bees \ud800"}})
        lines.pop(1)
    file = tmp_path / "bad.jsonl"
    file.write_text("\n".join([lines[0], line, *lines[1:]]) + "\n")
    before = _counts(env)
    done = run_cuemem(env.container.settings, "import", str(file))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    (message,) = done.stderr.strip().splitlines()
    assert problem in message and "nothing was imported" in message, message
    assert _counts(env) == before


def test_an_event_id_is_per_tenant_and_per_user(env: ApiEnv) -> None:
    """ac:me's file of u10 holding the event id of ac:me's u1 is refused naming it; the same id in
    the other tenant (ac holds e-u1 too) was never a clash."""
    lines = []
    for line in export_lines(env.container, "ac:me", "u1"):
        item = json.loads(line)
        if "format" in item:
            item["user_id"] = "u10"
        if "row" in item:
            item["row"]["user_id"] = "u10"
            if item["table"] == "memories":
                item["row"]["id"] = str(uuid.uuid4())
        lines.append(json.dumps(item))
    before = _counts(env)
    r = _post(env, "ac:me", lines)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["fields"] == [
        {"field": "line 2", "problem": "events.event_id: 'e-u1' is held by another user of this tenant"}
    ]
    assert _counts(env) == before


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deep to be a row of an export"),
        (b"surrogate", "events.content: is not valid UTF-8 (it holds a lone surrogate)"),
        (b'{"table": "events", "row": {"content": "caf\xe9"}}', "not UTF-8 (invalid continuation byte)"),
    ],
)
def test_the_api_names_a_line_it_cannot_read(env: ApiEnv, line: bytes, problem: str) -> None:
    lines = [line.encode() for line in export_lines(env.container, "ac:me", "u1")]
    if line == b"surrogate":  # the turn of line 2, its content a lone surrogate (escaped: valid UTF-8)
        item = json.loads(lines.pop(1))
        line = json.dumps({**item, "row": {**item["row"], "content": "bees \ud800"}}).encode()
    before = _counts(env)
    r = env.client.post(
        "/v1/import", content=b"\n".join([lines[0], line, *lines[1:]]), headers=env.auth("ac:me")
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["fields"] == [{"field": "line 2", "problem": problem}]
    assert _counts(env) == before


def test_an_export_leaves_out_drafts_still_in_the_pipeline(env: ApiEnv) -> None:
    """A pending memory is a draft of a pipeline run (import refuses one): not exported, and the
    export still imports."""
    seed_memory(
        env.container, "ac:me", "u10", "a draft still in the pipeline", status=MemoryStatus.PENDING, n=1
    )
    lines = list(export_lines(env.container, "ac:me", "u10"))
    memories = [json.loads(line)["row"] for line in lines if '"table":"memories"' in line]
    assert [m["content"] for m in memories] == ["ac:me/u10 drinks green tea"]
    r = _post(env, "ac:me", lines)
    assert r.status_code == 200 and r.json()["already_present"]["memories"] == 1, r.text
