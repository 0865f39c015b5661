"""Whether a statement gives a slot its present value, a plan for it, or no value of the speaker's.

A turn often says more than one thing: "I'm lactose intolerant, so I'll just need the dairy-free
recipe". The "I'll" of its second clause says nothing about the first, which is a present fact.
So the mood is read from the clauses that carry the slot's value, never from a future word
elsewhere in the turn:

- **Pieces**: the statement is cut at sentence ends, commas and dashes, and before a clause that
  opens with a subordinator ("if", "when", "so I", "because we", 如果, 所以, 因为...).
- **The value's pieces**: those whose own words give the slot (``carries``: for a slot of the
  words, :func:`shared.language.slot_rules.slot_for` of the piece; for a slot by meaning, the words that
  say a value is given). When no piece alone carries it, every piece does.
- **A piece's mood**: a *plan* when the piece itself has a plan word (要/打算/计划/准备/will/going
  to…, :data:`shared.language.plan_words.PLAN_RE`) or a present progressive ("we're moving") and a
  future tense, or opens with "when/once/after" (一旦, 等我) and speaks of the future ("when we
  move to Denver next year"), or is a move or a start in the progressive with no time past
  ("I'm moving to Munich soon"); *no value* when it is a condition ("if I get a new job", 如果,
  要是), a search or a wish for the value ("looking for a new job", "on the hunt for", 在找, 想换)
  or someone else's ("congrats on the new job", "your new job", 恭喜); the *present* otherwise.
  A piece without a subject of its own ("…, move to Suzhou and open a café", "…，搬到上海") goes
  on the clause before it and takes its mood.
- **The statement's mood**: a plan when every value piece is a plan or no value and one is a
  plan, no value when every one is no value, else the present. A present statement of the value
  is never a plan because of another clause; a plan said next to the present value ("我住在杭州，
  明年要搬到苏州") is the newer statement of the present value, which the plan does not replace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from enum import StrEnum

from shared.ingest.extraction_rules import COMING_SLOTS, is_change
from shared.language import cues, timeexpr
from shared.language.plan_words import PLAN_RE, plan_slot
from shared.language.slot_rules import slot_for
from shared.models import MemoryType

__all__ = [
    "PLAN_TAG",
    "Mood",
    "as_said",
    "coming_plan",
    "is_plan",
    "mood",
    "pieces",
    "word_carrier",
]

PLAN_TAG = "plan"
_I = re.IGNORECASE


class Mood(StrEnum):
    PRESENT = "present"
    PLAN = "plan"
    NONE = "none"  # a condition, a search or a wish, someone else's: no value of the speaker's


_SUBJECT_EN = r"(?:I|we|you|he|she|they|it|there)(?:['’]\w+)?"
# Where a piece ends: a sentence end, a comma (not of "1,000"), a colon or a dash between words.
_CUT_RE = re.compile(r"[。！？!?；;，、\n]+|\.(?=\s|$)|,(?!\d)|[:：]\s|\s[-–—]+\s")
# Where a clause opens inside a piece: a condition or a time clause, or a conjunction with a subject.
_OPEN_RE = re.compile(
    r"\s(?=(?:if|unless|whether|when|whenever|once|after|before|until)\b)"
    rf"|\s(?=(?:so|because|since|but|though|although|while|whereas|and|or)\s+{_SUBJECT_EN}\b)"
    r"|(?=所以|因为|但是|不过|可是|如果|要是|假如|万一|一旦)",
    _I,
)
_LEAD = r"^[\s\W]*(?:(?:and|but|so|or|then|even|who knows)\s+)*"
_CONDITION_RE = re.compile(
    _LEAD + r"(?:if|unless|whether|in case)\b|^[\s\W]*(?:就|那就)?(?:如果|要是|假如|万一|假设|除非)", _I
)
_TIME_CLAUSE_RE = re.compile(
    _LEAD + r"(?:when|whenever|once|after|before|until|as soon as)\b|^[\s\W]*(?:一旦|等到|等我)", _I
)
# A value sought, wished for or someone else's ("on the hunt for a new job", "congrats on the new
# job", "我在找新工作", "恭喜你换了新工作").
_NOT_OWN_RE = re.compile(
    r"\b(?:look\w*|hunt\w*|search\w*|seek\w*|apply\w*|applied|interview\w*)\s+(?:for|to|at|with)\b"
    r"|\bon the (?:hunt|lookout|search)\b|\b(?:want|wish|hope|need)\w*\s+(?:a|an|the|my|our)\s+new\b"
    r"|\bcongrat\w*|\bgood luck\b|\bproud of you\b|\byour\b"
    r"|在?找|寻找|想(?:换|找|搬|去)|希望|恭喜|祝贺|你的|你(?:也)?(?:换|搬|入职|跳槽)",
    _I,
)
# The present progressive of a future time ("we're moving to Denver next year", "I'm starting at
# Stripe next month") says a plan as plainly as "will" does; of a move or a start it does with no
# time named, or only "soon" ("I'm moving to Berkeley soon"): the move has not happened yet.
_PROGRESSIVE_RE = re.compile(r"\b(?:I|we)(?:['’]m|['’]re| am| are) (?:\w+ )?\w+ing\b", _I)
_COMING_RE = re.compile(
    r"\b(?:I|we)(?:['’]m|['’]re| am| are) (?:\w+ )?"
    r"(?:(?:moving|relocating)(?: back)? to|starting (?:at|a new|my new|the new)"
    r"|about to (?:move|relocate|start))\b",
    _I,
)
_SUBJECT_RE = re.compile(rf"\b{_SUBJECT_EN}\b|[我咱你他她它]", _I)


def pieces(text: str) -> list[str]:
    """The pieces of ``text`` whose mood is read apart (see the module's doc)."""
    out: list[str] = []
    for part in _CUT_RE.split(text):
        cuts = [0, *(m.start() for m in _OPEN_RE.finditer(part) if m.start() > 0), len(part)]
        out += [p for s, e in zip(cuts, cuts[1:], strict=False) if (p := part[s:e].strip())]
    return out


def _own_mood(piece: str) -> Mood | None:
    """The mood ``piece`` states by its own words; None when it has none of its own."""
    if _CONDITION_RE.search(piece) or _NOT_OWN_RE.search(piece):
        return Mood.NONE
    tense = timeexpr.tense(piece)
    if tense == "future" and (
        PLAN_RE.search(piece) or _TIME_CLAUSE_RE.search(piece) or _PROGRESSIVE_RE.search(piece)
    ):
        return Mood.PLAN
    if tense is None and _COMING_RE.search(piece):
        return Mood.PLAN
    return None


def mood(content: str, carries: Callable[[str], bool] | None = None) -> Mood:
    """The mood in which ``content`` states the value its ``carries`` pieces give (all pieces
    when None, or when none alone gives it)."""
    moods: list[tuple[str, Mood]] = []
    for piece in pieces(content):
        own = _own_mood(piece)
        if own is None:  # a piece without a subject goes on the clause before it
            own = moods[-1][1] if moods and not _SUBJECT_RE.search(piece) else Mood.PRESENT
        moods.append((piece, own))
    valued = [m for p, m in moods if carries is not None and carries(p)] or [m for _, m in moods]
    if not valued or Mood.PRESENT in valued:
        return Mood.PRESENT
    return Mood.PLAN if Mood.PLAN in valued else Mood.NONE


def _not_over(content: str, at: datetime) -> bool:
    refs = timeexpr.resolve(content, at)
    return not refs or timeexpr.earliest_future(refs, at) is not None


def is_plan(content: str, at: datetime, carries: Callable[[str], bool] | None = None) -> bool:
    """Whether ``content`` states a plan ("我下个月要搬到深圳了", "we're going to move to Denver",
    "我打算明年换工作") for the value its ``carries`` pieces give, naming no time already over."""
    return mood(content, carries) is Mood.PLAN and _not_over(content, at)


def word_carrier(slot: str, type_: MemoryType) -> Callable[[str], bool]:
    """Whether a piece's own words give ``slot`` (for a memory of ``type_``)."""

    def carries(piece: str) -> bool:
        tags = (*cues.lexicon_tags(piece), *(("change",) if is_change(piece) else ()))
        return slot_for(piece, type_, tags, cues.entities(piece)) == slot

    return carries


def coming_slot(text: str) -> str | None:
    """The slot a move or a start to come, named in ``text``, would fill
    (``shared.ingest.extraction_rules.COMING_SLOTS``), when what it names is a name: no lexicon
    word, not "Plan B", "Room 204" or "Level 2"."""
    for slot, pattern in COMING_SLOTS:
        for m in pattern.finditer(text):
            name = m.group("name")
            if not cues.lexicon_tags(name) and not re.search(r" (?:\d|[A-Z]\b)", name):
                return slot
    return None


def coming_plan(content: str, at: datetime) -> str | None:
    """The plan's slot (``plan:profile:home``) when ``content`` states a move or a start to come
    as the speaker's plan; None otherwise, never the present slot."""
    slot = coming_slot(content)
    if slot is None or any(_CONDITION_RE.search(piece) for piece in pieces(content)):
        return None  # "If I get a new job, I'll move to Denver": a hypothetical, no plan
    said = mood(content, lambda piece: coming_slot(piece) == slot)
    return plan_slot(slot) if said is Mood.PLAN and _not_over(content, at) else None


def as_said(content: str, slot: str, at: datetime, carries: Callable[[str], bool]) -> str | None:
    """``slot`` as ``content`` gives it: the slot for its present value,
    :func:`shared.language.plan_words.plan_slot` for a plan, None when no piece states a value of
    the speaker's (a condition, a search, a wish or someone else's: such a statement must never
    replace the speaker's value)."""
    said = mood(content, carries)
    if said is Mood.NONE:
        return None
    return plan_slot(slot) if said is Mood.PLAN and _not_over(content, at) else slot
