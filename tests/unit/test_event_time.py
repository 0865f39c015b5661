"""Event time (issue 14, item 5): when something happened is not when it was told.

"前天我把车送去保养了" told on 2026-08-12 happened on 2026-08-10. Ingest resolves a turn's time
expressions against its told time and keeps the days they name on the turn and on its memories
(``happened``); recall's time path finds an item whose event time overlaps the range a query
names, and says so (``happened:`` in the matched cues). On in-memory fakes, with the real rules.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shared.language.timeexpr import happened
from tests.support.pipeline import TurnHarness, ask, turn

TOLD = datetime(2026, 8, 12, 10, 0, tzinfo=UTC)  # a Wednesday
AUG_10 = (datetime(2026, 8, 10, tzinfo=UTC), datetime(2026, 8, 11, tzinfo=UTC))
LATER = datetime(2026, 8, 20, 9, 0, tzinfo=UTC)  # when the questions are asked


def _day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=UTC)
    return start, start + timedelta(days=1)


@pytest.mark.parametrize(
    ("text", "at", "expected"),
    [
        ("前天我把车送去保养了", TOLD, AUG_10),
        ("I went to a support group yesterday", datetime(2023, 5, 8, 13, 56, tzinfo=UTC), _day(2023, 5, 7)),
        ("8月10号我去医院做了体检", TOLD, AUG_10),  # absolute dates count too
        ("On August 10 I had my annual checkup", TOLD, AUG_10),
        ("上周我去杭州出差了", TOLD, (datetime(2026, 8, 3, tzinfo=UTC), datetime(2026, 8, 10, tzinfo=UTC))),
        ("I have a dentist appointment tomorrow at 9", TOLD, _day(2026, 8, 13)),  # plans: when they fall
    ],
)
def test_a_turns_time_expressions_give_when_it_happened(
    text: str, at: datetime, expected: tuple[datetime, datetime]
) -> None:
    assert happened(text, at) == expected


def test_no_time_expression_means_no_event_time() -> None:
    assert happened("我住在苏州", TOLD) is None
    assert happened("I work as a product manager at a game studio", TOLD) is None


def test_several_times_span_from_the_first_day_to_the_last_and_far_apart_ones_keep_the_first() -> None:
    assert happened("昨天我去了北京，明天回上海", TOLD) == (_day(2026, 8, 11)[0], _day(2026, 8, 13)[1])
    # "2020年" and "上周" are six years apart: one range over both would match any question between.
    assert happened("2020年我搬到了苏州，上周又去了杭州", TOLD) == (
        datetime(2020, 1, 1, tzinfo=UTC),
        datetime(2021, 1, 1, tzinfo=UTC),
    )


def _told(h: TurnHarness, seq: int, content: str, at: datetime = TOLD) -> str:
    message = {**turn(seq, content), "at": at.isoformat()}
    h.drain(message)
    return str(message["event_id"])


@pytest.mark.parametrize(
    "text", ["8月10号我去医院做了体检", "On August 10 I had my annual checkup at the clinic"]
)
def test_ingest_keeps_the_event_time_on_the_turn_and_its_memory_and_the_told_time_as_it_was(
    text: str,
) -> None:
    h = TurnHarness()
    event_id = _told(h, 1, text)
    assert h.state.events[event_id]["happened"] == AUG_10
    [memory] = h.state.memories.values()
    assert (memory.happened_from, memory.happened_to) == AUG_10
    assert memory.valid_from == memory.created_at == TOLD  # validity (supersession) is the told time


@pytest.mark.parametrize("text", ["前天我把车送去保养了", "I took my car in for service yesterday"])
def test_ingest_keeps_the_event_time_of_a_turn_that_made_no_memory(text: str) -> None:
    h = TurnHarness()
    event_id = _told(h, 1, text)
    assert not h.state.memories  # a logged turn only
    expected = AUG_10 if "前天" in text else _day(2026, 8, 11)
    assert h.state.events[event_id]["happened"] == expected
    assert h.state.events[event_id]["event"].at == TOLD


@pytest.mark.parametrize(
    "text", ["我在一家游戏公司做产品经理", "I work as a product manager at a game studio"]
)
def test_a_turn_with_no_time_expression_has_no_event_time(text: str) -> None:
    h = TurnHarness()
    event_id = _told(h, 1, text)
    assert "happened" not in h.state.events[event_id]
    [memory] = h.state.memories.values()
    assert memory.happened_from is None and memory.happened_to is None


def test_a_fragment_of_a_split_turn_keeps_only_the_times_its_own_words_name() -> None:
    h = TurnHarness()
    _told(h, 1, "我住杭州，不吃香菜，下周三要去上海开会")
    by_content = {m.content: (m.happened_from, m.happened_to) for m in h.state.memories.values()}
    assert by_content["下周三要去上海开会"] == _day(2026, 8, 19)
    assert by_content["我住杭州"] == (None, None) and by_content["不吃香菜"] == (None, None)


DATE_QUERY = {"zh": "我8月10号做了什么？", "en": "What did I do on August 10?"}
CAR = {"zh": "前天我把车送去保养了", "en": "I took my car in for service two days ago"}
OTHERS = {
    "zh": [(TOLD - timedelta(days=4), "我喜欢周末去爬山"), (TOLD, "我养了一只猫，叫团子"),
           (TOLD + timedelta(days=3), "最近天气很热")],
    "en": [(TOLD - timedelta(days=4), "I love hiking on weekends"), (TOLD, "I have a cat named Mochi"),
           (TOLD + timedelta(days=3), "The weather has been really hot lately")],
}  # fmt: skip


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_date_question_finds_what_happened_that_day_though_it_was_told_later(lang: str) -> None:
    h = TurnHarness()
    for seq, (at, text) in enumerate(OTHERS[lang], 1):
        _told(h, seq, text, at)
    car = _told(h, 9, CAR[lang])
    assert happened(CAR[lang], TOLD) == AUG_10

    out = ask(h, DATE_QUERY[lang], now=LATER)
    top = out.items[0]
    assert top.id == f"event:{car}" and top.content == CAR[lang], [i.content for i in out.items]
    assert "time" in top.explanation["paths"]
    assert "happened:2026-08-10..2026-08-10" in top.explanation["matched_cues"]
    assert top.created_at == TOLD.isoformat()  # the told time stays what the item shows


def test_a_date_question_finds_a_memory_by_its_event_time_and_by_its_told_time_as_before() -> None:
    h = TurnHarness()
    _told(h, 1, "8月10号我去医院做了体检", TOLD + timedelta(days=2))  # told on the 14th
    _told(h, 2, "我在一家游戏公司做产品经理", datetime(2026, 8, 10, 15, 0, tzinfo=UTC))  # told on the 10th
    _told(h, 3, "我养了一只猫，叫团子", TOLD)

    out = ask(h, DATE_QUERY["zh"], now=LATER)
    found = {i.content: i.explanation["matched_cues"] for i in out.items if "time" in i.explanation["paths"]}
    assert "happened:2026-08-10..2026-08-10" in found["8月10号我去医院做了体检"]
    assert "time:2026-08-10..2026-08-10" in found["我在一家游戏公司做产品经理"]
    assert "我养了一只猫，叫团子" not in found
    assert out.items[0].content in found


NIGHT_SHIFTS = {
    "zh": "我在市医院当护士，这个月都上夜班",
    "en": "I work as a nurse at the city hospital, night shifts this month",
}
FOOD = {"zh": "我不吃香菜，也不太能吃辣", "en": "I don't eat coriander and can't handle spicy food"}
TONIGHT = {"zh": "今晚吃什么好？", "en": "what should I eat tonight?"}
TWO_TIMES = {
    "zh": "昨天我去了北京，明天回上海",
    "en": "Yesterday I flew to Beijing and tomorrow I fly back to Shanghai",
}
ON_DAY = {
    "zh": {11: "我8月11号做了什么？", 13: "我8月13号做了什么？"},
    "en": {11: "What did I do on August 11?", 13: "What did I do on August 13?"},
}
AUGUST = (datetime(2026, 8, 1, tzinfo=UTC), datetime(2026, 9, 1, tzinfo=UTC))


def _range_labels(out: Any) -> dict[str, str]:
    """Each item found in a named range, by content: its range label (``happened:``, ``time:``,
    ``around:``, with the range's days)."""
    return {
        i.content: next(
            m for m in i.explanation["matched_cues"] if m.split(":")[0] in ("happened", "time", "around")
        )
        for i in out.items
        if "time" in i.explanation["paths"]
    }


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_standing_state_around_a_range_of_the_present_is_labelled_around_it(lang: str) -> None:
    h = TurnHarness()
    _told(h, 1, NIGHT_SHIFTS[lang])  # happened: all of August
    _told(h, 2, FOOD[lang], TOLD - timedelta(days=5))
    assert happened(NIGHT_SHIFTS[lang], TOLD) == AUGUST
    assert any(m.happened_from == AUGUST[0] for m in h.state.memories.values()), "a memory, not only a turn"

    # Asked on the 13th: "tonight" has not ended, and the month of night shifts lies around it.
    out = ask(h, TONIGHT[lang], now=TOLD + timedelta(days=1))
    labels = _range_labels(out)
    assert labels.get(NIGHT_SHIFTS[lang], "").startswith("around:2026-08-13"), labels

    # Told tonight, it lies in tonight by its told time, whatever its event time.
    told_tonight = _range_labels(ask(h, TONIGHT[lang], now=TOLD + timedelta(hours=2)))
    assert told_tonight.get(NIGHT_SHIFTS[lang], "").startswith("time:2026-08-12"), told_tonight

    # Of a day in the past the same state is what happened then. (The range rule's order:
    # tests/unit/test_roles_and_floor.py.)
    past = ask(h, ON_DAY[lang][13], now=LATER)
    assert _range_labels(past).get(NIGHT_SHIFTS[lang], "").startswith("happened:2026-08-13"), _range_labels(
        past
    )


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("zone", [UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5))])
def test_two_times_told_together_lie_in_either_day_whatever_the_zones(lang: str, zone: timezone) -> None:
    h = TurnHarness()
    _told(h, 1, TWO_TIMES[lang], TOLD.astimezone(zone))  # happened: August 11 to 13, in the turn's zone
    assert happened(TWO_TIMES[lang], TOLD) == (_day(2026, 8, 11)[0], _day(2026, 8, 13)[1])
    for day in (11, 13):
        # Asked in UTC, on the day itself: a range that has not ended.
        labels = _range_labels(ask(h, ON_DAY[lang][day], now=datetime(2026, 8, day, 9, 0, tzinfo=UTC)))
        assert labels.get(TWO_TIMES[lang], "").startswith(("happened:", "time:")), (day, labels)


LOGGED_ONLY = {"zh": "哈哈这个月全是夜班", "en": "lol this month is all night shifts for me haha"}
BOTH_RANGES = {
    "zh": "昨天吃了什么，今晚吃什么好？",
    "en": "what did I eat yesterday and what should I eat tonight?",
}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_logged_turn_around_a_range_is_labelled_so_and_another_range_that_holds_it_wins(lang: str) -> None:
    h = TurnHarness()
    event_id = _told(h, 1, LOGGED_ONLY[lang])  # chit-chat: no memory cites it, it stays a logged turn
    assert not any(s["event_id"] == event_id for m in h.state.memories.values() for s in m.sources)
    tonight = _range_labels(ask(h, TONIGHT[lang], now=TOLD + timedelta(days=1)))
    assert tonight.get(LOGGED_ONLY[lang], "").startswith("around:2026-08-13"), tonight
    # Named with a day that has ended too (yesterday), the month lies in that range: it is in it.
    both = _range_labels(ask(h, BOTH_RANGES[lang], now=TOLD + timedelta(days=1)))
    assert both.get(LOGGED_ONLY[lang], "").startswith(("happened:2026-08-12", "time:2026-08-12")), both
