"""Conflict detection and resolution between a user's memories (rule-based judge + strategies).

Order always follows event time, then seq (``Memory.valid_from`` and the source seq), never the
order in which workers happened to see the statements: resolving A-then-B and B-then-A ends in
the same state. Nothing is deleted: a loser is marked ``superseded`` with ``superseded_by``, an
end of validity and a reason, and every step is written to the memory's history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from shared.ingest.extraction import is_change, is_negated
from shared.language.clauses import clause_spans
from shared.language.plan_words import PLAN_PREFIX, plan_slot
from shared.language.text import keywords, word_set
from shared.models import Memory, MemoryStatus, MemoryType, memory_id
from shared.storage import HistoryEntry
from shared.vectors import cosine

SIMILAR = 0.80  # cosine above which two memories of one user are worth judging
NEAR_DUPLICATE = 0.98


class Relation(StrEnum):
    DUPLICATE = "duplicate"
    SUPERSEDE = "supersede"
    MERGE = "merge"
    COEXIST = "coexist"
    UNRELATED = "unrelated"


class Strategy(StrEnum):
    SUPERSEDE = "supersede"  # the older stops being valid
    KEEP_BOTH = "keep_both"  # both stay; the older's importance is halved, the newer ranks first
    INVALIDATE_OLDER = "invalidate_older"  # tasks: the older task is no longer current


DEFAULT_STRATEGIES: dict[MemoryType, Strategy] = {
    MemoryType.FACT: Strategy.SUPERSEDE,
    MemoryType.PROFILE: Strategy.SUPERSEDE,
    MemoryType.SEMANTIC: Strategy.SUPERSEDE,
    MemoryType.PREFERENCE: Strategy.KEEP_BOTH,
    MemoryType.TASK: Strategy.INVALIDATE_OLDER,
    MemoryType.EPISODIC: Strategy.KEEP_BOTH,
}


@dataclass(frozen=True)
class Verdict:
    relation: Relation
    reason: str
    judge: str = "rules"
    merged_content: str | None = None


Judge = Callable[[Memory, Memory], Verdict]


def order_key(memory: Memory) -> tuple[str, int, str]:
    """Event time, then seq, then id: which of two statements is newer, independent of arrival."""
    first = memory.sources[0] if memory.sources else {}
    valid_from = memory.valid_from or memory.created_at
    return (valid_from.isoformat(), int(first.get("seq", 0)), memory.id)


def compatible(a: MemoryType, b: MemoryType) -> bool:
    if a == b:
        return True
    # A stated fact about oneself and a profile attribute often describe the same thing.
    return {a, b} <= {MemoryType.FACT, MemoryType.PROFILE, MemoryType.PREFERENCE}


def source_order(source: Mapping[str, object]) -> tuple[str, str, int]:
    """A memory's sources in conversation order: time, session, then seq as a number."""
    return (str(source["at"]), str(source["session_id"]), int(str(source["seq"])))


def judge_by_rules(older: Memory, newer: Memory) -> Verdict:
    """Decide how two active memories of one user relate, from slots, polarity and change words."""
    if older.slot and newer.slot and older.slot == plan_slot(newer.slot) != newer.slot:
        # "我们搬到苏州了" after "我们计划明年春天搬到苏州": the plan happened; the statement is the
        # slot's value now and the plan is history. (A plan after the value never competes with it.)
        return Verdict(Relation.SUPERSEDE, f"the plan for {newer.slot} happened")
    if not compatible(older.type, newer.type):
        return Verdict(Relation.UNRELATED, f"types {older.type} and {newer.type} do not compete")
    similarity = cosine(older.embedding, newer.embedding)
    if similarity >= NEAR_DUPLICATE:
        return Verdict(Relation.DUPLICATE, f"near-duplicate (cosine {similarity:.3f})")
    polarity_flip = is_negated(older.content) != is_negated(newer.content)
    changed = is_change(newer.content)
    shared_entities = set(older.entities) & set(newer.entities)
    if older.slot and older.slot == newer.slot:
        if changed:
            return Verdict(Relation.SUPERSEDE, f"same {older.slot}: the newer statement changes it")
        if polarity_flip:
            return Verdict(Relation.SUPERSEDE, f"same {older.slot}: the newer statement contradicts it")
        values_differ = older.entities and newer.entities and not shared_entities
        if values_differ:
            return Verdict(Relation.SUPERSEDE, f"same {older.slot} with a different value")
        both_negated = is_negated(older.content) and is_negated(newer.content)
        if both_negated and older.type is MemoryType.PREFERENCE:
            return Verdict(
                Relation.MERGE,
                f"complementary {older.slot}",
                merged_content=merge_text(older.content, newer.content),
            )
        # A slot with a value in its key ("skill:language:java") holds many compatible statements;
        # a slot without one ("profile:home") holds one value at a time: the newer replaces it.
        if not _value_keyed(older.slot) and not both_negated:
            return Verdict(Relation.SUPERSEDE, f"same {older.slot} with a newer value")
        return Verdict(Relation.COEXIST, f"same {older.slot}, compatible statements")
    if (
        older.type is MemoryType.TASK
        and newer.type is MemoryType.TASK
        and changed
        and set(older.cues) & set(newer.cues)
    ):
        return Verdict(Relation.SUPERSEDE, "the task was changed or rescheduled")
    if similarity >= SIMILAR and shared_entities and (polarity_flip or changed):
        names = ", ".join(sorted(shared_entities))
        return Verdict(Relation.SUPERSEDE, f"about {names}: the newer statement contradicts or changes it")
    return Verdict(Relation.UNRELATED, f"no shared slot (cosine {similarity:.2f})")


def _value_keyed(slot: str) -> bool:
    return slot.removeprefix(PLAN_PREFIX).count(":") >= 2


def same_attribute(a: str | None, b: str | None) -> bool:
    """Whether two slots are about one attribute: equal, or one is the plan for the other."""
    return bool(a and b) and (a == b or a == plan_slot(b or "") or b == plan_slot(a or ""))


# Words that restate rather than state: "Still vegetarian of course", "Reminder: I'm vegetarian".
_RESTATING = word_set("""
    still again reminder remind remember course always really also too just anyway
    还是 依然 仍然 一直 还 也 记住 提醒 当然
""")
_ENDS = "。.;；,，!！ "


def merge_text(a: str, b: str) -> str:
    """One statement from two that complement each other, never a list of near-repeats.

    When one says all the other does (its content words hold the other's), it is the clearest
    and stands alone. Otherwise ``a`` is kept whole and only the clauses of ``b`` that add a
    content word are added ("I'm vegetarian, I don't eat meat or fish" + "Reminder: I'm
    vegetarian, please never suggest meat recipes" → "…; please never suggest meat recipes"). The
    merged memory cites every source, so nothing said is lost from the history."""
    a, b = a.rstrip(_ENDS), b.rstrip(_ENDS)
    said_a, said_b = set(keywords(a)) - _RESTATING, set(keywords(b)) - _RESTATING
    if said_a >= said_b:
        return a[:300]
    if said_b > said_a:
        return b[:300]
    seen, added = set(said_a), []
    for start, end in clause_spans(b):
        clause = b[start:end].strip(_ENDS + ":：")
        new = set(keywords(clause)) - _RESTATING - seen
        if clause and new:
            added.append(clause)
            seen |= new
    cjk = any("\u4e00" <= ch <= "\u9fff" for ch in a + b)
    return ("；" if cjk else "; ").join([a, *added])[:300]


_DECISIVENESS = {Strategy.SUPERSEDE: 2, Strategy.INVALIDATE_OLDER: 1, Strategy.KEEP_BOTH: 0}


def strategy_for(older: MemoryType, newer: MemoryType, strategies: Mapping[MemoryType, Strategy]) -> Strategy:
    """The more decisive of the two types' strategies: "我不用 Java" (a preference) is superseded by
    "最近在写 Java 项目" (a fact), while two preferences keep both."""
    a = strategies.get(older, Strategy.SUPERSEDE)
    b = strategies.get(newer, Strategy.SUPERSEDE)
    return a if _DECISIVENESS[a] >= _DECISIVENESS[b] else b


@dataclass
class Resolution:
    """What resolving one pair changes: memories to save, one to add, history to append."""

    changed: dict[str, Memory] = field(default_factory=dict)
    created: list[Memory] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)


def _entry(
    memory: Memory,
    action: str,
    reason: str,
    judge: str,
    at: datetime,
    related: str | None,
    event_id: str | None,
) -> HistoryEntry:
    return HistoryEntry(
        memory.id, memory.tenant_id, memory.user_id, action, reason, judge, at, related, event_id
    )


def apply(
    older: Memory,
    newer: Memory,
    verdict: Verdict,
    now: datetime,
    strategies: Mapping[MemoryType, Strategy] | None = None,
) -> Resolution:
    """Apply a validated verdict about two active memories (``older`` precedes ``newer``)."""
    strategies = strategies or DEFAULT_STRATEGIES
    res = Resolution()
    at = newer.valid_from or newer.created_at
    event_id = newer.sources[0]["event_id"] if newer.sources else None
    why = f"{verdict.reason} ({verdict.judge})"

    def retire(loser: Memory, winner_id: str, action: str) -> None:
        loser.status = MemoryStatus.SUPERSEDED
        loser.superseded_by = winner_id
        loser.valid_to = at
        loser.status_reason = why
        loser.updated_at = now
        loser.version += 1
        res.changed[loser.id] = loser
        res.history.append(_entry(loser, action, why, verdict.judge, at, winner_id, event_id))

    if verdict.relation is Relation.DUPLICATE:
        # The newer restates the older: keep one memory, with both statements as its sources.
        known = {s["event_id"] for s in older.sources}
        older.sources = sorted(
            [*older.sources, *(s for s in newer.sources if s["event_id"] not in known)], key=source_order
        )
        older.access_count += 1
        older.last_accessed_at = max(older.last_accessed_at, newer.created_at)
        older.updated_at = now
        older.version += 1
        res.changed[older.id] = older
        res.history.append(_entry(older, "reinforced", why, verdict.judge, at, newer.id, event_id))
        retire(newer, older.id, "duplicate_of")
        return res

    if verdict.relation is Relation.MERGE and verdict.merged_content:
        merged = replace(
            newer,
            id=memory_id(newer.tenant_id, newer.user_id, f"merge:{older.id}:{newer.id}", 0),
            content=verdict.merged_content,
            importance=max(older.importance, newer.importance),
            score=max(older.score, newer.score),
            tags=sorted(set(older.tags) | set(newer.tags)),
            entities=sorted(set(older.entities) | set(newer.entities)),
            cues=sorted(set(older.cues) | set(newer.cues)),
            sources=sorted([*older.sources, *newer.sources], key=source_order),
            status=MemoryStatus.ACTIVE,
            valid_from=older.valid_from,
            valid_to=None,
            superseded_by=None,
            status_reason=None,
            embedding=None,  # the merged text needs its own vector (embedded by the caller)
            updated_at=now,
            version=1,
            indexed_version=0,
        )
        res.created.append(merged)
        res.history.append(_entry(merged, "merged", why, verdict.judge, at, older.id, event_id))
        res.history.append(_entry(merged, "merged", why, verdict.judge, at, newer.id, event_id))
        retire(older, merged.id, "merged_into")
        retire(newer, merged.id, "merged_into")
        return res

    if verdict.relation is not Relation.SUPERSEDE:
        return res

    strategy = strategy_for(older.type, newer.type, strategies)
    if strategy is Strategy.KEEP_BOTH:
        older.importance = round(older.importance / 2, 3)
        older.score = round(older.score / 2, 6)
        older.status_reason = f"a newer statement takes precedence: {why}"
        older.updated_at = now
        older.version += 1
        res.changed[older.id] = older
        res.history.append(_entry(older, "importance_halved", why, verdict.judge, at, newer.id, event_id))
        res.history.append(_entry(newer, "takes_precedence", why, verdict.judge, at, older.id, event_id))
        return res
    action = "invalidated" if strategy is Strategy.INVALIDATE_OLDER else "superseded"
    retire(older, newer.id, action)
    res.history.append(_entry(newer, "supersedes", why, verdict.judge, at, older.id, event_id))
    return res
