"""A use case of ``service/operations/`` runs on a small fake of the ports it names
(``service/operations/ports.py``), not on a ``workers.bootstrap.Container``: here the dead
letters, listed through ``Stores.uow`` and replayed through ``Dispatching.dispatch``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from service.operations.dead_letters import list_dead_letters, replay
from shared.storage import DeadLetterView, FollowUp
from workers.bootstrap import Container

PARKED = datetime(2026, 11, 1, tzinfo=UTC)


def _letter(letter_id: int, replayed_at: datetime | None = None) -> DeadLetterView:
    return DeadLetterView(
        letter_id, "memory.extract", f"task-{letter_id}", f"e{letter_id}", "boom", 5, PARKED, replayed_at,
        [["t1", f"e{letter_id}"]],
    )  # fmt: skip


class FakeDeadLetters:
    def __init__(self, letters: list[DeadLetterView]) -> None:
        self.letters = {letter.id: letter for letter in letters}
        self.asked: list[bool] = []

    def listed(self, include_replayed: bool) -> list[DeadLetterView]:
        self.asked.append(include_replayed)
        return [x for x in self.letters.values() if include_replayed or x.replayed_at is None]

    def by_ids(self, ids: Sequence[int]) -> dict[int, DeadLetterView]:
        return {i: self.letters[i] for i in ids if i in self.letters}

    def mark_replayed(self, letter_id: int, at: datetime) -> None:
        self.letters[letter_id] = DeadLetterView(**{**self.letters[letter_id].__dict__, "replayed_at": at})


class FakePorts:
    """Only what the dead letters use of the ports: a unit of work holding ``dead_letters`` and a
    dispatch that records what it was asked to send."""

    def __init__(self, letters: list[DeadLetterView]) -> None:
        self.dead_letters = FakeDeadLetters(letters)
        self.sent: list[FollowUp] = []
        self.commits = 0

    @contextmanager
    def uow(self) -> Iterator[Any]:
        yield self

    def commit(self) -> None:
        self.commits += 1

    def dispatch(self, followups: Sequence[FollowUp]) -> None:
        self.sent.extend(followups)


def test_dead_letters_are_listed_and_replayed_on_a_fake_that_is_not_a_container() -> None:
    ports = FakePorts([_letter(1), _letter(2, replayed_at=PARKED)])
    assert not isinstance(ports, Container)

    assert [x.id for x in list_dead_letters(ports)] == [1, 2]
    assert [x.id for x in list_dead_letters(ports, include_replayed=False)] == [1]
    assert ports.dead_letters.asked == [True, False]

    [replayed] = replay(ports)  # every one not yet replayed
    assert replayed.id == 1 and replayed.replayed_at is not None
    assert ports.sent == [FollowUp("memory.extract", (["t1", "e1"],))]
    assert ports.commits == 1
    assert ports.dead_letters.letters[1].replayed_at == replayed.replayed_at
