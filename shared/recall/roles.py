"""Who said it: the assistant's questions are no facts about the user.

Assistant turns stay searchable ("what did you recommend me?"), but a question the assistant asked
("好呀，你有什么忌口吗？") shares the words of the user's later question ("我有什么忌口？") while
saying nothing about the user: the user's answer must rank above it. So, unless the query asks
what the assistant said, an assistant turn that only asks weighs ``QUESTION_WEIGHT`` in fusion's
prior (``shared.recall.fusion.prior``) and never answers first as a confident cue hit. (Its
answer carries the question's cue keys: ``shared.ingest.answers``.)
"""

from __future__ import annotations

import re

from shared.events import Role
from shared.ingest.extraction import is_chit_chat, statement_text
from shared.recall.request import Candidate

# Half: the top of a list (1/11) then counts like rank 11 (1/22). Enough to put the user's
# answer, found by the same words and meaning, above the question; an assistant question still
# comes back when nothing else matches.
QUESTION_WEIGHT = 0.5

_ABOUT_ASSISTANT = re.compile(
    r"\b(?:what|which|where|when|how|who|why) (?:did|have|had) you\b"
    r"|\byou (?:said|say|told|tell|recommend(?:ed)?|suggest(?:ed)?|mention(?:ed)?|advised?|proposed?"
    r"|asked|answered|meant|wrote|gave)\b|\byour (?:advice|suggestion|recommendation|answer|reply)\b"
    r"|\bdid you (?:say|tell|recommend|suggest|mention|ask)\b"
    r"|你(?:之前|刚才|刚刚|上次|以前|当时|那天|昨天)?(?:说|讲|推荐|建议|提到|提过|告诉|问|回答|答|让我|叫我)",
    re.IGNORECASE,
)


def asks_assistant(query: str) -> bool:
    """Whether the query asks what the assistant said: "what did you recommend", "你推荐了什么"."""
    return _ABOUT_ASSISTANT.search(query) is not None


def is_assistant_question(c: Candidate) -> bool:
    """A raw turn of the assistant that only asks: once its questions are taken out, nothing or
    chit-chat is left ("好呀，你有什么忌口吗？")."""
    if c.item.role != Role.ASSISTANT.value:
        return False
    statement = statement_text(c.item.content)
    return not statement.strip() or is_chit_chat(statement)


def speaker_weight(c: Candidate, about_assistant: bool) -> float:
    """The factor fusion's prior takes for who said it: QUESTION_WEIGHT for an assistant question
    (unless the query asks what the assistant said), 1 otherwise."""
    return QUESTION_WEIGHT if not about_assistant and is_assistant_question(c) else 1.0


def may_answer_first(c: Candidate, about_assistant: bool) -> bool:
    """Whether a confident cue hit may answer before the search: not an assistant question."""
    return about_assistant or not is_assistant_question(c)
