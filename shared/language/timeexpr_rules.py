"""The patterns and handlers behind :mod:`shared.language.timeexpr` (Chinese and English time expressions).

Each rule is a regex and a handler that turns a match into a :class:`Hit` resolved against the
event's day; :func:`shared.language.timeexpr.resolve` picks non-overlapping hits and joins clock times to
days. The conventions are documented in :mod:`shared.language.timeexpr`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

from shared.language.text import cn_number

DAY, WEEK, MONTH, YEAR, DATETIME = "day", "week", "month", "year", "datetime"
_I = re.IGNORECASE


@dataclass(frozen=True)
class Hit:
    """One matched expression before clock times are joined to days (kind clock: a time of day)."""

    start: int
    end: int
    kind: str  # day | week | month | year | datetime | clock
    date: dt.date | None = None
    last: dt.date | None = None
    moment: dt.datetime | None = None
    hour: int = 0
    minute: int = 0
    meridiem: str | None = None  # am | pm | noon | night
    weak: bool = False  # a clock that counts only next to a day


@dataclass(frozen=True)
class Ctx:
    """What a handler resolves against: the event's time, its day and the text's tense."""

    at: dt.datetime
    today: dt.date
    tense: str | None


_Handler = Callable[[re.Match[str], Ctx], Hit | None]

# --- calendar helpers -------------------------------------------------------------------------


def _week_start(d: dt.date) -> dt.date:
    return d - dt.timedelta(days=d.weekday())


def _month_start(d: dt.date, offset: int = 0) -> dt.date:
    year, month = divmod(d.year * 12 + d.month - 1 + offset, 12)
    return dt.date(year, month + 1, 1)


def _add_months(d: dt.date, months: int) -> dt.date:
    first = _month_start(d, months)
    last = _month_start(first, 1) - dt.timedelta(days=1)
    return first.replace(day=min(d.day, last.day))


def _safe_date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _day(
    m: re.Match[str], d: dt.date | None, meridiem: str | None = None, last: dt.date | None = None
) -> Hit | None:
    return None if d is None else Hit(m.start(), m.end(), DAY, d, last or d, meridiem=meridiem)


def _month(m: re.Match[str], year: int, month: int) -> Hit | None:
    if not 1 <= month <= 12 or not 1 <= year <= 9998:
        return None
    first = dt.date(year, month, 1)
    return Hit(m.start(), m.end(), MONTH, first, _month_start(first, 1) - dt.timedelta(days=1))


def _year(m: re.Match[str], year: int) -> Hit | None:
    if not 1 <= year <= 9999:
        return None
    return Hit(m.start(), m.end(), YEAR, dt.date(year, 1, 1), dt.date(year, 12, 31))


def _week(m: re.Match[str], c: Ctx, weeks: int, weekday: int | None, weekend: bool = False) -> Hit:
    start = _week_start(c.today) + dt.timedelta(weeks=weeks)
    if weekend:
        return Hit(m.start(), m.end(), DAY, start + dt.timedelta(days=5), start + dt.timedelta(days=6))
    if weekday is None:
        return Hit(m.start(), m.end(), WEEK, start, start + dt.timedelta(days=6))
    d = start + dt.timedelta(days=weekday)
    return Hit(m.start(), m.end(), DAY, d, d)


def _by_tense(c: Ctx, d: dt.date | None, later: Callable[[dt.date], dt.date | None],
              earlier: Callable[[dt.date], dt.date | None]) -> dt.date | None:  # fmt: skip
    """Move a date of the current week/month/year forward in a plan, back in a past statement."""
    if d is not None and c.tense == "future" and d < c.today:
        return later(d)
    if d is not None and c.tense == "past" and d > c.today:
        return earlier(d)
    return d


def _month_day(c: Ctx, month: int, day: int, year: int | None) -> dt.date | None:
    if year is not None:
        return _safe_date(year, month, day)
    return _by_tense(
        c, _safe_date(c.today.year, month, day),
        lambda d: _safe_date(d.year + 1, month, day), lambda d: _safe_date(d.year - 1, month, day),
    )  # fmt: skip


def _named_month(m: re.Match[str], c: Ctx, month: int, year: int | None, prefix: str = "") -> Hit | None:
    if year is None:
        this = c.today.month
        if prefix in ("next", "coming"):
            year = c.today.year + (month <= this)
        elif prefix in ("last", "past", "previous"):
            year = c.today.year - (month >= this)
        elif prefix == "this":
            year = c.today.year
        else:
            first = _by_tense(
                c, dt.date(c.today.year, month, 1) if month != this else c.today,
                lambda d: d.replace(year=d.year + 1, day=1), lambda d: d.replace(year=d.year - 1, day=1),
            )  # fmt: skip
            year = first.year if first else c.today.year
    return _month(m, year, month)


# --- Chinese ----------------------------------------------------------------------------------

_N = r"(\d{1,2}|[零〇一二两三四五六七八九十]{1,3})"
_NB = r"(?<![\d零〇一二两三四五六七八九十百千万几])"
_YEAR_WORDS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2, "大后年": 3}
_DAY_WORDS: dict[str, tuple[int, str | None]] = {
    "大前天": (-3, None),
    "前天": (-2, None),
    "昨天": (-1, None),
    "昨日": (-1, None),
}
_DAY_WORDS |= {"昨晚": (-1, "night"), "昨夜": (-1, "night"), "今天": (0, None), "今日": (0, None)}
_DAY_WORDS |= {"今晚": (0, "night"), "今夜": (0, "night"), "今早": (0, "am"), "明天": (1, None)}
_DAY_WORDS |= {"明日": (1, None), "明晚": (1, "night"), "明早": (1, "am"), "后天": (2, None)}
_DAY_WORDS |= {"大后天": (3, None)}
_WEEK_PREFIX = {"上上个": -2, "上上": -2, "下下个": 2, "下下": 2, "上个": -1, "下个": 1, "这个": 0, "上": -1}
_WEEK_PREFIX |= {"下": 1, "这": 0, "本": 0}
_ZH_WEEKDAY = {c: i for i, c in enumerate("一二三四五六日")} | {"天": 6} | {str(i + 1): i for i in range(7)}
_POD = {"凌晨": "am", "早上": "am", "早晨": "am", "清晨": "am", "上午": "am", "中午": "noon", "下午": "pm"}
_POD |= {"傍晚": "pm", "晚上": "night", "夜里": "night", "半夜": "night", "夜间": "night"}
_POD_RE = "(" + "|".join(sorted(_POD, key=len, reverse=True)) + ")?"


def _zh_month(m: re.Match[str], c: Ctx) -> Hit | None:
    year = int(m[1]) if m[1] else (c.today.year + _YEAR_WORDS[m[2]] if m[2] else None)
    month = cn_number(m[3]) or 0
    if not 1 <= month <= 12:
        return None
    if m[4] is None:
        return _named_month(m, c, month, year)
    return _day(m, _month_day(c, month, cn_number(m[4]) or 0, year))


def _in_month(first: dt.date, day: int) -> dt.date | None:
    return _safe_date(first.year, first.month, day)


def _day_of_month(m: re.Match[str], c: Ctx, day: int) -> Hit | None:
    return _day(m, _by_tense(
        c, _in_month(c.today, day),
        lambda d: _in_month(_month_start(d, 1), day), lambda d: _in_month(_month_start(d, -1), day),
    ))  # fmt: skip


def _relative_month(m: re.Match[str], c: Ctx, offset: int) -> Hit | None:
    first = _month_start(c.today, offset)
    return _month(m, first.year, first.month)


def _bare_weekend(m: re.Match[str], c: Ctx) -> Hit:
    """This week's Saturday and Sunday; the previous weekend in a past statement made on a weekday."""
    hit = _week(m, c, 0, None, weekend=True)
    past = c.tense == "past" and hit.date is not None and hit.date > c.today
    return _week(m, c, -1, None, weekend=True) if past else hit


def _zh_week(m: re.Match[str], c: Ctx) -> Hit | None:
    prefix, day, after = m[1], m[2], _after(m)
    if prefix is None and day is None:
        return None
    if day is None and after and after in "报刊年边围期到转全岁会":
        return None
    if day not in (None, "末") and after and after in "次遍回个天趟年岁":
        return None
    weeks = _WEEK_PREFIX[prefix] if prefix else 0
    if day == "末":
        return _week(m, c, weeks, None, weekend=True) if prefix else _bare_weekend(m, c)
    if day is None:
        return _week(m, c, weeks, None)
    if prefix is None:
        return _bare_weekday(m, c, _ZH_WEEKDAY[day])
    return _week(m, c, weeks, _ZH_WEEKDAY[day])


def _after(m: re.Match[str]) -> str:
    """The character right after the match ("" at the end)."""
    return m.string[m.end() : m.end() + 1]


def _bare_weekday(m: re.Match[str], c: Ctx, weekday: int) -> Hit | None:
    d = _week_start(c.today) + dt.timedelta(days=weekday)
    return _day(m, _by_tense(c, d, lambda x: x + dt.timedelta(weeks=1), lambda x: x - dt.timedelta(weeks=1)))


def _shift(m: re.Match[str], c: Ctx, amount: int, unit: str) -> Hit | None:
    """``amount`` units from the event: days and weeks give a day, hours and minutes a datetime."""
    if unit in ("hour", "minute"):
        moment = c.at + dt.timedelta(**{unit + "s": amount})
        return Hit(m.start(), m.end(), DATETIME, moment.date(), moment.date(), moment=moment)
    if unit == "year" and amount % 12 == 0:
        return _year(m, c.today.year + amount // 12)
    if unit in ("month", "year"):
        return _day(m, _add_months(c.today, amount))
    return _day(m, c.today + dt.timedelta(days=amount))


_ZH_UNITS = {"天": ("day", 1), "日": ("day", 1), "周": ("day", 7), "星期": ("day", 7), "礼拜": ("day", 7)}
_ZH_UNITS |= {"月": ("month", 1), "年": ("year", 12), "小时": ("hour", 1), "钟头": ("hour", 1)}
_ZH_UNITS |= {"分钟": ("minute", 1)}


def _zh_duration(m: re.Match[str], c: Ctx) -> Hit | None:
    unit, scale = _ZH_UNITS[m[3]]
    count = 0.5 if m[2] == "半" else float(cn_number(m[2]) or 0) + (0.5 if m[4] else 0.0)
    sign = -1 if m[5] and m[5].endswith("前") else 1
    if unit == "hour" and count != int(count):
        unit, count = "minute", count * 60
    if unit == "year" and count != int(count):
        unit, count, scale = "month", count * 12, 1
    if count != int(count) and unit == "month":
        return _day(m, c.today + sign * dt.timedelta(days=round(count * 30)))
    return _shift(m, c, sign * int(count) * scale, unit)


def _zh_clock(m: re.Match[str], c: Ctx) -> Hit | None:
    hour = cn_number(m[2])
    minute = {"半": 30, "一刻": 15, "三刻": 45}.get(m[3] or "", cn_number(m[4] or "0"))
    if hour is None or minute is None or hour > 24 or minute > 59:
        return None
    strong = bool(m[1] or m[3]) or "钟" in m[0] or _after(m) in tuple("前之以左开见到出集起的")
    meridiem = _POD.get(m[1] or "")
    return Hit(m.start(), m.end(), "clock", hour=hour, minute=minute, meridiem=meridiem, weak=not strong)


def _colon_clock(m: re.Match[str], c: Ctx) -> Hit | None:
    hour, minute = int(m[2]), int(m[3])
    if hour > 23:
        return None
    return Hit(m.start(), m.end(), "clock", hour=hour, minute=minute, meridiem=_POD.get(m[1] or ""))


# --- English ----------------------------------------------------------------------------------

_MONTHS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9}
_MONTHS |= {"oct": 10, "nov": 11, "dec": 12}
_MON = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?" \
       r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"  # fmt: skip
_MONTH_FULL = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_EN_WEEKDAY = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}
_EN_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_EN_NUMBERS |= {"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_EN_N = (
    r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?couple(?:\s+of)?)"
)
_EN_UNIT = r"(days?|weeks?|months?|years?|hours?|minutes?|mins?)"
_EN_POD = {"morning": "am", "afternoon": "pm", "evening": "pm", "night": "night"}
_EN_OFFSETS = {"next": 1, "coming": 1, "last": -1, "past": -1, "previous": -1, "this": 0}


def _sign(word: str) -> int:
    return -1 if word.lower() == "ago" else 1


def _en_number(word: str) -> int:
    word = word.lower()
    return 2 if "couple" in word else _EN_NUMBERS.get(word) or int(word)


def _en_shift(m: re.Match[str], c: Ctx, count: str, unit: str, sign: int) -> Hit | None:
    unit = unit.lower().rstrip("s")
    unit, amount = "minute" if unit == "min" else unit, _en_number(count)
    if unit == "week":
        unit, amount = "day", amount * 7
    if unit == "year":
        amount *= 12
    return _shift(m, c, sign * amount, unit)


def _en_weekday(m: re.Match[str], c: Ctx) -> Hit | None:
    prefix, name = (m[1] or "").lower(), m[3].lower()
    if not name.endswith("day") and not (prefix or m[2]):
        return None  # "sat", "wed", "sun" need "next", "this" or "on" to be days
    weekday = _EN_WEEKDAY[name[:3]]
    if prefix == "coming":
        ahead = (weekday - c.today.weekday()) % 7 or 7
        return _day(m, c.today + dt.timedelta(days=ahead))
    if prefix:
        return _week(m, c, _EN_OFFSETS[prefix], weekday)
    return _bare_weekday(m, c, weekday)


def _en_period(m: re.Match[str], c: Ctx) -> Hit | None:
    offset, unit = _EN_OFFSETS.get((m[1] or "this").lower(), 0), m[2].lower()
    if not m[1]:
        return _bare_weekend(m, c)
    if unit in ("week", "weekend"):
        return _week(m, c, offset, None, weekend=unit == "weekend")
    if unit == "month":
        return _relative_month(m, c, offset)
    return _year(m, c.today.year + offset)


def _en_month_day(m: re.Match[str], c: Ctx) -> Hit | None:
    day, name, year = (m[1], m[2], m[3]) if m[1] else (m[5], m[4], m[6])
    if name.lower() in ("may", "march", "mar") and not name[0].isupper() and year is None:
        return None  # "you may 3x", "mar" as a verb
    return _day(m, _month_day(c, _MONTHS[name[:3].lower()], int(day), int(year) if year else None))


def _en_month(m: re.Match[str], c: Ctx) -> Hit | None:
    prefix, name, year = (m[1] or "").lower(), m[2], m[3]
    if not (prefix or year) or (name.lower() in ("may", "march") and not name[0].isupper() and not year):
        return None
    return _named_month(m, c, _MONTHS[name[:3].lower()], int(year) if year else None, prefix)


def _slash_date(m: re.Match[str], c: Ctx) -> Hit | None:
    month, day = int(m[1]), int(m[2])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    year = None if m[3] is None else int(m[3]) + (2000 if len(m[3]) == 2 else 0)
    return _day(m, _month_day(c, month, day, year))


def _en_clock(m: re.Match[str], c: Ctx) -> Hit | None:
    hour, minute = int(m[1]), int(m[2] or 0)
    if not 1 <= hour <= 12:
        return None
    meridiem = "am" if m[3][0] in "aA" else "pm"
    return Hit(m.start(), m.end(), "clock", hour=hour, minute=minute, meridiem=meridiem)


def _en_bare_clock(m: re.Match[str], c: Ctx) -> Hit | None:
    hour = int(m[1])
    if not 0 <= hour <= 23:
        return None
    return Hit(m.start(), m.end(), "clock", hour=hour, weak=not m[2], meridiem=None if hour > 6 else "bare")


def _day_word(m: re.Match[str], c: Ctx) -> Hit | None:
    offset, meridiem = _DAY_WORDS[m[0]]
    return _day(m, c.today + dt.timedelta(days=offset), meridiem)


def _en_day(m: re.Match[str], c: Ctx) -> Hit | None:
    word = m[1].lower()
    meridiem = "night" if word == "tonight" else _EN_POD.get((m[2] or "").lower())
    return _day(m, c.today + dt.timedelta(days={"yesterday": -1, "tomorrow": 1}.get(word, 0)), meridiem)


_ZH_FULL_DATE = r"(?<!\d)(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*[日号]?(?!\d)"
_ZH_MONTH = rf"(?:(\d{{4}})年|(大前年|前年|去年|今年|明年|后年|大后年))?{_NB}{_N}月份?(?:{_N}[日号])?"
_ZH_DAY_OF_MONTH = (
    _NB + r"(\d{1,2}[号日]|[一二三四五六七八九十]{1,3}号)(?![楼线房门口位床车厢馆店院桌游机台队窗座])"
)
_ZH_WEEK = r"(上上个?|下下个?|上个|下个|这个|上|下|这|本)?(?:周|星期|礼拜)(末|[一二三四五六日天1-7])?"
_ZH_REL_MONTH = r"(上上个|下下个|上个|下个|这个|上|下|本|这)月(?![份饼亮球光\d])"
_ZH_AMOUNT = (
    r"(\d{1,3}|[零〇一二两三四五六七八九十百]{1,4}|半)个?(天|日|周|星期|礼拜|月|年|小时|钟头|分钟)(半)?"
)
_ZH_AGO_LATER = rf"(再过|过)?{_NB}{_ZH_AMOUNT}(以后|之后|后|以前|之前|前)"
_ZH_IN = rf"(再过|过){_NB}{_ZH_AMOUNT}()(?![前后以之])"
_ZH_CLOCK = rf"{_POD_RE}{_NB}{_N}点钟?(半|一刻|三刻|过?{_N}分?)?(?![都也儿多点])"
_COLON_CLOCK = _POD_RE + r"(?:\bat\s+)?(?<![\d:])(\d{1,2})[:：]([0-5]\d)(?![\d:])"
_EN_WEEKDAYS = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tues?|wed|thur?s?|fri|sat|sun)"
_EN_WEEKDAY_RE = rf"\b(?:(next|last|this|coming|past|previous)\s+|(on)\s+)?{_EN_WEEKDAYS}\b"
_EN_MONTH_DAY = (
    rf"\b(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}(?:,?\s+(\d{{4}}))?\b"
    rf"|\b{_MON}\s+(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?(?![\d:]|\s*(?:am|pm|%))(?:,?\s+(\d{{4}}))?\b"
)
_EN_MONTH = (
    r"\b(?:(in|this|next|last|early|late|mid|since|until|till|by|during|before|after)[\s-]+)?"
    + _MONTH_FULL
    + r"(?:\s+(\d{4}))?\b(?!\s+(?:the\s+)?\d{1,2}\b)"
)
_SLASH = (
    r"(?<![\d/.:\-])(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?(?![\d/])(?!\s*(?:stars?|points?|cups?|of\b|分|星))"
)
_EN_NTH = rf"\b(?:on|by|before|after|until|till)\s+the\s+(\d{{1,2}})(?:st|nd|rd|th)\b(?!\s+(?:of\s+)?{_MON})"
_EN_YEAR = r"\b(?:in|since|until|till|by|during|before|after)\s+((?:19|20)\d{2})\b(?!\s*[-/年])"
_EN_CLOCK = r"\b(?:at\s+|@\s?)?(\d{1,2})(?::([0-5]\d))?\s*([ap]\.?m\.?)(?![a-z])"
_EN_BARE_CLOCK = (
    r"\bat\s+(\d{1,2})(\s*o['’]?clock)?\b(?![:.\d%])"
    r"(?!\s*(?:%|percent|dollars?|people|years?|times?|minutes?|hours?|days?|km|miles?|degrees?))"
)
_TABLE: tuple[tuple[str, _Handler], ...] = (
    (_ZH_FULL_DATE, lambda m, c: _day(m, _safe_date(int(m[1]), int(m[2]), int(m[3])))),
    (_ZH_MONTH, _zh_month),
    (_ZH_DAY_OF_MONTH, lambda m, c: _day_of_month(m, c, cn_number(m[1][:-1]) or 0)),
    ("|".join(sorted(_DAY_WORDS, key=len, reverse=True)), _day_word),
    (_ZH_WEEK, _zh_week),
    (_ZH_REL_MONTH, lambda m, c: _relative_month(m, c, _WEEK_PREFIX[m[1]])),
    (
        "|".join(sorted(_YEAR_WORDS, key=len, reverse=True)),
        lambda m, c: _year(m, c.today.year + _YEAR_WORDS[m[0]]),
    ),
    (r"(?<!\d)(\d{4})年(?![代\d])", lambda m, c: _year(m, int(m[1]))),
    (_ZH_AGO_LATER, _zh_duration),
    (_ZH_IN, _zh_duration),
    (_ZH_CLOCK, _zh_clock),
    (_COLON_CLOCK, _colon_clock),
    (r"\b(?:the\s+)?day\s+after\s+tomorrow\b", lambda m, c: _day(m, c.today + dt.timedelta(days=2))),
    (r"\b(?:the\s+)?day\s+before\s+yesterday\b", lambda m, c: _day(m, c.today - dt.timedelta(days=2))),
    (r"\b(today|tonight|tomorrow|yesterday)(?:\s+(morning|afternoon|evening|night))?\b", _en_day),
    (r"\bthis\s+(morning|afternoon|evening)\b", lambda m, c: _day(m, c.today, _EN_POD[m[1].lower()])),
    (r"\blast\s+night\b", lambda m, c: _day(m, c.today - dt.timedelta(days=1), "night")),
    (_EN_WEEKDAY_RE, _en_weekday),
    (r"\b(next|last|this|coming|past|previous)\s+(week|weekend|month|year)\b", _en_period),
    (r"\b()(?:over\s+|on\s+|at\s+)?the\s+(weekend)\b", _en_period),
    (r"\b(?:the\s+)?week\s+after\s+next\b", lambda m, c: _week(m, c, 2, None)),
    (rf"\bin\s+{_EN_N}\s+{_EN_UNIT}\b", lambda m, c: _en_shift(m, c, m[1], m[2], 1)),
    (r"\bin\s+half\s+an?\s+hour\b", lambda m, c: _shift(m, c, 30, "minute")),
    (
        rf"\b{_EN_N}\s+{_EN_UNIT}\s+(ago|from\s+(?:now|today))\b",
        lambda m, c: _en_shift(m, c, m[1], m[2], _sign(m[3])),
    ),
    (_EN_MONTH_DAY, _en_month_day),
    (_EN_MONTH, _en_month),
    (_SLASH, _slash_date),
    (_EN_NTH, lambda m, c: _day_of_month(m, c, int(m[1]))),
    (_EN_YEAR, lambda m, c: _year(m, int(m[1]))),
    (_EN_CLOCK, _en_clock),
    (r"\b(?:at\s+)?(?:noon|midday)\b", lambda m, c: Hit(m.start(), m.end(), "clock", hour=12)),
    (_EN_BARE_CLOCK, _en_bare_clock),
)
# Earlier rules win a tie between matches of the same start and length.
RULES: tuple[tuple[re.Pattern[str], _Handler], ...] = tuple((re.compile(p, _I), h) for p, h in _TABLE)
