"""Recall on in-memory fakes: cue rarity, time ranges, the recency path, diversity, determinism,
isolation. Extraction is the real rule-based one; the embedder is deterministic hashing."""

import dataclasses
from datetime import UTC, timedelta

import pytest

from shared.recall.cascade import recall
from shared.recall.deterministic import rarity
from shared.recall.request import RecallRequest, RecallResult
from shared.recall.windows import named_times
from tests.support.pipeline import NOW, Harness, ask, turn


def test_rarity_discounts_cues_every_memory_holds():
    assert rarity(1, 100) == 1.0 and rarity(0, 100) == 1.0
    assert rarity(2, 100) > rarity(50, 100) > rarity(100, 100) > 0
    assert rarity(5, 1) == 1.0


def test_a_name_on_every_memory_does_not_short_circuit_recall():
    h = Harness()
    facts = [
        "Melanie: my order ORD-1 arrived",
        "Melanie: I live in Berlin",
        "Melanie: I prefer green tea",
        "Melanie: I work as a nurse",
        "Melanie: this book I read last year was great",
    ]
    h.say(*facts)
    out = ask(h, "What books has Melanie read?")
    assert out.items, out.trace
    assert out.items[0].content == "Melanie: this book I read last year was great"


def test_port_number_answers_first():
    h = Harness()
    h.say("生产环境部署端口是8443", "我不吃香菜")
    out = ask(h, "8443 是哪个环境的端口")
    assert out.stage == "ranked"
    assert out.items[0].content == "生产环境部署端口是8443"
    assert "e:8443" in out.items[0].explanation["matched_cues"]


def test_time_range_in_the_query_finds_last_weeks_memory():
    h = Harness()
    h.drain({**turn(1, "我去杭州出差了三天，住在西湖边"), "at": (NOW - timedelta(days=5)).isoformat()})
    h.drain({**turn(2, "生产环境部署端口是8443"), "at": (NOW - timedelta(days=20)).isoformat()})
    windows = named_times("上周我去哪儿了", NOW).windows
    assert windows and windows[0][0] <= NOW - timedelta(days=5) < windows[0][1]
    out = ask(h, "上周我去哪儿了", now=NOW)
    # The time path finds what lies in the range and says so; the model reads it as a feature
    # (whether it comes first is the ranking's to say: a named range is no filter for a query
    # with content of its own).
    trip = next(i for i in out.items if i.content.startswith("我去杭州出差"))
    assert "time" in trip.explanation["paths"] and trip.explanation["features"]["in_time_range"] == 1.0
    port = [i for i in out.items if i.content.startswith("生产环境")]
    assert all("time" not in i.explanation["paths"] for i in port)
    assert out.trace["time_windows"]


def test_follow_up_question_finds_the_recent_device_problem():
    h = Harness()
    h.drain(
        {
            **turn(1, "我的扫地机器人型号 X200，今天一直报故障码 E42"),
            "at": (NOW - timedelta(hours=20)).isoformat(),
        }
    )
    h.drain({**turn(2, "我住杭州"), "at": (NOW - timedelta(days=30)).isoformat()})
    out = ask(h, "那我现在该怎么办？", now=NOW)
    assert out.items and "X200" in out.items[0].content
    assert "recent" in out.items[0].explanation["paths"]


def test_a_short_question_with_a_subject_of_its_own_is_no_follow_up():
    """ "我的血型是什么？" has one keyword, as most short Chinese questions do: it names its subject,
    so the newest memories must not go before it (they did: the answer came fourth, after items
    the model scored near 0). Nor when the subject is in nothing stored, or stored in other words
    ("What do I do for a living?" of "I work as a dentist"): then newness put the newest
    statement first for every such question."""
    h = Harness(turns=True)  # as deployed: the conversation log is searched too
    h.drain({**turn(1, "我的血型是AB型"), "at": (NOW - timedelta(days=30)).isoformat()})
    h.drain({**turn(2, "I work as a dentist in Leeds"), "at": (NOW - timedelta(days=20)).isoformat()})
    newer = ("我不吃香菜", "我周末去打网球", "我在学日语", "我养了一只猫叫豆豆")
    for i, text in enumerate(newer, start=3):
        h.drain({**turn(i, text), "at": (NOW - timedelta(hours=10 - i)).isoformat()})
    out = ask(h, "我的血型是什么？", now=NOW)
    assert out.items and "血型" in out.items[0].content, [i.content for i in out.items]
    for question in ("我的血型是什么？", "我的身高是多少？", "What do I do for a living?"):
        out = ask(h, question, now=NOW)
        assert not any(n.startswith("a follow-up") for n in out.trace["notes"]), question
        assert out.trace["candidates"]["recent"] == 0, question
    # A follow-up still puts the newest first, and says so, in either language.
    for question in ("那我现在该怎么办？", "And then?"):
        after = ask(h, question, now=NOW)
        assert after.items and "recent" in after.items[0].explanation["paths"], question
        assert (
            "a follow-up that names nothing of its own: the newest memories come first"
            in after.trace["notes"]
        )


def test_same_question_same_state_same_answer():
    h = Harness()
    h.say("我不吃香菜", "我喜欢喝美式", "生产环境部署端口是8443", "I live in Berlin")
    first = ask(h, "我平时喝什么").to_public()
    first["trace"].pop("timings_ms")
    for _ in range(3):
        again = ask(h, "我平时喝什么").to_public()
        again["trace"].pop("timings_ms")
        assert again == first


def test_recall_never_crosses_users():
    h = Harness()
    h.drain(turn(1, "生产环境部署端口是8443", user="alice"))
    for user in ("bob", "alice2", "Alice", "* OR 1=1"):
        out = ask(h, "生产环境部署端口是多少", user=user)
        assert out.items == [] and out.stage == "none"
        assert any(n.startswith("nothing remembered answers this") for n in out.trace["notes"])
        assert not any(n.startswith("no relevance floor") for n in out.trace["notes"]), out.trace["notes"]


def test_duplicate_texts_do_not_fill_the_list():
    from shared.recall.fusion import diverse
    from shared.recall.request import Candidate, RecallItem

    def cand(i, text):
        return Candidate(RecallItem(str(i), text, "fact", 0.0, "active", [], {}, "2026-01-01T00:00:00+00:00"))

    picked = diverse([cand(1, "A  b"), cand(2, "a b"), cand(3, "c")], 2)
    assert [c.item.id for c in picked] == ["1", "3"]


def test_keyword_path_searches_inside_the_index_with_idf():
    h = Harness()
    for i, text in enumerate(
        [
            "Melanie: I love painting the sunrise over the lake",
            "Melanie: I live in Berlin",
            "Melanie: I work as a nurse",
        ],
        1,
    ):
        h.drain(turn(i, text))
    out = ask(h, "anything about the lake?")
    top = next(i for i in out.items if i.content == "Melanie: I love painting the sunrise over the lake")
    assert "keyword" in top.explanation["paths"] and top.explanation["keyword_score"] > 0
    assert out.trace["candidates"]["keyword"] >= 1


def test_exact_keys_memory_id_and_source_event():
    h = Harness()
    h.drain(turn(1, "生产环境部署端口是8443"))
    h.drain(turn(2, "我不吃香菜", user="other"))
    [mine] = [m for m in h.state.memories.values() if m.user_id == "u1"]
    [theirs] = [m for m in h.state.memories.values() if m.user_id == "other"]
    by_id = ask(h, mine.id)
    assert by_id.stage == "deterministic" and [i.id for i in by_id.items] == [mine.id]
    assert by_id.items[0].explanation["paths"] == ["key"]
    assert [i.id for i in ask(h, "event:e-u1-s1-1").items] == [mine.id]
    assert [i.id for i in ask(h, "e-u1-s1-1").items] == [mine.id]
    # Another user's ids find nothing of theirs (no exact hit; only this user's own memories).
    for key in (theirs.id, "e-other-s1-2"):
        out = ask(h, key)
        assert "exact_key" not in out.trace and theirs.id not in [i.id for i in out.items]


def test_only_a_key_that_could_be_an_event_id_is_looked_up_as_one():
    h = Harness()
    h.drain(turn(1, "生产环境部署端口是8443", event_id="e1"))
    h.drain(turn(2, "我不吃香菜", event_id="e1:b"))
    looked_up: list[str] = []

    def asked(query: str) -> list[str]:
        request = RecallRequest("default", "u1", query, now=NOW + timedelta(days=1))
        with h.store.uow() as uow:
            by_source = uow.memories.by_source

            def recorded(tenant_id, user_id, event_id, statuses):
                looked_up.append(event_id)
                return by_source(tenant_id, user_id, event_id, statuses)

            uow.memories.by_source = recorded
            out = recall(uow, request, embedder=h.embedder, index=h.index, working_memory=None)
        return [i.content for i in out.items] if out.stage == "deterministic" else []

    # Ids that collide by prefix answer each for their own turn's memory, "event:" or bare.
    assert asked("e1") == ["生产环境部署端口是8443"] and asked("event:e1:b") == ["我不吃香菜"]
    assert looked_up == ["e1", "e1:b"]
    # No event id holds a letter outside the safe alphabet: such a key reads nothing.
    for query in ("我不吃什么？", "8443是哪个环境的端口", "event:我不吃香菜", "e1?"):
        assert asked(query) == [], query
    assert looked_up == ["e1", "e1:b"]


def test_explanations_say_what_placed_each_item_and_every_path_that_found_it():
    from shared.recall.features import FEATURES

    h = Harness()
    h.say("生产环境部署端口是8443", "测试环境部署端口是9443", "我不吃香菜")
    out = ask(h, "8443 是哪个环境的端口")
    first = out.items[0]
    assert first.content == "生产环境部署端口是8443"
    ex = first.explanation
    assert ex["ranked_by"] == "relevance_model" and out.trace["model"]
    # Every path that found it, the cue stage's and the searches'.
    assert "cue" in ex["paths"] and len(ex["paths"]) > 1, ex
    assert "e:8443" in ex["matched_cues"]
    # The score is the model's probability; the features it read are named, the strongest listed.
    assert first.score == pytest.approx(ex["relevance"], abs=1e-6) and 0 < first.score < 1
    assert set(ex["features"]) <= set(FEATURES) and ex["features"]["cue"] > 0
    assert ex["moved_by"] and all(m["feature"] in FEATURES for m in ex["moved_by"])
    scores = [i.score for i in out.items]
    assert scores == sorted(scores, reverse=True)
    by_id = ask(h, first.id)
    assert by_id.items[0].explanation["ranked_by"] == "exact_key"


def test_a_relative_time_tied_to_a_date_in_the_query_is_resolved_against_that_date():
    h = Harness()
    out = ask(h, "What did Joanna do on the Sunday before October 25, 2022?")
    assert [w[0][:10] for w in out.trace["time_windows"]] == ["2022-10-23", "2022-10-25"]


class _RecordingWorkingMemory:
    """Has no turns; notes how many it was asked for."""

    def __init__(self) -> None:
        self.limits: list[int] = []

    def recent(self, tenant_id, user_id, session_id, limit):
        self.limits.append(limit)
        return []


def test_recall_reads_as_many_working_turns_as_the_settings_keep():
    from service.operations.recall import recall_for
    from shared.settings import Settings
    from workers.bootstrap import build_container

    h = Harness()
    h.drain(turn(1, "我喜欢喝美式"))
    working = _RecordingWorkingMemory()
    settings = Settings(working_memory_turns=7, index_turns=False)
    c = build_container(
        settings, uow=h.store.uow, embedder=h.embedder, index=h.index, working_memory=working, reranker=None
    )
    recall_for(c, "u1", "我平时喝什么", now=NOW + timedelta(days=1))
    assert working.limits == [7]


def test_the_prompt_block_dates_memories_by_the_users_clock():
    from service.operations.recall import recall_for
    from shared.settings import Settings
    from workers.bootstrap import build_container

    # u1 writes from Beijing at 01:30 on Oct 6 (Oct 5 in UTC); u10 from New York at 21:00 on
    # Oct 5 (Oct 6 in UTC). Each block says the day the user said it.
    h = Harness()
    for user, at in (("u1", "2026-10-06T01:30:00+08:00"), ("u10", "2026-10-05T21:00:00-05:00")):
        h.drain({**turn(1, "我不吃香菜", user=user, session=f"s-{user}"), "at": at})
    for m in h.state.memories.values():  # as Postgres hands a timestamptz back: in UTC
        m.created_at = m.created_at.astimezone(UTC)
        m.valid_from = m.valid_from and m.valid_from.astimezone(UTC)
    assert {m.created_at.date().isoformat() for m in h.state.memories.values()} == {
        "2026-10-05",
        "2026-10-06",
    }
    c = build_container(Settings(index_turns=False), uow=h.store.uow, embedder=h.embedder, index=h.index)
    blocks = {u: recall_for(c, u, "我不吃什么", now=NOW)["prompt"] for u in ("u1", "u10")}
    assert "- 我不吃香菜 (2026-10-06)" in blocks["u1"] and "(2026-10-05)" not in blocks["u1"]
    assert "- 我不吃香菜 (2026-10-05)" in blocks["u10"] and "(2026-10-06)" not in blocks["u10"]


def test_without_working_memory_the_event_log_gives_as_many_recent_turns_as_asked():
    h = Harness()
    h.say("我不吃香菜", "我喜欢喝美式", "生产环境部署端口是8443")

    def working(turns):
        read: list[int] = []
        request = RecallRequest("default", "u1", "8443", now=NOW + timedelta(days=1), session_id="s1")
        with h.store.uow() as uow:
            recent = uow.events.recent

            def recorded(*args, **kwargs):
                out = recent(*args, **kwargs)
                read.append(len(out))
                return out

            uow.events.recent = recorded
            recall(
                uow,
                dataclasses.replace(request, working_turns=turns),
                embedder=h.embedder,
                index=h.index,
                working_memory=None,
            )
        return read

    assert (working(1), working(2), working(20)) == ([1], [2], [3])


def _recall_reading_stages(h, query: str, session: str | None = None) -> tuple[RecallResult, list[list[str]]]:
    """Recall ``query`` of u1 (in ``session``, or without one), and every list of turns whose
    stages it read."""
    reads: list[list[str]] = []
    request = RecallRequest("default", "u1", query, now=NOW + timedelta(days=1), session_id=session)
    with h.store.uow() as uow:
        stages = uow.events.stages

        def recorded(refs):
            reads.append(list(refs))
            return stages(refs)

        uow.events.stages = recorded
        out = recall(uow, request, embedder=h.embedder, index=h.index, working_memory=None)
    return out, reads


def test_without_a_session_a_finished_turn_is_not_offered_again_and_an_unfinished_one_is():
    from shared.queues import TaskName
    from tests.support.pipeline import CHAT

    h = Harness()
    h.say(CHAT)  # finished: below the extraction threshold, it made no memory
    h.run(TaskName.RECORD, (turn(2, "we also saw a fox cub by the mill"),))  # recorded, not finished
    out, reads = _recall_reading_stages(h, "fox near the mill")
    working = [i.content for i in out.items if "working" in i.explanation["paths"]]
    assert working == ["we also saw a fox cub by the mill"] and out.trace["candidates"]["working"] == 1
    assert reads and {r for read in reads for r in read} == {"default/e-u1-s1-1", "default/e-u1-s1-2"}
    # In the current session every recent turn is offered, finished or not, and no stage is read.
    out, reads = _recall_reading_stages(h, "fox near the mill", session="s1")
    working = sorted(i.content for i in out.items if "working" in i.explanation["paths"])
    assert working == sorted([CHAT, "we also saw a fox cub by the mill"])
    assert out.trace["candidates"]["working"] == 2 and reads == []


def test_stages_are_read_only_for_recent_turns_that_share_a_cue_with_the_query():
    from shared.queues import TaskName

    h = Harness()
    h.run(TaskName.RECORD, (turn(1, "生产环境部署端口是8443"),))
    h.run(TaskName.RECORD, (turn(2, "我不吃香菜"),))
    _, reads = _recall_reading_stages(h, "8443 是哪个环境的端口")
    assert reads == [["default/e-u1-s1-1"]]
    _, reads = _recall_reading_stages(h, "what is the weather in Lisbon")
    assert reads == []
