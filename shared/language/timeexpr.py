"""Time expressions in Chinese and English, resolved to dates against the event's time.

``resolve("明天下午三点提醒我开会", at)`` gives one :class:`TimeRef` for 15:00 the next day, in the
timezone of ``at``. Pure and deterministic: the same text and event time always give the same refs.

Conventions (weeks start on Monday, as in ISO 8601 and Chinese calendars):

* 下周X / "next <weekday>": weekday X of the next calendar week; 上周X / "last <weekday>": of the
  previous one; 这周X / 本周X / "this <weekday>": of the current one. On Monday 2026-11-30, 下周三
  is 2026-12-09, "next Friday" 2026-12-11 (not the coming 12-04) and 上周三 2026-11-25.
  "coming <weekday>" is the first one after today.
* A bare weekday (周三, "on Friday"), day of month (15号, "on the 15th"), month-day (3月5日,
  "March 3", "3/15") or month (三月份, "in March") is in the current week, month or year; in a plan
  (future wording: 要, 打算, 提醒, will, going to...) one already past moves on to the next week,
  month or year, and in a past statement (了, 过, ago, was, -ed...) one still ahead moves back.
  At 2026-11-30: 三月份 is 2026-03, 三月份要去日本 2027-03, 三月份去了日本 2026-03.
* A clock time binds to the day next to it ("明天下午三点", "tomorrow at 3pm", "3pm on Friday"),
  else to the nearest day named before it, else to the event's day (the next day in a plan whose
  hour has passed). A bare "at 3" or "3点" counts only next to a day; a bare "at 1".."at 6" is pm.
* 今晚 / "tonight" is today, and a clock time on it is in the evening. 周末 / "this weekend" is
  Saturday, with Sunday as its ``last`` day. "in 3 days" / 3天后 is a day, "in 2 hours" a datetime.
* Recurring expressions (每周三, 每月15号, 每天早上8点, "every Friday", "on Fridays") are skipped.
* Everything is resolved in the zone of ``at``: its date is "today", a clock time is a time of day
  there, and a datetime carries ``at``'s offset. The caller passes ``at`` with the offset the user
  wrote in (the event log keeps it, ``events.at_offset_s``), not the instant converted to UTC.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from shared.language.timeexpr_rules import DATETIME, DAY, MONTH, RULES, WEEK, YEAR, Ctx, Hit

__all__ = [
    "DATETIME",
    "DAY",
    "MONTH",
    "WEEK",
    "YEAR",
    "Span",
    "TimeRef",
    "day_range",
    "earliest_future",
    "happened",
    "resolve",
    "resolve_anchored",
    "tense",
]
_I = re.IGNORECASE


# --- tense ------------------------------------------------------------------------------------

_FUTURE_RE = re.compile(
    r"要|会(?=去|来|在|给|有|到|是|再)|将|打算|计划|准备|想|提醒|记得|别忘|预计|安排|到时|以后|之后|后天|明[天年早晚]"
    r"|下(?:周|个|次|月|星期|礼拜)|\b(?:will|shall|going to|gonna|plan(?:s|ning)?|remind|reminder|need to"
    r"|have to|must|next|upcoming|coming|tomorrow|tonight|until|due)\b|['’]ll\b",
    _I,
)
_PAST_RE = re.compile(
    r"了|过(?![一两二三四五六七八九十几\d]|来|去)|去年|前年|昨|前天|曾|当时|那时|以前|上(?:周|个|次|月|星期|礼拜)"
    r"|\b(?:was|were|did|had|went|ago|last|yesterday|used to|earlier|met|saw|came|got|took|made|bought"
    r"|told|said|left|ate|drank|ran|found|gave|thought|knew|felt|heard|paid|sent|spent|lost|won|wrote)\b"
    r"|\b(?!(?:\w*eed|bed|red|shed|wed|sled)\b)\w{3,}ed\b",
    _I,
)


def tense(text: str) -> str | None:
    """The text's tense: "future" for plans ("要", "will"), "past" for past statements ("了", "ago")."""
    if _FUTURE_RE.search(text):
        return "future"
    return "past" if _PAST_RE.search(text) else None


@dataclass(frozen=True)
class TimeRef:
    """One time expression: its span in the text and the period it names."""

    text: str
    start: int
    end: int
    kind: str  # day | week | month | year | datetime
    date: dt.date  # the first day of the period
    last: dt.date  # its last day (== date for a day or a datetime)
    datetime: dt.datetime | None = None  # when a clock time is given, in the event's timezone

    @property
    def iso(self) -> str:
        """ISO form: "2026-12-01T15:00:00+08:00", "2026-12-09", "2026-W50", "2027-03" or "2026"."""
        if self.datetime is not None:
            return self.datetime.isoformat()
        if self.kind == WEEK:
            year, week, _ = self.date.isocalendar()
            return f"{year}-W{week:02d}"
        if self.kind == MONTH:
            return f"{self.date.year}-{self.date.month:02d}"
        if self.kind == YEAR:
            return str(self.date.year)
        return self.date.isoformat()


_RECURRING_RE = re.compile(r"(?:每(?:个|隔)?(?:月|周|星期|礼拜|天|日|年)?|\bevery\s+(?:other\s+)?)$", _I)
_GAP_RE = re.compile(r"\s*(?:at|on|,|，|的)?\s*", _I)


def _hour(hit: Hit, day_meridiem: str | None) -> tuple[int, int]:
    """(hour, extra days) on the 24-hour clock."""
    hour, meridiem = hit.hour, hit.meridiem if hit.meridiem not in (None, "bare") else day_meridiem
    if meridiem is None and hit.meridiem == "bare":
        meridiem = "pm"  # "tomorrow at 3": an afternoon
    if meridiem == "night" and (hour < 6 or hour == 12):
        return (0, 1) if hour == 12 else (hour, 0)
    if meridiem in ("pm", "night") and hour < 12:
        hour += 12
    elif meridiem == "am" and hour == 12:
        hour = 0
    elif meridiem == "noon" and hour < 6:
        hour += 12
    return (0, 1) if hour == 24 else (hour, 0)


def _adjacent(text: str, day: Hit, clock: Hit) -> bool:
    """Whether only a space, "at", "on", a comma or 的 stands between a day and a clock time."""
    if day.end <= clock.start:
        return _GAP_RE.fullmatch(text[day.end : clock.start]) is not None
    return clock.end <= day.start and _GAP_RE.fullmatch(text[clock.end : day.start]) is not None


def _candidates(text: str, c: Ctx) -> list[Hit]:
    found: list[tuple[int, int, int, Hit]] = []
    for rank, (pattern, handler) in enumerate(RULES):
        for m in pattern.finditer(text):
            if not m[0].strip() or _RECURRING_RE.search(text[max(0, m.start() - 12) : m.start()]):
                continue
            hit = handler(m, c)
            if hit is not None:
                found.append((hit.start, -(hit.end - hit.start), rank, hit))
    chosen: list[Hit] = []
    taken_until = -1
    for start, _, _, hit in sorted(found, key=lambda f: f[:3]):
        if start >= taken_until:
            chosen.append(hit)
            taken_until = hit.end
    return chosen


def resolve(text: str, at: dt.datetime) -> list[TimeRef]:
    """The time expressions in ``text``, resolved against ``at`` (the event's time), in text order."""
    c = Ctx(at, at.date(), tense(text))
    hits = _candidates(text, c)
    days = [h for h in hits if h.kind == DAY]
    used: set[int] = set()
    refs: list[TimeRef] = []
    for hit in hits:
        if hit.kind != "clock":
            continue
        day = next((d for d in days if id(d) not in used and _adjacent(text, d, hit)), None)
        if day is None and hit.weak:
            continue
        if day is not None:
            used.add(id(day))
        before = [d for d in days if d.end <= hit.start]
        base = day or (before[-1] if before else None)
        hour, extra = _hour(hit, day.meridiem if day else None)
        on = (base.date if base and base.date else c.today) + dt.timedelta(days=extra)
        moment = dt.datetime.combine(on, dt.time(hour, hit.minute), tzinfo=at.tzinfo)
        if base is None and c.tense == "future" and moment < at:
            moment += dt.timedelta(days=1)
        start, end = (min(hit.start, day.start), max(hit.end, day.end)) if day else (hit.start, hit.end)
        refs.append(TimeRef(text[start:end], start, end, DATETIME, moment.date(), moment.date(), moment))
    for hit in hits:
        if hit.kind == "clock" or id(hit) in used or hit.date is None:
            continue
        last = hit.last or hit.date
        refs.append(
            TimeRef(text[hit.start : hit.end], hit.start, hit.end, hit.kind, hit.date, last, hit.moment)
        )
    return sorted(refs, key=lambda r: (r.start, r.end))


def _end(ref: TimeRef, tz: dt.tzinfo | None) -> dt.datetime:
    """When a ref's period is over: a datetime is its own moment; a day, week, month or year ends
    with the last second of its last day, in ``tz``."""
    return ref.datetime or dt.datetime.combine(ref.last, _LAST_SECOND, tzinfo=tz)


_LAST_SECOND = dt.time(23, 59, 59)


def earliest_future(refs: list[TimeRef], at: dt.datetime) -> dt.datetime | None:
    """When a task falls due: the earliest end, not before the event, of the periods ``refs`` name.

    A datetime is due at its moment; a period at its end in the event's zone, not its start: "我打算
    十二月去日本旅行" is due 12-31 23:59:59, "今天要交" at the end of today, "本月" at the end of
    this month. A time of day is in the event's zone too (:func:`resolve`), so "下周三下午三点" told
    at +08:00 is due 15:00+08:00 (07:00 UTC, the instant stored)."""
    ends = [_end(r, at.tzinfo) for r in refs]
    due = [end for end in ends if end >= at]
    return min(due) if due else None


# --- anchored questions -----------------------------------------------------------------------

# "last weekend before April 10, 2023", "the Sunday before October 25, 2022", "last Friday on
# 23 January, 2022", "last week, as mentioned on November 6, 2023"; "2023年4月10日之前的周末".
_ANCHOR_AFTER_RE = re.compile(
    r"^[\s,]*(?:(?:just\s+)?before|prior\s+to|on|as\s+of|as\s+(?:mentioned|said|told)\s+on)[\s,]*$", _I
)
_ANCHOR_BEFORE_RE = re.compile(r"^\s*(?:之前|以前|前)(?:的|那个|那)*\s*$")
_PROBE_YEARS = 7  # a ref that resolves the same from a moment this far away names a fixed date


def resolve_anchored(text: str, at: dt.datetime) -> list[TimeRef]:
    """Like :func:`resolve`, but a relative expression tied to a fixed date by "before", "on" or
    "as of" ("last weekend before April 10, 2023", "2023年4月10日之前的周末") is resolved against
    that date rather than ``at``: the question asks about the days before the date it names."""
    refs = resolve(text, at)
    if len(refs) < 2:
        return refs
    probe = {
        (r.start, r.end, r.date, r.last) for r in resolve(text, at + dt.timedelta(days=365 * _PROBE_YEARS))
    }
    fixed = [r for r in refs if (r.start, r.end, r.date, r.last) in probe]
    out: list[TimeRef] = []
    for ref in refs:
        found = None if ref in fixed else _anchor_of(text, ref, fixed)
        if found is None:
            out.append(ref)
            continue
        anchor, before = found
        again = _resolved_from(text, ref, dt.datetime.combine(anchor.date, at.timetz()))
        if again is not None and before and again.last >= anchor.date:
            # "the Monday before July 24" when the 24th is a Monday: the one of the week before.
            again = _resolved_from(
                text, ref, dt.datetime.combine(anchor.date - dt.timedelta(days=1), at.timetz())
            )
        out.append(again or ref)
    return out


def _resolved_from(text: str, ref: TimeRef, at: dt.datetime) -> TimeRef | None:
    return next((r for r in resolve(text, at) if (r.start, r.end) == (ref.start, ref.end)), None)


def _anchor_of(text: str, ref: TimeRef, fixed: list[TimeRef]) -> tuple[TimeRef, bool] | None:
    """The fixed date ``ref`` is tied to, and whether the tie is "before" (the days before it)."""
    for f in fixed:
        if f.start >= ref.end and (link := _ANCHOR_AFTER_RE.match(text[ref.end : f.start])):
            return f, bool(re.search(r"before|prior", link.group(0), _I))
        if f.end <= ref.start and _ANCHOR_BEFORE_RE.match(text[f.end : ref.start]):
            return f, True
    return None


# --- event time -------------------------------------------------------------------------------

Span = tuple[dt.datetime, dt.datetime]  # [start, end): midnight of the first day, of the day after the last
# The longest event time kept: a year ("去年", "in 2023"). A turn naming far-apart times ("2020年…
# 上周") keeps its first one, so that recall's overlap query can bound its index scan by this.
MAX_SPAN = dt.timedelta(days=367)


def day_range(first: dt.date, last: dt.date, tz: dt.tzinfo) -> Span:
    """The days ``first`` .. ``last`` as [start, end) instants in ``tz`` (what a range query compares)."""
    start = dt.datetime.combine(first, dt.time.min, tzinfo=tz)
    return start, dt.datetime.combine(last, dt.time.min, tzinfo=tz) + dt.timedelta(days=1)


def happened(text: str, at: dt.datetime) -> Span | None:
    """When what ``text`` tells happened (or is to happen), told at ``at``: the days its time
    expressions name, resolved as a query's are (:func:`resolve_anchored`), from the first to the
    last. "前天我把车送去保养了" told on 2026-08-12 happened on 2026-08-10. None without a time
    expression: then the told time is all there is."""
    refs = resolve_anchored(text, at)
    if not refs:
        return None
    tz = at.tzinfo or dt.UTC
    span = day_range(min(r.date for r in refs), max(r.last for r in refs), tz)
    if span[1] - span[0] > MAX_SPAN:
        span = day_range(refs[0].date, refs[0].last, tz)
    return span
