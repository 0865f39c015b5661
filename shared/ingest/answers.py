"""A user's answer read in the light of the assistant's question it answers.

"我不吃香菜" after "你有什么忌口吗？" is a diet preference; "yes, the blue one" after "which colour
do you prefer?" says nothing on its own. The extract stage hands extraction the question clauses
of the session's preceding turn when the assistant spoke it (``shared.ingest.extract``); this
module says what the answer takes from them:

- the question's cue keys and lexicon tags, added to the answer's first memory draft (its first
  statement is the one that answers), so that the words of the question find the answer
  ("我有什么忌口？" matches "忌口" on the answer). The question's text is never copied into the
  memory's content;
- for an answer too weak to be kept alone ("the blue one"), the weight and type of the rule the
  question fires when read as the user's own statement ("which colour do I prefer" fires the
  preference rule), so that the answer is kept as what it answers.

Only a question put to the user (你/您/you) lends anything: "什么时候发货？" asked of no one is
no question about the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from shared.ingest.extraction_rules import RULES, TYPE_ORDER
from shared.language import cues
from shared.language.slot_rules import slot_for
from shared.models import MemoryDraft, MemoryType

_I = re.IGNORECASE
_TO_USER = re.compile(r"你|您|\byou(?:r|rs|'re|'ve|'d|'ll)?\b", _I)
# The question as the user's own words, so that the first-person rules can read it.
_FIRST_PERSON = (
    (re.compile(r"你们|您们"), "我们"),
    (re.compile(r"你|您"), "我"),
    (re.compile(r"\b(?:are|were) you\b", _I), "am I"),
    (re.compile(r"\byou(?: are|'re)\b", _I), "I am"),
    (re.compile(r"\byou've\b", _I), "I've"),
    (re.compile(r"\byour(?:s)?\b", _I), "my"),
    (re.compile(r"\byou\b", _I), "I"),
)


@dataclass(frozen=True)
class AnswerContext:
    """What a question lends the answer: cue keys and tags, and (from the rule it fires as the
    user's statement) a weight and a type, with the rule's name for the extraction's reasons."""

    tags: tuple[str, ...]
    cues: tuple[str, ...]
    weight: float = 0.0
    type: MemoryType | None = None
    rule: str | None = None

    def onto(self, drafts: tuple[MemoryDraft, ...]) -> tuple[MemoryDraft, ...]:
        """``drafts`` with the question's tags and cue keys on the first one (its slot read again
        with them: "忌口" makes a diet preference). Its content stays the answer's own."""
        if not drafts:
            return drafts
        first = drafts[0]
        tags = tuple(dict.fromkeys((*first.tags, *self.tags)))
        keys = tuple(dict.fromkeys((*first.cues, *self.cues)))
        slot = first.slot
        if slot is None and "question" not in first.tags:
            slot = slot_for(first.content, first.type, tags, first.entities)
        return (replace(first, tags=tags, cues=keys, slot=slot), *drafts[1:])


def first_person(question: str) -> str:
    """The question as the user would state it: "你有什么忌口" -> "我有什么忌口"."""
    for pattern, repl in _FIRST_PERSON:
        question = pattern.sub(repl, question)
    return question


def answer_context(question: str) -> AnswerContext | None:
    """What the assistant's ``question`` (its question clauses) lends the user's answer, or None
    when it is no question put to the user."""
    if not question.strip() or not _TO_USER.search(question):
        return None
    tags = cues.lexicon_tags(question)
    found = cues.entities(question)
    keys = cues.cues_for_memory(question, tags, found)
    stated = first_person(question)
    fired = [r for r in RULES if r.type is not None and not r.needs_time and r.pattern.search(stated)]
    if not fired:
        return AnswerContext(tags, keys) if keys else None
    rule = max(fired, key=lambda r: (r.weight, -TYPE_ORDER.index(r.type) if r.type else 0))
    return AnswerContext(tags, keys, rule.weight, rule.type, rule.name)
