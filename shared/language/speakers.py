"""Who said each line of a transcript: a dialogue pasted as one text, one line a turn, each led by
its speaker's label ("user: …", "<Assistant>:\"…\"", "助手：…").

Recall reads a dialogue-so-far query by what the user said in it (``shared.recall.request``): the
assistant's lines are mostly its own chatter ("That's wonderful!", "你一定努力复习了很多吧？"),
which the user's memories do not hold, and their words pull the search towards whatever they
echo. Measured on MADial dev (docs/BENCHMARKS.md): searching the user's lines only raised R@1 and
R@5 in both languages.
"""

from __future__ import annotations

import re

__all__ = ["ASSISTANT_LABELS", "lines_of", "speaker", "without_assistant_lines"]

# A line's speaker label: up to 30 characters before a colon (ASCII or full-width), optionally in
# angle brackets. Text that merely holds a colon ("Note to self: …") reads as a label too, but
# only the assistant's labels below are ever dropped.
_LABEL_RE = re.compile(r"^\s*<?\s*([^<>:：\n]{1,30}?)\s*>?\s*[:：]")

# Labels that name the assistant (or the system prompt), compared case-insensitively. They are
# dropped only from a transcript whose user has a label of their own (see below): "System: Ubuntu
# 22.04" in a user's note is not a system prompt.
ASSISTANT_LABELS = frozenset(
    {"assistant", "ai", "bot", "chatbot", "system", "助手", "小助手", "ai助手", "机器人"}
)


def lines_of(text: str) -> list[str]:
    """The lines of a transcript that say something (blank ones dropped): more than one is a
    dialogue, not one question."""
    return [line for line in text.splitlines() if line.strip()]


def speaker(line: str) -> str | None:
    """The line's speaker label, lower-cased, or None when it has none."""
    m = _LABEL_RE.match(line)
    return m.group(1).strip().lower() if m else None


def without_assistant_lines(text: str) -> str:
    """``text`` without the lines an assistant (or the system) said; unlabelled lines stay. Only a
    transcript is cut: one where a line that stays has a speaker label of its own (the user's,
    "user:", "<Bart>:"). Otherwise, or when nothing labelled would stay, the text is returned
    whole: it is the user's own writing that happens to start a line with such a word, or there
    is nothing else to read."""
    lines = text.splitlines()
    kept = [line for line in lines if speaker(line) not in ASSISTANT_LABELS]
    if len(kept) == len(lines) or not any(speaker(line) is not None for line in kept):
        return text
    return "\n".join(kept)
