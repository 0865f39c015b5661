"""A fake index that loses its files, as the embedded engine notes a loss (see workers/index/edge.py)."""

from __future__ import annotations

from tests.support.fake_index import FakeVectorIndex


class LosingIndex(FakeVectorIndex):
    """A fake index that remembers a loss, as the embedded adapter does (``LossAwareIndex``);
    ``lose_again_on`` notes a second loss while a reconciliation reads that user's points."""

    def __init__(self) -> None:
        super().__init__()
        self.note: str | None = None
        self.cleared: list[str] = []
        self.lose_again_on: str | None = None

    def lose_everything(self, note: str) -> None:
        self.reset(16, "hash-v1-16")
        self.note = note

    def lost(self) -> str | None:
        return self.note

    def mark_rebuilt(self, lost: str) -> bool:
        if lost != self.note:
            return False
        self.note = None
        self.cleared.append(lost)
        return True

    def payloads(self, tenant_id: str, user_id: str) -> dict[str, dict]:
        if user_id == self.lose_again_on:
            self.note = "a second loss, during the reconciliation"
        return super().payloads(tenant_id, user_id)
