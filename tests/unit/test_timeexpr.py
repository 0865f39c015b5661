"""Time expressions resolved against the event's time (shared.language.timeexpr)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from shared.language.timeexpr import TimeRef, earliest_future, resolve, resolve_anchored, tense

CST = dt.timezone(dt.timedelta(hours=8))
AT = dt.datetime(2026, 11, 30, 10, 0, tzinfo=CST)  # a Monday


def iso(text: str, at: dt.datetime = AT) -> list[str]:
    return [r.iso for r in resolve(text, at)]


def one(text: str, at: dt.datetime = AT) -> TimeRef:
    (ref,) = resolve(text, at)
    return ref


# The ISO form names the kind of period: 2026-12-01 a day, 2026-W50 a week, 2026-11 a month, 2026 a year.
PERIOD_KINDS = [
    ("day", re.compile(r"\d{4}-\d{2}-\d{2}")),
    ("week", re.compile(r"\d{4}-W\d{2}")),
    ("month", re.compile(r"\d{4}-\d{2}")),
    ("year", re.compile(r"\d{4}")),
]


def period_kind(iso_form: str) -> str:
    return next(kind for kind, pattern in PERIOD_KINDS if pattern.fullmatch(iso_form))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("明天", "2026-12-01"),
        ("后天", "2026-12-02"),
        ("大后天", "2026-12-03"),
        ("昨天", "2026-11-29"),
        ("前天", "2026-11-28"),
        ("今天", "2026-11-30"),
        ("今晚", "2026-11-30"),
        ("下周三", "2026-12-09"),
        ("上周三", "2026-11-25"),
        ("这周五", "2026-12-04"),
        ("本周日", "2026-12-06"),
        ("下个星期一", "2026-12-07"),
        ("上礼拜天", "2026-11-29"),
        ("下下周二", "2026-12-15"),
        ("周末", "2026-12-05"),
        ("下周末", "2026-12-12"),
        ("3月5日", "2026-03-05"),
        ("十二月二十五号", "2026-12-25"),
        ("2027年1月5日", "2027-01-05"),
        ("2026-12-24", "2026-12-24"),
        ("三天后", "2026-12-03"),
        ("两周后", "2026-12-14"),
        ("3天前", "2026-11-27"),
        ("过两天", "2026-12-02"),
        ("三个月后", "2027-02-28"),
        ("tomorrow", "2026-12-01"),
        ("yesterday", "2026-11-29"),
        ("today", "2026-11-30"),
        ("tonight", "2026-11-30"),
        ("the day after tomorrow", "2026-12-02"),
        ("next Friday", "2026-12-11"),
        ("this Friday", "2026-12-04"),
        ("on Friday", "2026-12-04"),
        ("coming Friday", "2026-12-04"),
        ("last Monday", "2026-11-23"),
        ("next Wednesday", "2026-12-09"),
        ("this weekend", "2026-12-05"),
        ("next weekend", "2026-12-12"),
        ("in two days", "2026-12-02"),
        ("in 3 days", "2026-12-03"),
        ("in a week", "2026-12-07"),
        ("3 days ago", "2026-11-27"),
        ("a week ago", "2026-11-23"),
        ("on March 3", "2026-03-03"),
        ("March 3rd, 2027", "2027-03-03"),
        ("the 3rd of March", "2026-03-03"),
        ("5 June", "2026-06-05"),
        ("3/15", "2026-03-15"),
        ("12/24/2026", "2026-12-24"),
        ("on the 15th", "2026-11-15"),
        ("下周", "2026-W50"),
        ("上周", "2026-W48"),
        ("这周", "2026-W49"),
        ("next week", "2026-W50"),
        ("last week", "2026-W48"),
        ("the week after next", "2026-W51"),
        ("本月", "2026-11"),
        ("这个月", "2026-11"),
        ("上个月", "2026-10"),
        ("下个月", "2026-12"),
        ("next month", "2026-12"),
        ("last month", "2026-10"),
        ("三月份", "2026-03"),
        ("明年三月", "2027-03"),
        ("去年12月", "2025-12"),
        ("in March", "2026-03"),
        ("next March", "2027-03"),
        ("last December", "2025-12"),
        ("March 2027", "2027-03"),
        ("今年", "2026"),
        ("去年", "2025"),
        ("明年", "2027"),
        ("前年", "2024"),
        ("2019年", "2019"),
        ("this year", "2026"),
        ("last year", "2025"),
        ("next year", "2027"),
        ("since 2019", "2019"),
        ("两年后", "2028"),
    ],
)
def test_days_weeks_months_years(text: str, expected: str) -> None:
    ref = one(text)
    assert ref.kind == period_kind(expected), ref
    assert ref.iso == expected
    assert ref.datetime is None


def test_periods_carry_their_first_and_last_day() -> None:
    week = one("下周")
    assert (week.date, week.last) == (dt.date(2026, 12, 7), dt.date(2026, 12, 13))
    month = one("二月份")
    assert (month.date, month.last) == (dt.date(2026, 2, 1), dt.date(2026, 2, 28))
    weekend = one("this weekend")
    assert (weekend.date, weekend.last) == (dt.date(2026, 12, 5), dt.date(2026, 12, 6))
    year = one("去年")
    assert (year.date, year.last) == (dt.date(2025, 1, 1), dt.date(2025, 12, 31))


@pytest.mark.parametrize(
    ("text", "span", "expected"),
    [
        ("明天下午三点提醒我开会", "明天下午三点", "2026-12-01T15:00:00+08:00"),
        ("下周三下午两点半", "下周三下午两点半", "2026-12-09T14:30:00+08:00"),
        ("今晚8点", "今晚8点", "2026-11-30T20:00:00+08:00"),
        ("明早7点出发", "明早7点", "2026-12-01T07:00:00+08:00"),
        ("中午1点", "中午1点", "2026-11-30T13:00:00+08:00"),
        ("晚上十点一刻", "晚上十点一刻", "2026-11-30T22:15:00+08:00"),
        ("3月5日 15:30", "3月5日 15:30", "2026-03-05T15:30:00+08:00"),
        ("tomorrow at 3pm", "tomorrow at 3pm", "2026-12-01T15:00:00+08:00"),
        ("3pm tomorrow", "3pm tomorrow", "2026-12-01T15:00:00+08:00"),
        ("next Friday at 10:30am", "next Friday at 10:30am", "2026-12-11T10:30:00+08:00"),
        ("tonight at 8", "tonight at 8", "2026-11-30T20:00:00+08:00"),
        ("tomorrow at 3", "tomorrow at 3", "2026-12-01T15:00:00+08:00"),
        ("tomorrow at noon", "tomorrow at noon", "2026-12-01T12:00:00+08:00"),
        ("at 3pm", "at 3pm", "2026-11-30T15:00:00+08:00"),
        ("下午三点", "下午三点", "2026-11-30T15:00:00+08:00"),
        ("in 2 hours", "in 2 hours", "2026-11-30T12:00:00+08:00"),
        ("半小时后", "半小时后", "2026-11-30T10:30:00+08:00"),
    ],
)
def test_clock_times_give_datetimes_in_the_events_timezone(text: str, span: str, expected: str) -> None:
    ref = one(text)
    assert ref.kind == "datetime"
    assert ref.text == span
    assert ref.iso == expected
    assert ref.datetime is not None and ref.datetime.utcoffset() == dt.timedelta(hours=8)
    assert ref.date == ref.datetime.date()


def test_a_passed_hour_in_a_plan_is_the_next_day() -> None:
    late = dt.datetime(2026, 11, 30, 16, 0, tzinfo=CST)
    assert iso("下午三点要开会", late) == ["2026-12-01T15:00:00+08:00"]
    assert iso("下午三点开了会", late) == ["2026-11-30T15:00:00+08:00"]


def test_a_clock_time_after_a_day_stays_on_that_day() -> None:
    assert iso("明天上午10点到下午3点") == ["2026-12-01T10:00:00+08:00", "2026-12-01T15:00:00+08:00"]


def test_months_follow_the_tense() -> None:
    """三月份: the current year's March; a plan's is the next March, a past statement's the last."""
    assert iso("三月份") == ["2026-03"]
    assert iso("三月份要去日本") == ["2027-03"]
    assert iso("三月份去了日本") == ["2026-03"]
    assert iso("十二月要交") == ["2026-12"]
    assert iso("I will visit Rome in March") == ["2027-03"]
    assert iso("in March I visited Rome") == ["2026-03"]


def test_days_of_month_and_weekdays_follow_the_tense() -> None:
    assert iso("5号") == ["2026-11-05"]
    assert iso("5号要交房租") == ["2026-12-05"]
    assert iso("3月5日要体检") == ["2027-03-05"]
    friday = dt.datetime(2026, 12, 4, 9, 0, tzinfo=CST)
    assert iso("周三", friday) == ["2026-12-02"]
    assert iso("周三要交报告", friday) == ["2026-12-09"]
    assert iso("周五开了会", dt.datetime(2026, 12, 2, 9, 0, tzinfo=CST)) == ["2026-11-27"]
    assert iso("on Friday I met Anna", dt.datetime(2026, 12, 2, 9, 0, tzinfo=CST)) == ["2026-11-27"]


@pytest.mark.parametrize(
    "text",
    [
        "每周三去游泳",
        "每月15号交房租",
        "每天早上8点跑步",
        "every Friday",
        "I work from home on Fridays",
        "一周一次",
        "帮我看一下周报",
        "有3点建议",
        "快一点",
        "3号楼",
        "坐5号线",
        "我在学校",
        "you may 3x the dose",
        "a 1/2 cup of milk",
        "I sat down",
    ],
)
def test_not_time_expressions(text: str) -> None:
    assert resolve(text, AT) == []


def test_several_refs_in_text_order() -> None:
    refs = resolve("上周三见过他，下周五再见，明年三月结婚", AT)
    assert [(r.text, r.iso) for r in refs] == [
        ("上周三", "2026-11-25"),
        ("下周五", "2026-12-11"),
        ("明年三月", "2027-03"),
    ]
    assert [r.start for r in refs] == [0, 7, 13]


def test_tense() -> None:
    assert tense("三月份要去日本") == "future"
    assert tense("I will call you") == "future"
    assert tense("三月份去了日本") == "past"
    assert tense("I visited Rome") == "past"
    assert tense("I need a new laptop") is None
    assert tense("三月份") is None


def _last_second(year: int, month: int, day: int, tz: dt.tzinfo = CST) -> dt.datetime:
    return dt.datetime(year, month, day, 23, 59, 59, tzinfo=tz)


def test_earliest_future() -> None:
    refs = resolve("上周三说好了，明天下午三点或者下周三都行", AT)
    assert earliest_future(refs, AT) == dt.datetime(2026, 12, 1, 15, 0, tzinfo=CST)
    assert earliest_future(resolve("下周三交", AT), AT) == _last_second(2026, 12, 9)
    assert earliest_future(resolve("昨天", AT), AT) is None
    assert earliest_future(resolve("今天早上八点", AT), AT) is None  # 08:00, before the event at 10:00
    assert earliest_future([], AT) is None


@pytest.mark.parametrize(
    ("text", "due"),
    [
        ("我打算十二月去日本旅行", _last_second(2026, 12, 31)),
        ("下个月", _last_second(2026, 12, 31)),
        ("本月", _last_second(2026, 11, 30)),  # begun before the event, not over yet
        ("今天要交", _last_second(2026, 11, 30)),  # not the midnight already past
        ("下周要交", _last_second(2026, 12, 13)),  # the week's Sunday
        ("明年要考驾照", _last_second(2027, 12, 31)),
        ("going to Japan in March", _last_second(2027, 3, 31)),
    ],
)
def test_a_period_is_due_at_its_end(text: str, due: dt.datetime) -> None:
    assert earliest_future(resolve(text, AT), AT) == due


@pytest.mark.parametrize(
    ("text", "at", "due"),
    [
        # Said on a Monday at 20:03 in Beijing (12:03 UTC): three in the afternoon in Beijing.
        ("下周三下午三点要去医院复查", "2026-10-05T20:03:00+08:00", "2026-10-14T07:00:00+00:00"),
        ("周五早上九点开会", "2026-10-05T18:00:00+08:00", "2026-10-09T01:00:00+00:00"),
        # 21:30 on a Monday in New York is Tuesday in UTC: "tomorrow" is New York's Tuesday.
        ("call the bank tomorrow at 9am", "2026-10-05T21:30:00-05:00", "2026-10-06T14:00:00+00:00"),
        ("next Friday at 3pm", "2026-10-05T21:30:00-05:00", "2026-10-16T20:00:00+00:00"),
        ("明天要交", "2026-10-05T23:30:00+08:00", "2026-10-06T15:59:59+00:00"),
    ],
)
def test_times_of_day_are_in_the_zone_of_the_event(text: str, at: str, due: str) -> None:
    told = dt.datetime.fromisoformat(at)
    found = earliest_future(resolve(text, told), told)
    assert found is not None and found.utcoffset() == told.utcoffset()
    assert found == dt.datetime.fromisoformat(due)


def test_utc_event_and_deterministic() -> None:
    at = dt.datetime(2026, 11, 30, 23, 30, tzinfo=dt.UTC)
    assert iso("tomorrow at 9am", at) == ["2026-12-01T09:00:00+00:00"]
    assert resolve("明天下午三点，下周三", at) == resolve("明天下午三点，下周三", at)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A relative expression tied to a fixed date is about the days before that date.
        (
            "What did Maria do last weekend before April 10, 2023?",
            [("2023-04-08", "2023-04-09"), ("2023-04-10", "2023-04-10")],
        ),
        (
            "What did they do on the Sunday before October 25, 2022?",
            [("2022-10-23", "2022-10-23"), ("2022-10-25", "2022-10-25")],
        ),
        # July 24, 2023 is a Monday: "the Monday before" it is the one of the week before.
        (
            "What did Andrew do on the Monday before July 24, 2023?",
            [("2023-07-17", "2023-07-17"), ("2023-07-24", "2023-07-24")],
        ),
        (
            "Tim's writing issue last week, as mentioned on November 6, 2023",
            [("2023-10-30", "2023-11-05"), ("2023-11-06", "2023-11-06")],
        ),
        ("2023年4月10日之前的周末我去哪儿了", [("2023-04-10", "2023-04-10"), ("2023-04-08", "2023-04-09")]),
        # Not tied: each expression keeps its own meaning.
        (
            "What did I do last week and on March 3, 2023?",
            [("2024-01-08", "2024-01-14"), ("2023-03-03", "2023-03-03")],
        ),
        ("上周我去哪儿了", [("2024-01-08", "2024-01-14")]),
    ],
)
def test_relative_expressions_tied_to_a_fixed_date_resolve_against_it(text, expected):
    at = dt.datetime(2024, 1, 20, 12, tzinfo=dt.UTC)
    refs = resolve_anchored(text, at)
    assert [(r.date.isoformat(), r.last.isoformat()) for r in refs] == expected
    # Without a tie nothing changes: the plain resolver agrees on every expression's span.
    assert [(r.start, r.end) for r in refs] == [(r.start, r.end) for r in resolve(text, at)]
