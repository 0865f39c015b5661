"""``workers.tasks.base.each_concurrently``: a batch's units at once, outcomes in order, none lost."""

from __future__ import annotations

import contextvars
import threading

import pytest

from workers.tasks.base import each_concurrently

WHO = contextvars.ContextVar("who", default="nobody")


def test_two_at_a_time_really_overlap_and_outcomes_come_in_the_items_order() -> None:
    # Each pair of items meets at the barrier: run one after the other, the first would wait
    # alone until the timeout and break it.
    barrier = threading.Barrier(2, timeout=10)

    def work(item: int) -> int:
        barrier.wait()
        return item * 10

    outcomes = list(each_concurrently(work, [3, 1, 2, 4], at_once=2))

    assert outcomes == [(3, 30), (1, 10), (2, 20), (4, 40)]


def test_a_failure_is_an_outcome_and_every_other_item_still_runs() -> None:
    ran: list[str] = []
    lock = threading.Lock()

    def work(item: str) -> str:
        with lock:
            ran.append(item)
        if item == "u1":
            raise ValueError("u1 failed")
        return item.upper()

    outcomes = dict(each_concurrently(work, ["u1", "u10", "a", "a:b"], at_once=2))

    assert sorted(ran) == ["a", "a:b", "u1", "u10"]
    assert isinstance(outcomes["u1"], ValueError) and str(outcomes["u1"]) == "u1 failed"
    assert [outcomes[k] for k in ("u10", "a", "a:b")] == ["U10", "A", "A:B"]


@pytest.mark.parametrize("at_once", [1, 2])
def test_each_item_runs_in_a_copy_of_the_callers_context(at_once: int) -> None:
    WHO.set("the task")

    def work(item: str) -> str:
        seen = WHO.get()
        WHO.set(item)  # stays inside this item's copy
        return seen

    outcomes = dict(each_concurrently(work, ["u1", "u10"], at_once=at_once))

    assert outcomes == {"u1": "the task", "u10": "the task"}
    assert WHO.get() == "the task"


def test_one_at_a_time_runs_inline_in_order() -> None:
    threads: list[str] = []

    def work(item: int) -> int:
        threads.append(threading.current_thread().name)
        return item

    assert [o for _, o in each_concurrently(work, [2, 1], at_once=1)] == [2, 1]
    assert threads == [threading.current_thread().name] * 2


def test_an_interrupted_wait_cancels_what_has_not_started_and_does_not_wait_for_the_rest() -> None:
    """The soft time limit (or a shutdown) raised while waiting: items not started never run,
    every item not finished gets the interruption as its outcome, and the call returns without
    waiting for the ones still running on their threads."""
    ran: list[str] = []
    release = threading.Event()
    ended: list[str] = []

    def work(item: str) -> str:
        ran.append(item)
        if item == "u1":
            raise KeyboardInterrupt  # what a shutdown raises: not an Exception
        release.wait(timeout=30)  # the others are still running when the wait is interrupted
        ended.append(item)
        return item.upper()

    outcomes = dict(each_concurrently(work, ["u1", "u10", "a", "a:b"], at_once=2))

    assert ended == []  # returned while u10 (and perhaps "a", started after u1) still ran
    release.set()
    assert all(isinstance(outcomes[k], KeyboardInterrupt) for k in ("u1", "u10", "a", "a:b"))
    assert "a:b" not in ran  # queued behind two running items: cancelled, never started
