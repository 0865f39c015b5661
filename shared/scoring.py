"""The half-life score of a memory, in one place: R = S · γ^t + B · f(N).

- S: importance (0–10);
- γ: the decay factor per day for the memory's type (identity-like profile facts barely decay);
- t: days since the memory was last accessed (``unit_hours`` changes the unit);
- B · f(N): a base that keeps much-used memories findable, f(N) = ln(1 + N) of the access count.

``score_sql`` renders the same definition as a SQL expression, so Postgres recomputes scores
set-based; a test checks that both agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shared.models import MemoryType

DEFAULT_GAMMA: dict[MemoryType, float] = {
    MemoryType.PROFILE: 0.999,  # identity-like: a year later still 0.69 of its weight
    MemoryType.SEMANTIC: 0.99,
    MemoryType.FACT: 0.98,
    MemoryType.PREFERENCE: 0.97,
    MemoryType.TASK: 0.93,
    MemoryType.EPISODIC: 0.90,
}


@dataclass(frozen=True)
class DecayPolicy:
    gamma: Mapping[MemoryType, float] = field(default_factory=lambda: dict(DEFAULT_GAMMA))
    base: float = 1.0
    unit_hours: float = 24.0

    @classmethod
    def configured(
        cls, gamma: Mapping[str, float] | None = None, base: float = 1.0, unit_hours: float = 24.0
    ) -> DecayPolicy:
        """The defaults with per-type overrides by type name (``CUEMEM_DECAY_GAMMA``)."""
        merged = dict(DEFAULT_GAMMA)
        merged.update({MemoryType(name): float(g) for name, g in (gamma or {}).items()})
        return cls(gamma=merged, base=base, unit_hours=unit_hours)

    def __post_init__(self) -> None:
        for memory_type, g in self.gamma.items():
            if not 0.0 < g <= 1.0:
                raise ValueError(f"gamma for {memory_type}: {g} is not in (0, 1]")
        if self.unit_hours <= 0:
            raise ValueError(f"unit_hours: {self.unit_hours} must be positive")
        if self.base < 0:
            raise ValueError(f"base: {self.base} must not be negative")


def reinforcement(access_count: int) -> float:
    return math.log1p(max(access_count, 0))


def elapsed_units(last_accessed_at: datetime, now: datetime, unit_hours: float) -> float:
    # A memory accessed "in the future" (clock skew, a replayed log) has not decayed yet.
    return max((now - last_accessed_at).total_seconds(), 0.0) / (unit_hours * 3600.0)


def score(
    importance: float,
    memory_type: MemoryType,
    last_accessed_at: datetime,
    access_count: int,
    now: datetime,
    policy: DecayPolicy | None = None,
) -> float:
    policy = policy or DecayPolicy()
    gamma = policy.gamma.get(memory_type, DEFAULT_GAMMA[memory_type])
    t = elapsed_units(last_accessed_at, now, policy.unit_hours)
    return importance * gamma**t + policy.base * reinforcement(access_count)


def score_sql(policy: DecayPolicy | None = None, now_param: str = "now") -> str:
    """The same formula over the ``memories`` columns; ``:now`` is bound by the caller."""
    policy = policy or DecayPolicy()
    cases = " ".join(
        f"WHEN '{t.value}' THEN {float(policy.gamma.get(t, DEFAULT_GAMMA[t]))!r}" for t in MemoryType
    )
    seconds = f"GREATEST(EXTRACT(EPOCH FROM (:{now_param} - last_accessed_at)), 0)"
    return (
        f"importance * power((CASE type {cases} ELSE 1.0 END)::double precision, "
        f"{seconds} / {policy.unit_hours * 3600.0!r}) "
        f"+ {policy.base!r} * ln(1 + GREATEST(access_count, 0))"
    )
