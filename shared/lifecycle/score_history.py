"""A memory's half-life score over time, rebuilt from what is stored (for the inspector's curve).

Postgres keeps only the current state of a memory (importance, access count, last access); the
score at an earlier moment is recomputed with :func:`shared.scoring.score` from the state the
memory had then. That state changes at each reinforcement: a repeat of the statement writes a
``reinforced`` history entry at its event time; a use by recall (``memory.reinforce``) raises the
count and the last access without a history entry, so the uses beyond the history's are placed at
the stored last access, the only time known for them. Importance is the current one throughout
(an edit's old value is in the history's details, not replayed here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from shared.models import Memory
from shared.scoring import DEFAULT_GAMMA, DecayPolicy, score
from shared.storage import HistoryEntry

MAX_POINTS = 400


@dataclass(frozen=True)
class Reinforcement:
    at: datetime
    uses: int  # how many uses this moment adds (recall's uses share one moment)
    source: str  # "repeat": a history entry; "recall": uses counted without one
    event_id: str | None = None

    def to_public(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "uses": self.uses,
            "source": self.source,
            "event_id": self.event_id,
        }


def reinforcements(memory: Memory, history: Sequence[HistoryEntry]) -> list[Reinforcement]:
    """The moments the memory was used, oldest first: its ``reinforced`` history entries, then
    the uses the count holds beyond them, at the stored last access."""
    repeats = sorted(
        (
            e
            for e in history
            if e.memory_id == memory.id and e.action == "reinforced" and e.at >= memory.created_at
        ),
        key=lambda e: e.at,
    )
    moments = [Reinforcement(e.at, 1, "repeat", e.event_id) for e in repeats[: memory.access_count]]
    rest = memory.access_count - len(moments)
    if rest > 0:
        at = max(memory.last_accessed_at, moments[-1].at if moments else memory.created_at)
        moments.append(Reinforcement(at, rest, "recall"))
    return moments


def score_curve(
    memory: Memory,
    history: Sequence[HistoryEntry],
    now: datetime,
    policy: DecayPolicy | None = None,
    points: int = 120,
) -> dict[str, Any]:
    """The score from the memory's creation to ``now``: ``points`` evenly spaced samples plus one
    on each side of every reinforcement (where the curve jumps), oldest first."""
    if not 2 <= points <= MAX_POINTS:
        raise ValueError(f"points: must be between 2 and {MAX_POINTS}, got {points}")
    policy = policy or DecayPolicy()
    start = memory.created_at
    end = max(now, start)
    moments = reinforcements(memory, history)
    step = (end - start) / (points - 1)
    times = {start + step * i for i in range(points)}
    for m in moments:
        if start <= m.at <= end:
            times.update({m.at - timedelta(microseconds=1), m.at})
    curve = []
    for t in sorted(x for x in times if start <= x <= end):
        last, uses = start, 0
        for m in moments:
            if m.at > t:
                break
            last, uses = m.at, uses + m.uses
        value = score(memory.importance, memory.type, last, uses, t, policy)
        curve.append({"at": t.isoformat(), "score": round(value, 6)})
    return {
        "memory_id": memory.id,
        "importance": memory.importance,
        "gamma": policy.gamma.get(memory.type, DEFAULT_GAMMA[memory.type]),
        "unit_hours": policy.unit_hours,
        "base": policy.base,
        "stored_score": memory.score,
        "now": end.isoformat(),
        "points": curve,
        "reinforcements": [m.to_public() for m in moments],
    }
