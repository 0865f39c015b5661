"""Bad input on the real parts (issue 8, item 3): the Publisher against real Redis, raw malformed
messages straight onto the broker for real worker processes, a hostile JSONL file through
`cuemem ingest`, hostile bodies through the HTTP API, and dead letters listed and replayed with
`cuemem dead-letters`.

The API's schema-driven fuzzing is tests/contract/test_api_schemathesis.py; the fixed
malformed-message cases are tests/e2e/test_pipeline_e2e.py::test_malformed_messages_*;
the generated validation cases are tests/unit/test_bad_input.py.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from infra.broker import send_only_app
from producers.publisher import Publisher
from service.operations.waiting import broker_idle
from shared.events import InvalidEvent
from shared.queues import ROUTES, TaskName
from shared.settings import Settings
from tests.support.api import api_settings, error_of, running_api
from tests.support.hostile_input import FIELDS, GOOD, INJECTIONS, nested, value_for
from tests.support.services import memory_snapshot, run_cuemem, table_counts, wait_processed, wait_until
from workers.bootstrap import build_container
from workers.failures import dead_letter


def _run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cuemem(settings, *args, timeout=180)


def _queued(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.llen(ROUTES[TaskName.RECORD].value))
    finally:
        client.close()


# --- the Publisher ------------------------------------------------------------------------------


@st.composite
def publisher_turns(draw: st.DrawFn) -> dict[str, Any]:
    fields = draw(st.lists(st.sampled_from([f for f in FIELDS if f != "seq"]), max_size=2, unique=True))
    raw = {k: v for k, v in GOOD.items() if k != "seq"}
    raw["user_id"] = "pub-fuzz"
    for field in fields:
        raw[field] = draw(value_for(field))
    return raw


def test_publisher_refuses_hostile_turns_before_sending_anything(it_settings: Settings) -> None:
    tried = Counter[str]()
    with Publisher.from_settings(it_settings) as pub:

        @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
        @given(publisher_turns())
        def check(raw: dict[str, Any]) -> None:
            before = _queued(str(it_settings.broker_url))
            try:
                published = pub.publish_turn(raw)
            except InvalidEvent as exc:
                tried["refused"] += 1
                assert exc.errors and all(e.field and e.problem for e in exc.errors)
                assert _queued(str(it_settings.broker_url)) == before, "a refused turn reached the broker"
                return
            tried["published"] += 1
            assert published.seq >= 1 and _queued(str(it_settings.broker_url)) == before + 1

        check()
    assert tried["refused"] > 20 and tried["published"] > 0, tried
    print("BAD-INPUT publisher", dict(tried))


# --- raw malformed messages on the broker ----------------------------------------------------


def _malformed_record_args(rng: random.Random, n: int) -> list[tuple[str | None, Any]]:
    """(event id or None, message) pairs: hostile values in one to three fields of a turn, plus
    messages that are not turns at all. Each with an id gets a reason; the rest a dead letter."""
    out: list[tuple[str | None, Any]] = []
    hostile: list[Any] = [
        None, 0, -1, 2**80, 3.5, float("inf"), True, [], {}, "", "  ", "\x00", "a\x00b", "x" * 40_000,
        "\u200b", "\x1b[31m", "\ufeff", *INJECTIONS, {"$ne": None}, ["a"], nested(300, as_list=False),
    ]  # fmt: skip
    for i in range(n):
        message: dict[str, Any] = {**GOOD, "event_id": f"raw-fuzz-{i}", "session_id": f"rf-{i}", "seq": 1}
        for field in rng.sample(
            ["user_id", "session_id", "seq", "role", "content", "at", "metadata"], rng.randint(1, 3)
        ):
            message[field] = rng.choice(hostile)
        if rng.random() < 0.15:
            message[rng.choice(["tenant", "evil field", "__proto__"])] = "x"
        out.append((f"raw-fuzz-{i}", message))
    for junk in (
        [1, 2],
        "a string",
        42,
        None,
        {"event_id": 7},
        {"event_id": ["x"]},
        nested(300, as_list=True),
        {**GOOD, "event_id": "raw\x00nul"},  # no storable key: a dead letter, not a receipt
    ):
        out.append((None, junk))
    # Found by this test: a NUL in a raw user id or a field name made the rejection receipt's own
    # insert fail, so the turn ended "failed" with a database error instead of "rejected".
    out.append(("raw-nul-user", {**GOOD, "event_id": "raw-nul-user", "user_id": "a\x00b"}))
    out.append(("raw-nul-key", {**GOOD, "event_id": "raw-nul-key", "bad\x00field": 1, "user_id": "\ud800"}))
    return out


def test_raw_malformed_messages_never_crash_a_worker_and_valid_turns_finish(
    it_settings: Settings, start_workers: Any
) -> None:
    c = build_container(it_settings)
    rng = random.Random(8_3)
    sender = send_only_app(str(it_settings.broker_url))
    with Publisher.from_settings(it_settings) as pub:
        good = [
            pub.publish(user_id="good", session_id="g", role="user", content=f"生产环境部署端口是{8400 + i}")
            for i in range(6)
        ]
    record_queue = ROUTES[TaskName.RECORD].value
    cases = _malformed_record_args(rng, 60)
    for _, message in cases:
        sender.send_task(TaskName.RECORD.value, args=[message], queue=record_queue)
    # Stage tasks with arguments of every wrong shape: not ids, unknown ids, hostile ids.
    stage_junk: list[Any] = [
        None,
        42,
        ["x"],
        {"event_id": "x"},
        "",
        "no-such-event",
        "' OR 1=1 --",
        "x" * 5000,
    ]
    for task in (TaskName.EXTRACT, TaskName.EMBED, TaskName.PERSIST, TaskName.INDEX):
        for junk in stage_junk:
            sender.send_task(task.value, args=[junk], queue=ROUTES[task].value)
    sender.send_task(TaskName.EXTRACT.value, args=[], queue=ROUTES[TaskName.EXTRACT].value)  # missing arg
    sender.send_task(TaskName.EXTRACT.value, args=["a", "b", "c"], queue=ROUTES[TaskName.EXTRACT].value)

    workers = start_workers()
    with_ids = [eid for eid, _ in cases if eid]
    state = wait_processed(c, [p.event_id for p in good] + with_ids, workers, timeout=240)
    assert all(state.states[p.event_id] == "done" for p in good), state.counts
    outcomes = Counter(state.states[e] for e in with_ids)
    failed = {e: state.reasons.get(e) for e in with_ids if state.states[e] not in ("rejected", "done")}
    assert not failed, failed
    sent = {eid: message for eid, message in cases if eid}
    for event_id in with_ids:
        if state.states[event_id] == "rejected":
            # The reason starts with a field the message holds (NUL shown as \\0 once stored);
            # problems are joined by "; ", which a quoted value may hold too, so only the first
            # is parsed.
            named = state.reasons[event_id].split(": ", 1)[0]
            keys = {str(k).replace("\x00", "\\0") for k in sent[event_id]} | {"user_id", "session_id"}
            assert named in keys, (state.reasons[event_id], sent[event_id].keys())
    assert state.states["raw-nul-user"] == state.states["raw-nul-key"] == "rejected"

    def letters() -> list[tuple[str, str]]:
        with c.uow() as uow:
            rows = uow.session.execute(text("SELECT task_name, reason FROM dead_letters"))  # type: ignore[attr-defined]
            return [(r[0], r[1]) for r in rows]

    # 8 junk records + 4 stage tasks x 8 junk arguments + 2 calls with the wrong arity.
    expected = 8 + 4 * len(stage_junk) + 2
    assert wait_until(lambda: len(letters()) == expected, 60), Counter(t for t, _ in letters())
    assert all(reason.strip() for _, reason in letters())
    for w in workers:
        assert w.process.poll() is None, f"worker {w.name} died on a malformed message"
    print("BAD-INPUT raw", {"records": len(cases), "stage": 4 * len(stage_junk) + 2, **outcomes,
                            "dead_letters": expected})  # fmt: skip
    c.close()


# --- JSONL through `cuemem ingest` --------------------------------------------------------------


def test_ingest_reports_every_hostile_line_and_publishes_the_rest(
    it_settings: Settings, start_workers: Any, tmp_path: Path
) -> None:
    settings = it_settings.model_copy(update={"embedder": "hash"})
    good = [
        {**GOOD, "user_id": "jl", "session_id": "jl", "seq": i + 1, "content": f"我住在城市{i}"}
        for i in range(5)
    ]
    bad: list[bytes] = [
        b'{"user_id": "jl", "session_id": "jl", "role": "user", "content": "caf\xe9"}',  # Latin-1 byte
        b"\xff\xfe\x00{",
        b"{" * 3 + b"not json",
        b"[" * 50_000 + b"]" * 50_000,
        json.dumps({**GOOD, "metadata": nested(40, as_list=False)}).encode(),
        json.dumps({**GOOD, "user_id": "alice' OR '1'='1"}).encode(),
        json.dumps({**GOOD, "content": "a\u0000b"}).encode(),
        json.dumps({**GOOD, "content": "x" * 40_000}).encode(),
        json.dumps({**GOOD, "role": ["user"]}).encode(),
        json.dumps({**GOOD, "seq": "1; DROP TABLE events"}).encode(),
        json.dumps({**GOOD, "at": "2026-13-45T99:00:00Z"}).encode(),
        json.dumps({**GOOD, "session_id": "../../etc"}).encode(),
        b'"just a string"',
        b"null",
    ]
    lines = (
        [json.dumps(g, ensure_ascii=False).encode() for g in good[:2]]
        + bad
        + [json.dumps(g, ensure_ascii=False).encode() for g in good[2:]]
    )
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    start_workers(settings)
    out = _run(settings, "ingest", str(path), "--wait", "--timeout", "180")
    assert out.returncode == 1, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["published"] == len(good) and summary["invalid"] == len(bad), summary
    assert summary["done"] == len(good), summary
    reported = [ln for ln in out.stderr.splitlines() if ln.startswith("line ")]
    bad_numbers = list(range(3, 3 + len(bad)))
    assert [int(ln.split(":")[0].split()[1]) for ln in reported] == bad_numbers, out.stderr
    expect = {
        3: "not valid UTF-8", 4: "not valid UTF-8", 5: "invalid JSON", 6: "nested too deeply",
        7: "metadata: is nested deeper", 8: "user_id:", 9: "content: contains a NUL", 10: "content: is 40000",
        11: "role:", 12: "seq:", 13: "at:", 14: "session_id:", 15: "event: must be a JSON object",
        16: "event: must be a JSON object",
    }  # fmt: skip
    for line in reported:
        number = int(line.split(":")[0].split()[1])
        assert expect[number] in line, line


# --- the HTTP API --------------------------------------------------------------------------------


_EVENT = b'{"user_id": "u", "session_id": "s", "role": "user", "content": '
# Bodies no endpoint can parse, the same answer on all three: (body, status, error code, fields).
# Every parse error names the body, its position in the problem (docs/RELIABILITY.md, "Hostile
# input"): before, the first named a byte offset ("[0]") as its field and the others none.
UNPARSABLE: list[tuple[bytes, int, str, list[str]]] = [
    (b"\xff\xfe not utf-8", 400, "malformed_json", ["body"]),
    (b'{"user_id": "caf\xe9"}', 400, "bad_request", ["body"]),
    (b"[" * 100_000 + b"]" * 100_000, 400, "bad_request", ["body"]),
    (_EVENT + b'"x", "metadata": ' + b'{"k": ' * 3_000 + b"1" + b"}" * 3_001, 400, "bad_request", ["body"]),
    (b"", 422, "invalid_input", ["body"]),
    (b"null", 422, "invalid_input", ["body"]),
]
# Parsable bodies with one bad field: (path, body, the field the 422 names). Batches are left out:
# their hostile items are answered per item (issue 18 changes that answer; see
# tests/integration/test_api.py for the batch's own cases).
BAD_FIELD: list[tuple[str, bytes, str]] = [
    ("/v1/events", _EVENT + b'"\\u0000"}', "content"),
    ("/v1/events", _EVENT + b'"\\ud800"}', "content"),
    ("/v1/events", _EVENT + b'"x", "seq": 1e400}', "seq"),
    ("/v1/recall", b'{"user_id": "u", "query": "\\u0000"}', "query"),
    ("/v1/recall", b'{"user_id": "u", "query": "\\ud800"}', "query"),
    ("/v1/recall", b'{"user_id": "u", "query": "x", "k": 1e400}', "k"),
]


def test_api_answers_hostile_bodies_with_the_status_and_field_of_each_problem(it_settings: Settings) -> None:
    with running_api(api_settings(it_settings)) as env:
        auth = {**env.auth("tenant-a"), "Content-Type": "application/json"}
        # The controls: the key and paths reach the handlers (a 401 or 404 for everything would
        # otherwise pass as "a 4xx with a message"), and no key is a 401 of its own.
        assert env.client.post("/v1/events", content=_EVENT + b'"x"}', headers=auth).status_code == 202
        assert (
            env.client.post("/v1/recall", content=b'{"user_id": "u", "query": "x"}', headers=auth).status_code
            == 200
        )
        anonymous = env.client.post(
            "/v1/events", content=b"null", headers={"Content-Type": "application/json"}
        )
        assert (anonymous.status_code, error_of(anonymous)["code"]) == (401, "unauthorized"), anonymous.text
        for body, status, code, fields in UNPARSABLE:
            for path in ("/v1/events", "/v1/recall", "/v1/events/batch"):
                r = env.client.post(path, content=body, headers=auth)
                error = error_of(r)
                seen = (r.status_code, error["code"], [f["field"] for f in error["fields"]])
                assert seen == (status, code, fields), (path, body[:60], r.text[:300])
                assert error["message"], r.text
        plain = {**auth, "Content-Type": "text/plain"}
        for path in ("/v1/events", "/v1/recall", "/v1/events/batch"):
            r = env.client.post(path, content=_EVENT + b'"x"}', headers=plain)
            error = error_of(r)
            seen = (r.status_code, error["code"], [f["field"] for f in error["fields"]])
            assert seen == (415, "unsupported_media_type", ["Content-Type"]), (path, r.text[:300])
        for path, body, field in BAD_FIELD:
            r = env.client.post(path, content=body, headers=auth)
            error = error_of(r)
            seen = (r.status_code, error["code"], [f["field"] for f in error["fields"]])
            assert seen == (422, "invalid_input", [field]), (path, body[:60], r.text[:300])


# --- dead letters: list and replay ------------------------------------------------------------


def test_dead_letters_are_listed_and_replay_to_done_and_replaying_twice_changes_nothing(
    it_settings: Settings, start_workers: Any
) -> None:
    settings = it_settings.model_copy(update={"embedder": "hash"})
    c = build_container(settings)
    sender = send_only_app(str(settings.broker_url))
    client = redis.Redis.from_url(str(settings.redis_url))
    record_queue = ROUTES[TaskName.RECORD].value
    message = {**GOOD, "event_id": "dl-poison", "session_id": "dl", "content": "我不吃香菜，点餐时记得提醒"}
    # A poison message: as if five deliveries each killed their worker (the delivery cap parks it).
    client.set("cuemem:deliveries:dl-poison-task:0", settings.max_deliveries)
    sender.send_task(TaskName.RECORD.value, args=[message], queue=record_queue, task_id="dl-poison-task")
    # A dead letter from a transient-looking cause, as an outage before the sweep fix left them.
    outage = {
        **GOOD,
        "event_id": "dl-outage",
        "session_id": "dl",
        "seq": 2,
        "content": "生产环境部署端口是8443",
    }
    dead_letter(c, TaskName.RECORD.value, "t-outage", [outage],
                "OperationalError: the database system is not yet accepting connections")  # fmt: skip
    # And one that can never succeed: replaying it parks it again, with its reason.
    sender.send_task(TaskName.EXTRACT.value, args=["dl-no-such-event"], queue=ROUTES[TaskName.EXTRACT].value)

    workers = start_workers(settings)
    state = wait_processed(c, ["dl-poison", "dl-outage"], workers, timeout=60)
    assert state.states == {"dl-poison": "failed", "dl-outage": "failed"}, state
    assert wait_until(lambda: table_counts(c)["dead_letters"] == 3, 30)

    listed = _run(settings, "dead-letters", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    letters = json.loads(listed.stdout)
    by_event = {d["event_id"]: d for d in letters}
    assert f"delivered {settings.max_deliveries + 1} times" in by_event["dl-poison"]["reason"]
    assert "OperationalError" in by_event["dl-outage"]["reason"]
    assert "EventVanished" in by_event["dl-no-such-event"]["reason"]
    assert all(d["replayed_at"] is None and d["args"] for d in letters)
    text_list = _run(settings, "dead-letters", "list")
    assert text_list.returncode == 0 and "not replayed" in text_list.stdout

    replayed = _run(settings, "dead-letters", "replay", "--all")
    assert replayed.returncode == 0, replayed.stderr
    assert sorted(json.loads(replayed.stdout)["replayed"]) == sorted(d["id"] for d in letters)
    state = wait_processed(c, ["dl-poison", "dl-outage"], workers, timeout=120)
    assert state.states == {"dl-poison": "done", "dl-outage": "done"}, state
    # The never-succeeding one is parked again as a new row; the replayed rows carry their time.
    assert wait_until(lambda: table_counts(c)["dead_letters"] == 4, 60)
    after = json.loads(_run(settings, "dead-letters", "list", "--json").stdout)
    first = {d["id"] for d in letters}
    assert all(d["replayed_at"] for d in after if d["id"] in first)
    assert [d["event_id"] for d in after if d["id"] not in first] == ["dl-no-such-event"]
    pending = json.loads(_run(settings, "dead-letters", "list", "--pending", "--json").stdout)
    assert [d["event_id"] for d in pending] == ["dl-no-such-event"]

    # Twice: the idempotent handlers absorb the second send.
    counts, snapshot = table_counts(c), memory_snapshot(c)
    ids = [str(by_event[e]["id"]) for e in ("dl-poison", "dl-outage")]
    again = _run(settings, "dead-letters", "replay", *ids)
    assert again.returncode == 0, again.stderr
    assert wait_until(lambda: client.llen(record_queue) == 0, 30)
    state = wait_processed(c, ["dl-poison", "dl-outage"], workers, timeout=60)
    assert state.states == {"dl-poison": "done", "dl-outage": "done"}
    # Until the second sends and whatever they queued ran to their end (nothing waiting, nothing
    # delivered but unacknowledged), however long that takes, had they anything to change.
    assert wait_until(lambda: broker_idle(settings), 120), "the replayed tasks never finished"
    assert table_counts(c) == counts and memory_snapshot(c) == snapshot
    with c.uow() as uow:
        timeline = uow.events.timeline("default", GOOD["user_id"], "dl")
    assert [e.event.seq for e in timeline] == [1, 2]

    for args, problem in ((["replay"], "ID"), (["replay", "999999"], "no dead letter 999999"),
                          (["replay", "1", "--all"], "not both")):  # fmt: skip
        bad = _run(settings, "dead-letters", *args)
        assert bad.returncode == 2 and problem in bad.stderr, bad.stderr
    client.close()
    c.close()
