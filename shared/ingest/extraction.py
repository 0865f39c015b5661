"""Rule-based extraction: how important a chat turn is and which memory drafts it yields.

Deterministic and pure: the same turn always gives the same :class:`Extraction`. Importance (0-10)
adds up the weights of the rules that fire (preferences, profile facts, tasks, decisions, key
entities...); chit-chat and questions stay low, except a user's question about a topic they keep
following or about their own things ("收盘了吗", "我那只基金怎么样"), kept as an episode exactly at
the default threshold for consolidation to find. A turn that states several different kinds of fact
("我住杭州，不吃香菜") becomes one draft per kind. An instruction to remember ("记住，我不吃香菜！",
"…，请记住。", "Please remember this: …") raises the importance of the statement it goes with and
is cut from its words: it is never a memory of its own.

Each draft also carries its slot (the attribute it is about, from the lexicon's slot rules), whether
it is negated or states a change, its time expressions resolved against the event's time (ISO, see
:mod:`shared.language.timeexpr`) and, for a task, when it falls due. The rules are in
:mod:`shared.ingest.extraction_rules`; which clauses state, which ask and what is only chit-chat is
read by :mod:`shared.language.clauses`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from shared.events import Role, TurnPublished
from shared.ingest.answers import AnswerContext, answer_context
from shared.ingest.extraction_rules import (
    CHANGE_TYPE_WEIGHT,
    COPULA_RE,
    ENTITY_WEIGHTS,
    RULES,
    TYPE_ORDER,
    interest_topic,
    is_change,
    is_instruction,
    is_negated,
    without_instruction,
)
from shared.ingest.plans import PLAN_TAG, as_said, coming_plan, is_plan, word_carrier
from shared.language import cues, timeexpr
from shared.language.clauses import WORD_RE, clause_spans, is_chit_chat, sentence_spans, statement_text
from shared.language.plan_words import PLAN_PREFIX
from shared.language.slot_rules import slot_for
from shared.models import Extraction, MemoryDraft, MemoryType

__all__ = [
    "DEFAULT_THRESHOLD",
    "MAX_SUMMARY_CHARS",
    "analyse",
    "clean",
    "extract",
    "is_change",
    "is_instruction",
    "is_negated",
    "is_plan",
    "slot_for",
    "summarize",
    "without_instruction",
]

DEFAULT_THRESHOLD = 5.0
MAX_SUMMARY_CHARS = 100
MAX_DRAFT_ENTITIES = 16
MAX_SPLIT_CLAUSES = 24
ELLIPSIS = "…"
_FULL_STOPS = ".。!！?？；; "
_I = re.IGNORECASE
_P, _E = MemoryType.PREFERENCE, MemoryType.EPISODIC
_ANY_TIME = datetime(2000, 1, 3, 12, 0, tzinfo=UTC)  # whether a time is named does not depend on when


_LEAD_FILLER_RE = re.compile(
    r"^(?:(?:嗯+|呃+|额|啊+|哦+|噢|那个|就是|其实|然后|对了|好的|好吧|你好|您好|嗨|而且|并且|另外|还有|同时|不过|但是"
    r"|当然|没问题|收到|明白了?|(?:ok|okay|well|so|um+|uh+|oh|hmm+|actually|btw|by the way|anyway|yeah|yes"
    r"|right|hi|hello|hey|sure|great|cool|thanks|thank you|got it|no problem|of course|certainly|and|but|plus"
    r"|also)(?=[\s,，.。!！…]|$))[\s,，、.。!！~～…]*)+", _I)  # fmt: skip
_TRAIL_FILLER_RE = re.compile(r"(?:[\s,，、;；:：.。!！~～…]|[哈呵嘿嘻]{2,}|\blol\b|\bhaha\w*)+$", _I)
_SPACES_RE = re.compile(r"\s+")
# Where a summary may be cut: never at the "," of "1,000" or the ":" of "10:30" or a URL.
_SOFT_BREAK_RE = re.compile(r"[，；：、]\s*|[,;:](?=\s)\s*|\s+")
_ASCII_TOKEN_CHAR = re.compile(r"[A-Za-z0-9._\-#@$¥%]")


@dataclass(frozen=True)
class _Analysis:
    importance: float
    type: MemoryType
    reasons: tuple[str, ...]


def _entity_score(found: list[cues.Entity]) -> float:
    if not found:
        return 0.0
    weights = sorted(
        (ENTITY_WEIGHTS.get(e.kind, 2.0 if e.kind != "acronym" else 1.5) for e in found), reverse=True
    )
    return min(4.5, weights[0] + 0.75 * (len(weights) - 1))


def _technical_score(text: str, has_entities: bool) -> float:
    """A technical topic (lexicon "fact" word) stated with a value: "部署端口是8443"."""
    if not any(h.type_hint is MemoryType.FACT for h in cues.lexicon_hits(text)):
        return 0.0
    if has_entities:
        return 3.0
    return 2.0 if COPULA_RE.search(text) else 0.0


def _choose_type(typed: list[tuple[float, MemoryType]], text: str) -> MemoryType:
    """The type of the heaviest typed rule; else the first lexicon hint; else episodic."""
    if typed:
        return max(typed, key=lambda wt: (wt[0], -TYPE_ORDER.index(wt[1])))[1]
    hints = [h.type_hint for h in cues.lexicon_hits(text) if h.type_hint is not None]
    return hints[0] if hints else _E


def analyse(text: str, role: Role = Role.USER) -> _Analysis:
    """Importance, memory type and the names of the rules that fired, for one piece of text."""
    if is_chit_chat(text):
        return _Analysis(0.5 if role is Role.USER else 0.0, _E, ("chit_chat",))
    statement = statement_text(text)
    if not statement.strip():  # a pure question asks for memory, it states none...
        topic = interest_topic(text) if role is Role.USER else None
        if topic is not None:  # ... but one about a followed topic or one's own things is an episode
            return _Analysis(DEFAULT_THRESHOLD, _E, ("question", f"interest:{topic}"))
        asked = _entity_score(cues.find_entities(text))
        return _Analysis(round(min(3.0, 0.5 + 0.5 * asked), 2), _E, ("question",))
    found = cues.find_entities(statement)
    user = role is Role.USER
    score = {Role.USER: 1.0, Role.ASSISTANT: 0.5}.get(role, 0.0)
    reasons: list[str] = [] if user else [f"role:{role.value}"]
    fired = [r for r in RULES if (user or not r.own_statement) and r.pattern.search(statement)]
    if any(r.needs_time for r in fired):  # a plan counts when it names a time and is not a task already
        timed = not any(r.type is MemoryType.TASK and not r.needs_time for r in fired) and bool(
            timeexpr.resolve(statement, _ANY_TIME)
        )
        fired = [r for r in fired if timed or not r.needs_time]
    # Diminishing returns: the strongest rule counts fully, each further one half.
    weights = sorted((r.weight for r in fired), reverse=True)
    score += sum(w if i == 0 else w / 2 for i, w in enumerate(weights))
    reasons += [r.name for r in fired]
    if found:
        score += _entity_score(found)
        reasons.append(f"entities:{len(found)}")
    typed = [(r.weight, r.type) for r in fired if r.type is not None]
    technical = _technical_score(statement, bool(found))
    if technical:
        score += technical
        reasons.append("technical")
        typed.append((technical, MemoryType.FACT))
    if "change" in reasons and not technical:  # a changed habit is a preference unless typed otherwise
        typed.append((CHANGE_TYPE_WEIGHT, _P))
    if any(h.type_hint is not None for h in cues.lexicon_hits(statement)):
        score += 0.5
        reasons.append("topic")
    if user and (len(WORD_RE.findall(statement)) >= 12 or cues.CJK_RE.subn("", statement)[1] >= 20):
        score += 0.5
        reasons.append("substance")
    if role in (Role.SYSTEM, Role.TOOL) and not found:
        score = min(score, 3.0)
        reasons.append("no_entities")
    return _Analysis(round(max(0.0, min(10.0, score)), 2), _choose_type(typed, statement), tuple(reasons))


def clean(text: str) -> str:
    """Collapse whitespace and trim leading filler ("嗯，", "well,") and trailing punctuation."""
    text = _SPACES_RE.sub(" ", text).strip()
    trimmed = _TRAIL_FILLER_RE.sub("", _LEAD_FILLER_RE.sub("", text))
    return trimmed or text


def _cut(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters at a clause or word boundary, never inside a code."""
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    breaks = [m.start() for m in _SOFT_BREAK_RE.finditer(text, 0, room + 1) if m.start() >= room // 2]
    if breaks:
        return text[: breaks[-1]].rstrip() + ELLIPSIS
    cut = room
    while cut > 0 and _ASCII_TOKEN_CHAR.match(text[cut - 1]) and _ASCII_TOKEN_CHAR.match(text[cut]):
        cut -= 1  # step back to the start of the number or code that straddles the limit
    return (text[:cut].rstrip() or text[:room]) + ELLIPSIS


def _same(a: str, b: str) -> bool:
    return a.rstrip(_FULL_STOPS) == b.rstrip(_FULL_STOPS)


def summarize(text: str, role: Role = Role.USER, limit: int = MAX_SUMMARY_CHARS) -> str:
    """A short content line: the cleaned text, or its most informative sentences within ``limit``."""
    text = clean(statement_text(text) or text)
    if len(text) <= limit:
        return text
    # Sentences keep their own full stops so that the picked ones join back into prose.
    sentences = [_SPACES_RE.sub(" ", text[s:e]).strip() for s, e in sentence_spans(text)]
    scored = sorted(((analyse(s, role).importance, -i) for i, s in enumerate(sentences)), reverse=True)
    best_score, best_index = scored[0][0], -scored[0][1]
    picked: list[int] = []
    used = 0
    for score, neg_index in scored:
        length = len(sentences[-neg_index]) + 1
        repeated = any(_same(sentences[i], sentences[-neg_index]) for i in picked)
        if score >= best_score / 2 and used + length <= limit and not repeated:
            picked.append(-neg_index)
            used += length
    if not picked:
        return _cut(clean(sentences[best_index]), limit)
    joiner = "" if cues.CJK_RE.search(text) else " "
    return _cut(clean(joiner.join(sentences[i] for i in sorted(picked))), limit)


@dataclass(frozen=True)
class _Group:
    type: MemoryType
    start: int
    end: int


def _groups(text: str, role: Role, threshold: float) -> list[_Group]:
    """Runs of clauses about one kind of fact; a new group starts at a memorable clause of a new type.

    Clauses that are not memorable on their own stay with the group before them (or the first one).
    """
    groups: list[_Group] = []
    lead_start: int | None = None
    spans = clause_spans(text)
    if len(spans) > MAX_SPLIT_CLAUSES:  # a long text is summarised as a whole, not split up
        return groups
    for start, end in spans:
        found = analyse(text[start:end], role)
        # An instruction to remember ("记住，") opens no group: it goes with its statement.
        opens = found.importance >= threshold and not is_instruction(text[start:end])
        if opens and (not groups or groups[-1].type != found.type):
            groups.append(_Group(found.type, start if lead_start is None else lead_start, end))
            lead_start = None
        elif groups:
            groups[-1] = _Group(groups[-1].type, groups[-1].start, end)
        elif lead_start is None:
            lead_start = start
    return groups


def _draft(text: str, role: Role, importance: float, type_: MemoryType, at: datetime) -> MemoryDraft:
    # The instruction to remember raised ``importance``; the memory holds what was to be remembered.
    content = summarize(without_instruction(text) or text, role)
    change = role is Role.USER and is_change(content)
    question = not statement_text(text).strip()
    extra = (("change",) if change else ()) + (("question",) if question else ())
    tags = tuple(dict.fromkeys(cues.lexicon_tags(content) + extra))
    found = cues.entities(content)[:MAX_DRAFT_ENTITIES]
    slot = None if question else slot_for(content, type_, tags, found)
    if role is Role.USER and slot is None and not question:
        # A move or a start to come, named ("I'm going to move to Suzhou next spring"): a plan of
        # the slot it would fill, or nothing; never the present value (``plans.coming_plan``).
        slot = coming_plan(content, at)
        if slot is not None:
            type_, change = MemoryType.TASK, False
            tags = tuple(t for t in dict.fromkeys((*tags, PLAN_TAG)) if t != "change")
    elif role is Role.USER and slot is not None:
        # Read from the clauses that carry the value (``shared.ingest.plans``): a plan for a slot
        # ("我们计划明年春天搬到苏州") is a task of its own slot, not the slot's new value, so the
        # present value stays current; a condition, a search or someone else's value is no value.
        slot = as_said(content, slot, at, word_carrier(slot, type_))
        if slot is not None and slot.startswith(PLAN_PREFIX):
            type_, change = MemoryType.TASK, False
            tags = tuple(t for t in dict.fromkeys((*tags, PLAN_TAG)) if t != "change")
    time_refs, due_at = timing(content, type_, at)
    return MemoryDraft(
        type=type_,
        content=content,
        importance=importance,
        tags=tags,
        entities=found,
        cues=cues.cues_for_memory(content, tags, found),
        slot=slot,
        negated=is_negated(content),
        change=change,
        time_refs=time_refs,
        due_at=due_at,
    )


def timing(
    content: str, type_: MemoryType, at: datetime, said: str | None = None
) -> tuple[tuple[str, ...], datetime | None]:
    """A memory's time references and, for a task, when it falls due: resolved in the zone of the
    turn's own offset (``at``). ``said``: the turn's words, for a task whose own words (rewritten
    by the model) lost its time."""
    refs = timeexpr.resolve(content, at)
    if type_ is MemoryType.TASK and not refs and said:
        refs = timeexpr.resolve(said, at)
    due_at = timeexpr.earliest_future(refs, at) if type_ is MemoryType.TASK else None
    return tuple(dict.fromkeys(r.iso for r in refs)), due_at


def extract(
    event: TurnPublished, threshold: float = DEFAULT_THRESHOLD, asked: str | None = None
) -> Extraction:
    """Score one turn and, when it reaches ``threshold``, turn it into memory drafts.

    ``asked`` is the question the assistant put just before this turn (its question clauses): a
    user's answer is read in its light (:mod:`shared.ingest.answers`)."""
    text = event.content
    context = answer_context(asked) if asked and event.role is Role.USER else None
    turn = analyse(text, event.role)
    if context is not None:
        turn = _answering(turn, context)
    groups = [] if turn.importance < threshold else _groups(text, event.role, threshold)
    if len(groups) >= 2:
        parts = [(text[g.start : g.end], analyse(text[g.start : g.end], event.role)) for g in groups]
        importance = max(turn.importance, *(a.importance for _, a in parts))
        drafts = tuple(
            _draft(part, event.role, a.importance, g.type, event.at)
            for (part, a), g in zip(parts, groups, strict=True)
        )
        return Extraction(
            importance, _in_light_of(context, drafts), turn.reasons + ("split:" + str(len(drafts)),)
        )
    if turn.importance < threshold:
        return Extraction(turn.importance, (), turn.reasons)
    if is_instruction(text) or is_chit_chat(without_instruction(text)):  # "记住了", "好的，记住了"
        return Extraction(turn.importance, (), (*turn.reasons, "instruction_only"))
    draft = _draft(text, event.role, turn.importance, turn.type, event.at)
    return Extraction(turn.importance, _in_light_of(context, (draft,)), turn.reasons)


def _answering(turn: _Analysis, context: AnswerContext) -> _Analysis:
    """An answer weaker alone than the rule its question fires ("the blue one" after "which colour
    do you prefer?") takes that rule's weight and type; a chit-chat reply or a counter-question
    takes nothing."""
    if (
        context.type is None
        or turn.importance >= context.weight
        or {"chit_chat", "question"} & set(turn.reasons)
    ):
        return turn
    importance = round(min(10.0, turn.importance + context.weight), 2)
    return _Analysis(importance, context.type, (*turn.reasons, f"answers:{context.rule}"))


def _in_light_of(context: AnswerContext | None, drafts: tuple[MemoryDraft, ...]) -> tuple[MemoryDraft, ...]:
    return drafts if context is None else context.onto(drafts)
