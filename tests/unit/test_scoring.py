import math
from datetime import UTC, datetime, timedelta

import pytest

from shared.models import MemoryType
from shared.scoring import DecayPolicy, reinforcement, score

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def test_fresh_memory_scores_its_importance():
    assert score(7.0, MemoryType.FACT, NOW, 0, NOW) == pytest.approx(7.0)


def test_known_values():
    # 10 days of episodic decay: 8 * 0.9^10 = 2.7894...
    assert score(8.0, MemoryType.EPISODIC, NOW - timedelta(days=10), 0, NOW) == pytest.approx(8 * 0.9**10)
    # reinforcement: ln(1 + 3) with base 1
    assert score(0.0, MemoryType.FACT, NOW, 3, NOW) == pytest.approx(math.log(4))
    policy = DecayPolicy(base=2.0, unit_hours=1.0)
    # γ of a task is 0.93 per unit (docs/ARCHITECTURE.md, "Memory value is information × time").
    expected = 5 * 0.93**12 + 2 * math.log(2)
    assert score(5.0, MemoryType.TASK, NOW - timedelta(hours=12), 1, NOW, policy) == pytest.approx(expected)


def test_profile_barely_decays_and_episodes_fade():
    year = NOW - timedelta(days=365)
    assert score(8.0, MemoryType.PROFILE, year, 0, NOW) > 5.0
    assert score(8.0, MemoryType.EPISODIC, year, 0, NOW) < 1e-10


def test_future_access_does_not_inflate():
    assert score(6.0, MemoryType.FACT, NOW + timedelta(days=3), 0, NOW) == pytest.approx(6.0)


def test_use_keeps_an_old_memory_findable():
    old_used = score(6.0, MemoryType.EPISODIC, NOW - timedelta(days=60), 20, NOW)
    old_unused = score(6.0, MemoryType.EPISODIC, NOW - timedelta(days=60), 0, NOW)
    assert old_used > 3.0 > old_unused
    assert reinforcement(0) == 0.0 and reinforcement(-5) == 0.0


def test_recent_beats_old_important_only_when_the_numbers_say_so():
    old_important = score(9.0, MemoryType.FACT, NOW - timedelta(days=30), 0, NOW)  # 9 * 0.98^30 = 4.92
    recent_minor = score(5.5, MemoryType.FACT, NOW - timedelta(days=1), 0, NOW)  # 5.39
    recent_weak = score(4.5, MemoryType.FACT, NOW - timedelta(days=1), 0, NOW)  # 4.41
    assert recent_minor > old_important > recent_weak


@pytest.mark.parametrize("bad", [{"gamma": {MemoryType.FACT: 1.5}}, {"unit_hours": 0}, {"base": -1}])
def test_policy_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        DecayPolicy(**bad)
