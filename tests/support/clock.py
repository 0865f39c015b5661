"""A clock a test moves by hand, injected where the code takes ``time.monotonic``."""

from __future__ import annotations


class ManualClock:
    """Reads ``now`` (seconds, starting at 1000); a test moves it by setting or adding to it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
