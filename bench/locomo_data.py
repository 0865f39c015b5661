"""LoCoMo data: the samples file parsed into conversations, their turns and questions.

The data file is CC BY-NC: it is read from the path given, never copied.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import metrics

SESSION_KEY = re.compile(r"^session_(\d+)$")
SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"
# LongMemEval's question date, e.g. "2023/04/18 (Tue) 18:34" (the weekday is not checked).
QUESTION_DATE = re.compile(r"(\d{4})/(\d{2})/(\d{2}) \(\w+\) (\d{2}):(\d{2})")


class LocomoDataError(ValueError):
    """The data file is not LoCoMo as the harness knows it."""


# --- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    sample_id: str
    session: int
    position: int  # 1-based, within the session
    dia_id: str
    speaker: str
    text: str
    at: datetime
    caption: str | None = None

    @property
    def content(self) -> str:
        out = f"{self.speaker}: {self.text}"
        if self.caption:
            out += f" [shares a photo: {self.caption}]"
        return out

    @property
    def event_id(self) -> str:
        return f"{self.sample_id}.{self.dia_id}"

    @property
    def session_id(self) -> str:
        return f"session_{self.session}"

    def event(self) -> dict[str, Any]:
        """The turn as a published event (the shape ``Publisher.publish_turn`` takes)."""
        return {
            "event_id": self.event_id,
            "user_id": self.sample_id,
            "session_id": self.session_id,
            "seq": self.position,
            "role": "user",
            "content": self.content,
            "at": self.at.isoformat(),
            "metadata": {"speaker": self.speaker, "dia_id": self.dia_id, "source": "locomo"},
        }


@dataclass(frozen=True)
class Question:
    sample_id: str
    number: int  # position in the sample's qa list
    text: str
    category: int
    evidence: metrics.Evidence


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    # When the questions are asked (LongMemEval's ``question_date``); None: just after the turns.
    asked_at: datetime | None = None

    @property
    def now(self) -> datetime:
        """When the questions are asked: the sample's question date, but never before one minute
        after its latest turn (the memory holds every turn; LongMemEval dates some questions hours
        before the final chat session of the same day). A question asked weeks later ("a month ago")
        must be asked then: its named time range counts back from that date."""
        after = max(t.at for t in self.turns) + timedelta(minutes=1)
        return max(after, self.asked_at) if self.asked_at is not None else after

    def dia_of_event(self, event_id: str) -> str | None:
        prefix = f"{self.sample_id}."
        return event_id[len(prefix) :] if event_id.startswith(prefix) else None


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> 2023-05-08 13:56 UTC."""
    try:
        return datetime.strptime(" ".join(text.split()), SESSION_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise LocomoDataError(
            f"session time {text!r} does not read as e.g. '1:56 pm on 8 May, 2023'"
        ) from None


def parse_question_date(sample_id: str, text: Any) -> datetime | None:
    """A sample's ``question_date`` (``"2023/04/18 (Tue) 18:34"``, UTC like the session times);
    None when the sample has none."""
    if text is None:
        return None
    match = QUESTION_DATE.fullmatch(text) if isinstance(text, str) else None
    try:
        if match is None:
            raise ValueError
        year, month, day, hour, minute = (int(g) for g in match.groups())
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError:
        raise LocomoDataError(
            f"{sample_id}: question_date {text!r} does not read as e.g. '2023/04/18 (Tue) 18:34'"
        ) from None


def parse_conversation(sample: Any) -> Conversation:
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        raise LocomoDataError("each sample must be an object with a 'conversation' object")
    sample_id = sample.get("sample_id")
    if not isinstance(sample_id, str) or not sample_id:
        raise LocomoDataError("a sample has no 'sample_id'")
    conv = sample["conversation"]
    sessions: list[tuple[int, list[Any]]] = []
    for key, value in conv.items():
        match = SESSION_KEY.match(key)
        if match and isinstance(value, list):  # date-only sessions (no turn list) are ignored
            sessions.append((int(match.group(1)), value))
    turns: list[Turn] = []
    for number, raw_turns in sorted(sessions):
        when = conv.get(f"session_{number}_date_time")
        if not isinstance(when, str):
            raise LocomoDataError(f"{sample_id}: session_{number} has no session_{number}_date_time")
        start = parse_session_time(when)
        for position, raw in enumerate(raw_turns, 1):
            try:
                turns.append(
                    Turn(
                        sample_id=sample_id,
                        session=number,
                        position=position,
                        dia_id=str(raw["dia_id"]),
                        speaker=str(raw["speaker"]),
                        text=str(raw["text"]),
                        at=start + timedelta(seconds=position),
                        caption=str(raw["blip_caption"]) if raw.get("blip_caption") else None,
                    )
                )
            except (KeyError, TypeError):
                raise LocomoDataError(
                    f"{sample_id}: session_{number} turn {position} lacks speaker, dia_id or text"
                ) from None
    if not turns:
        raise LocomoDataError(f"{sample_id}: no turns")
    known = {t.dia_id for t in turns}
    questions = []
    for number, qa in enumerate(sample.get("qa") or []):
        if not isinstance(qa, dict) or "question" not in qa or "category" not in qa:
            raise LocomoDataError(f"{sample_id}: qa {number} lacks 'question' or 'category'")
        questions.append(
            Question(
                sample_id=sample_id,
                number=number,
                text=str(qa["question"]),
                category=int(qa["category"]),
                evidence=metrics.parse_evidence(qa.get("evidence") or [], known),
            )
        )
    speakers = (str(conv.get("speaker_a", "")), str(conv.get("speaker_b", "")))
    asked_at = parse_question_date(sample_id, sample.get("question_date"))
    return Conversation(sample_id, speakers, turns, questions, asked_at)


def fit_turns(convs: list[Conversation], max_chars: int) -> int:
    """Cut every turn whose published content would exceed ``max_chars`` (the event limit,
    ``CUEMEM_MAX_CONTENT_CHARS``) to fit, in place, so that the pipeline accepts it and the
    baselines see the same text; returns how many were cut. (LongMemEval-S holds a user turn of
    41,861 characters: a pasted document.)"""
    cut = 0
    for conv in convs:
        for i, turn in enumerate(conv.turns):
            over = len(turn.content) - max_chars
            if over > 0:
                conv.turns[i] = replace(turn, text=turn.text[: max(len(turn.text) - over, 0)])
                cut += 1
    return cut


def load_locomo(path: Path) -> list[Conversation]:
    """Read and parse the data file; LocomoDataError (with the reason) when it cannot be used."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LocomoDataError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LocomoDataError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise LocomoDataError(f"{path} must hold a non-empty JSON list of LoCoMo samples")
    return [parse_conversation(sample) for sample in raw]
