"""The latency benchmark's conversation log: the recorded turns behind each synthetic memory, bulk
loaded into Postgres ``events`` (binary COPY) and into the turn index (the real ``turn_point`` and
index adapter), as the pipeline leaves them once every turn is embedded and indexed.

Each memory comes from one user turn with the memory's own text and event id (the pipeline's
extraction makes a draft of the whole turn, and the turn shares the draft's vector). After it come
on average ``turns_per_memory - 1`` turns that made no memory: user chit-chat and assistant replies,
in the ingest benchmark's proportions (``synthetic.make_turns``: 60 / 40). Their vectors are the
canned text's real E5 vector (24 texts, embedded once and cached) plus the same Gaussian noise as
the memories', so a log of 200k turns costs no further model calls.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bench import synthetic
from bench.latency_data import TENANT, noisy_unit

if TYPE_CHECKING:
    import numpy as np

    from bench.synthetic import SyntheticMemory

# Each memory owns a block of seqs in its session: its source turn, then the turns that follow it.
MAX_EXTRA_TURNS = 7
WINDOW = 3  # turns per context window, as Settings.turn_window by default
CANNED: tuple[str, ...] = (*synthetic.CHIT_CHAT, *synthetic.ASSISTANT)
_ASSISTANT_FROM = len(synthetic.CHIT_CHAT)
CHIT_CHAT_SHARE = 0.6  # of the turns that make no memory (the rest are assistant replies)
REPLY_GAP = timedelta(seconds=20)


@dataclass(frozen=True)
class SyntheticTurn:
    """One row of ``events`` and one point of the turn index."""

    event_id: str
    session_id: str
    seq: int
    role: str
    content: str
    at: datetime
    # Index into CANNED (its vector is that text's plus noise); None for a memory's source turn,
    # which takes the memory's own vector.
    canned: int | None
    importance: float | None


def turn_seq(memory_seq: int, offset: int) -> int:
    """The seq of the ``offset``-th turn of a memory's exchange (0: its source turn). Blocks of
    ``MAX_EXTRA_TURNS + 1`` keep seqs unique per conversation (events has a unique constraint)."""
    if not 0 <= offset <= MAX_EXTRA_TURNS:
        raise ValueError(f"offset must be in 0..{MAX_EXTRA_TURNS}, got {offset}")
    return (memory_seq - 1) * (MAX_EXTRA_TURNS + 1) + offset + 1


def extra_turns(rng: random.Random, mean: float) -> int:
    """How many turns without a memory follow one memory's source turn: the integer part of
    ``mean``, plus one with the probability of its fraction (so the average is ``mean``)."""
    if not 0.0 <= mean <= MAX_EXTRA_TURNS:
        raise ValueError(f"extra turns per memory must be in 0..{MAX_EXTRA_TURNS}, got {mean}")
    whole = int(mean)
    return whole + (1 if whole < MAX_EXTRA_TURNS and rng.random() < mean - whole else 0)


def exchange(memory: SyntheticMemory, rng: random.Random, turns_per_memory: float) -> list[SyntheticTurn]:
    """The memory's source turn and the turns without a memory that follow it (deterministic for
    the rng's state)."""
    out = [
        SyntheticTurn(
            event_id=memory.event_id,
            session_id=memory.session_id,
            seq=turn_seq(memory.seq, 0),
            role="user",
            content=memory.content,
            at=memory.created_at,
            canned=None,
            importance=memory.importance,
        )
    ]
    for offset in range(1, extra_turns(rng, turns_per_memory - 1.0) + 1):
        if rng.random() < CHIT_CHAT_SHARE:
            canned, role = rng.randrange(_ASSISTANT_FROM), "user"
        else:
            canned, role = _ASSISTANT_FROM + rng.randrange(len(CANNED) - _ASSISTANT_FROM), "assistant"
        out.append(
            SyntheticTurn(
                event_id=f"{memory.event_id}t{offset}",
                session_id=memory.session_id,
                seq=turn_seq(memory.seq, offset),
                role=role,
                content=CANNED[canned],
                at=memory.created_at + offset * REPLY_GAP,
                canned=canned,
                importance=None,
            )
        )
    return out


_EVENT_COLUMNS = (
    ("event_id", "text"),
    ("tenant_id", "text"),
    ("user_id", "text"),
    ("session_id", "text"),
    ("seq", "int8"),
    ("role", "text"),
    ("content", "text"),
    ("content_hash", "text"),
    ("at", "timestamptz"),
    ("metadata", "jsonb"),
    ("stage", "text"),
    ("importance", "float8"),
    ("extraction_reasons", "text[]"),
    ("received_at", "timestamptz"),
    ("done_at", "timestamptz"),
    ("stage_at", "timestamptz"),
    ("embedding", "float4[]"),
    ("embedding_model", "text"),
    ("turn_indexed", "bool"),
    ("window_ids", "text[]"),
)


@dataclass(eq=False)
class LogWriter:
    """Writes one user's conversation log, batch by batch, alongside the memories' load."""

    turn_index: Any
    canned_vectors: np.ndarray  # one per CANNED text, in its order
    turns_per_memory: float
    noise: float
    seed: int
    now: datetime
    turns: dict[str, int] = field(default_factory=dict, init=False)  # turns written per user

    def __post_init__(self) -> None:
        if len(self.canned_vectors) != len(CANNED):
            raise ValueError(f"expected {len(CANNED)} canned vectors, got {len(self.canned_vectors)}")

    def write(
        self,
        conn: Any,
        user_id: str,
        memories: Sequence[SyntheticMemory],
        vectors: Sequence[np.ndarray],
        rng: Any,
    ) -> int:
        """COPY the turns of ``memories`` into ``events`` (committed), then upsert their points
        into the turn index; ``vectors`` are the memories' own. Returns how many turns."""
        from psycopg.types.json import Jsonb

        from shared.events import Role, TurnPublished, content_hash
        from shared.indexing.points import turn_point
        from workers.endpoints.embedders.e5 import E5_MODEL_NAME

        # One stream of exchange shapes per user, independent of batch boundaries.
        pick = random.Random(f"{self.seed}:{user_id}:log:{self.turns.get(user_id, 0)}")
        names = [c for c, _ in _EVENT_COLUMNS]
        points = []
        # Each turn's context window, as the pipeline builds it: the turns before it in its session.
        before: dict[str, list[tuple[str, str]]] = {}
        written = 0
        with (
            conn.cursor() as cur,
            cur.copy(f"COPY events ({', '.join(names)}) FROM STDIN (FORMAT BINARY)") as cp,
        ):
            cp.set_types([t for _, t in _EVENT_COLUMNS])
            for memory, vector in zip(memories, vectors, strict=True):
                for turn in exchange(memory, pick, self.turns_per_memory):
                    v = (
                        vector
                        if turn.canned is None
                        else noisy_unit(self.canned_vectors[turn.canned], rng, self.noise)
                    )
                    context = before.setdefault(turn.session_id, [])[-(WINDOW - 1) :]
                    row = {
                        "event_id": turn.event_id, "tenant_id": TENANT, "user_id": user_id,
                        "session_id": turn.session_id, "seq": turn.seq, "role": turn.role,
                        "content": turn.content, "content_hash": content_hash(turn.role, turn.content),
                        "at": turn.at, "metadata": Jsonb({}), "stage": "done",
                        "importance": turn.importance, "extraction_reasons": [], "received_at": turn.at,
                        "done_at": turn.at, "stage_at": self.now, "embedding": v,
                        "embedding_model": E5_MODEL_NAME, "turn_indexed": True,
                        "window_ids": [i for i, _ in context],
                    }  # fmt: skip
                    cp.write_row(tuple(row[c] for c in names))
                    event = TurnPublished(
                        turn.event_id, TENANT, user_id, turn.session_id, turn.seq, Role(turn.role),
                        turn.content, turn.at, {},
                    )  # fmt: skip
                    points.append(turn_point(event, v.tolist(), [text for _, text in context]))
                    before[turn.session_id].append((turn.event_id, turn.content))
                    written += 1
        conn.commit()
        self.turn_index.upsert(points)
        self.turns[user_id] = self.turns.get(user_id, 0) + written
        return written
