"""The time paths: the ranges the query names ("上周", "last month"), and the user's newest
memories for a follow-up that names nothing.

A named range is a filter: its items that also match the query's cues join stage 1, and stage 2
ranks the rest of it by meaning. A range holds whole sessions; which of its items matter is for
the query's content to say, not for their order in time. An item lies in a range when it was
told then (``at``, ``valid_from``) or when what it tells happened then (its event time, resolved
at ingest: "前天我把车送去保养了" told on 08-12 answers "我8月10号做了什么？"). An item whose
event time reaches well past a range of the present or the future on both sides is a standing
state around it, labelled ``around:`` (:func:`around`): it is in the range, but not what the
question asks about first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shared.events import TurnPublished
from shared.language.cues import QueryCues
from shared.language.timeexpr import Span, day_range, resolve_anchored
from shared.models import is_redacted
from shared.recall.deterministic import cue_match, turn_cues
from shared.recall.request import EVERY_STATUS, Candidate, Pool, RecallRequest, memory_item, turn_item
from shared.storage import UnitOfWork
from shared.vectors import cosine

# Labels: in the range by event time, by told time; around a present or future range by event time.
HAPPENED, TOLD, AROUND = "happened", "time", "around"
TIME_BOOST = 2.0  # the memory falls in a time range the query names ("上周", "last month")
WINDOW_CANDIDATES = 20  # the time path's list (items of a named range, closest in meaning first)
WINDOW_SCAN = 200  # items of each kind read from one named range to pick those from
RECENT_DAYS = 3  # the recency path: the user's newest memories ("那我现在该怎么办？")
RECENT_CANDIDATES = 10

Window = Span
DAY = timedelta(days=1)


@dataclass(frozen=True)
class NamedTimes:
    """The time expressions of a query, resolved once."""

    windows: list[Window]  # [start, end) per expression, resolved against ``now``
    # The query without them: a time expression is a filter, not words to match ("上周"/"last
    # week" must not pull in every memory that says "last").
    content: str


def named_times(query: str, now: datetime) -> NamedTimes:
    refs = resolve_anchored(query, now)
    tz = now.tzinfo or UTC
    windows = [day_range(ref.date, ref.last, tz) for ref in refs]
    content = list(query)
    for ref in refs:
        content[ref.start : ref.end] = " " * (ref.end - ref.start)
    return NamedTimes(windows, "".join(content))


def around(happened: Span | None, window: Window, now: datetime) -> bool:
    """Whether an item found in ``window`` by its event time is a standing state around it rather
    than what a question naming it asks about: its span reaches a day or more past the range on
    both sides, and the range has not ended (a question about the present or the future).
    "I work night shifts this month" holds tonight, but "今晚吃什么好？" asks what to eat: put
    first, it pushed the user's food preferences below it (the demo). Of a range in the past the
    state is what the question asks ("去年三月我住在哪儿？" and "去年我住在上海"). A span that
    starts or ends in the range (two times told together: "昨天去了北京，明天回上海") lies in it;
    the day's margin keeps a span resolved in another zone than the question's (up to a day
    apart) in it. "Not ended" stands for the tense, which is not read: "我今天做了什么？" does not
    put first a state told before today that holds through it."""
    start, end = window
    return happened is not None and end > now and happened[0] <= start - DAY and happened[1] >= end + DAY


def lies_in_range(c: Candidate) -> bool:
    """Found in a named range, and not only as a state around it (:func:`around`)."""
    return "time" in c.paths and not any(m.startswith(f"{AROUND}:") for m in c.matched)


@dataclass
class InWindow:
    """An item of a time range the query names, not yet in the candidate pool."""

    key: str
    cand: Candidate
    vector: list[float] | None
    label: str


def window_items(
    uow: UnitOfWork,
    request: RecallRequest,
    windows: list[Window],
    weights: dict[str, float],
    with_turns: bool,
) -> dict[str, InWindow]:
    """What lies in the time ranges the query names: the user's memories, and the turns of the
    conversation log that no memory cites (a cited turn is there as its memory), up to
    WINDOW_SCAN of each per range and per time, with their vectors so that stage 2 can rank them
    by meaning. An item lies in a range by its event time ("前天我把车送去保养了" told on 08-12
    lies in 08-10, labelled ``happened:``) or by its told time (labelled ``time:``); one whose event
    time is only around a present or future range (:func:`around`) is labelled ``around:``, unless
    another read or range finds it in one."""
    out: dict[str, InWindow] = {}
    for start, end in windows:
        days = f"{start.date().isoformat()}..{(end - timedelta(days=1)).date().isoformat()}"
        scope = (request.tenant_id, request.user_id, start, end)
        # Event time first: an item in both keeps the label that says what happened in the range.
        memories = [
            (m, label)
            for read, label in ((uow.memories.happened_in, HAPPENED), (uow.memories.in_window, TOLD))
            for m in read(*scope, request.statuses, WINDOW_SCAN, with_embedding=True)
        ]
        for memory, label in memories:
            if label == HAPPENED and around(
                _span(memory.happened_from, memory.happened_to), (start, end), request.now
            ):
                label = AROUND
            if not _relabelled(out, memory.id, f"{label}:{days}"):
                score, matched = cue_match(weights, memory.cues)
                cand = Candidate(memory_item(memory), score, matched, memory=memory)
                out[memory.id] = InWindow(memory.id, cand, memory.embedding, f"{label}:{days}")
        if not with_turns:
            continue
        events: dict[str, tuple[TurnPublished, str]] = {}
        for read_turns, label in ((uow.events.happened_in, HAPPENED), (uow.events.in_window, TOLD)):
            for e in read_turns(*scope, WINDOW_SCAN):
                here = (
                    AROUND if label == HAPPENED and around(e.happened, (start, end), request.now) else label
                )
                held = events.get(e.event.event_id)
                if _takes(held[1] if held else None, here):
                    events[e.event.event_id] = (e.event, here)
        # Cited by a memory of any status: a returnable memory stands for the turn; an unreturnable
        # one (superseded, forgotten...) means the turn's content must not come back either.
        cited = {
            s["event_id"]
            for m in uow.memories.by_sources(request.tenant_id, request.user_id, list(events), EVERY_STATUS)
            for s in m.sources
        }
        fresh = [
            (turn, label)
            for event_id, (turn, label) in events.items()
            if event_id not in cited
            and not _relabelled(out, f"event:{event_id}", f"{label}:{days}")
            and not is_redacted(turn)
        ]
        vectors = uow.turn_index.vectors(request.tenant_id, request.user_id, [t.event_id for t, _ in fresh])
        for turn, label in fresh:
            score, matched = cue_match(weights, turn_cues(turn))
            key = f"event:{turn.event_id}"
            cand = Candidate(turn_item(turn, "turn"), score, matched)
            out[key] = InWindow(key, cand, vectors.get(turn.event_id), f"{label}:{days}")
    return out


def _span(start: datetime | None, end: datetime | None) -> Span | None:
    return (start, end) if start is not None and end is not None else None


def _takes(held: str | None, label: str) -> bool:
    """Whether ``label`` replaces the label an item holds (None: none yet): the first one found
    stays (event time first: ``window_items``), unless it is only around a range and this one
    finds the item in one."""
    return held is None or (held.startswith(AROUND) and not label.startswith(AROUND))


def _relabelled(out: dict[str, InWindow], key: str, label: str) -> bool:
    """Whether ``key`` is already among the range's items (its label replaced as :func:`_takes`
    says)."""
    found = out.get(key)
    if found is None:
        return False
    if _takes(found.label, label):
        found.label = label
    return True


def enter_window(pool: Pool, w: InWindow) -> Candidate:
    """Put an in-range item into the pool (or mark the pooled one) as found by the time path."""
    cand = pool.get(w.key)
    if cand is None:
        cand = pool[w.key] = w.cand
    if "time" not in cand.paths:
        cand.paths.append("time")
        cand.cue_score += TIME_BOOST
        cand.matched.append(w.label)
    return cand


def enter_cue_matches(pool: Pool, in_window: dict[str, InWindow]) -> None:
    """Stage 1's share of the named ranges: their items that also match the query's cues."""
    for found in in_window.values():
        if found.cand.cue_score > 0:
            enter_window(pool, found)


def window_ranked(
    in_window: dict[str, InWindow], query_vector: list[float] | None, pool: Pool
) -> list[Candidate]:
    """The time path's list: the items of the named ranges closest in meaning to the query (by
    cue score without a query vector), the best WINDOW_CANDIDATES of them. Every pooled item
    that lies in a range, whichever path found it, is marked as in it too."""

    def closeness(w: InWindow) -> float:
        if query_vector is None or w.vector is None:
            return -1.0
        return cosine(query_vector, w.vector)

    ordered = sorted(
        in_window.values(),
        key=lambda w: (-round(closeness(w), 9), -w.cand.cue_score, *w.cand.tie(), w.key),
    )
    ranked = [enter_window(pool, w) for w in ordered[:WINDOW_CANDIDATES]]
    for key in in_window.keys() & pool.keys():
        enter_window(pool, in_window[key])
    return ranked


# Words that ask what to do next, not about what: "那我现在该怎么办？" names nothing of its own.
# The stop words (``shared.language.text``) drop the rest already ("为什么", "怎么", and in
# English "what", "do", "now", "then"); these stay keywords, which the searches use.
ASKS_WHAT_NEXT = frozenset({"怎么办", "咋办", "怎么样", "如何", "为啥"})


def is_follow_up(cues: QueryCues, times: NamedTimes) -> bool:
    """A follow-up names nothing ("那我现在该怎么办？", "And then?"): no entity, tag, time range or
    keyword but words that ask what to do next. A question with a subject of its own is about that
    subject, whether or not the user ever spoke of it ("我是什么血型？", "What do I do for a
    living?"), and newness would only add noise to it."""
    return (
        not (set(cues.keywords) - ASKS_WHAT_NEXT)
        and not cues.entities
        and not cues.tags
        and not times.windows
    )


def recent_candidates(uow: UnitOfWork, request: RecallRequest, pool: Pool) -> list[Candidate]:
    """The user's newest memories: a follow-up question ("那我现在该怎么办？") is about them."""
    start = request.now - timedelta(days=RECENT_DAYS)
    out = []
    for memory in uow.memories.in_window(
        request.tenant_id, request.user_id, start, request.now + timedelta(seconds=1), request.statuses,
        RECENT_CANDIDATES,
    ):  # fmt: skip
        cand = pool.of_memory(memory)
        if "recent" not in cand.paths:
            cand.paths.append("recent")
        out.append(cand)
    return out
