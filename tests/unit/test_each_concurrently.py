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


def _join_unit_threads() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("unit"):
            thread.join(timeout=30)


def test_an_interrupted_wait_cancels_what_has_not_started_and_hands_what_runs_to_late() -> None:
    """A shutdown (or the soft time limit) raised while waiting: the items not started never run
    and yield the interruption; an item still running is not yielded and not waited for: ``late``
    gets its outcome when it ends."""
    ran: list[str] = []
    release = threading.Event()
    ended: list[str] = []
    late: dict[str, object] = {}

    def work(item: str) -> str:
        ran.append(item)
        if item == "u1":
            raise KeyboardInterrupt  # what a shutdown raises: not an Exception
        release.wait(timeout=30)  # still running when the wait is interrupted
        ended.append(item)
        return item.upper()

    outcomes = dict(each_concurrently(work, ["u1", "u10", "a", "a:b"], at_once=2, late=late.__setitem__))

    assert ended == []  # returned while u10 (and "a", if it started after u1) still ran
    release.set()
    _join_unit_threads()
    assert isinstance(outcomes["u1"], KeyboardInterrupt) and isinstance(outcomes["a:b"], KeyboardInterrupt)
    assert "a:b" not in ran  # queued behind two running items: cancelled, never started
    assert late["u10"] == "U10" and "u10" not in outcomes
    # "a" started after u1 ended (then late gives it) or was cancelled with "a:b".
    assert late.get("a") == "A" if "a" in ran else isinstance(outcomes["a"], KeyboardInterrupt)


def test_inline_the_soft_time_limit_stops_the_item_and_the_ones_after_it() -> None:
    """One at a time, Celery's soft limit is raised inside the running item: it and the items
    after it yield it, and those never run (it is no item's own failure)."""
    from celery.exceptions import SoftTimeLimitExceeded

    ran: list[str] = []

    def work(item: str) -> str:
        ran.append(item)
        if item == "u10":
            raise SoftTimeLimitExceeded()
        return item.upper()

    outcomes = list(each_concurrently(work, ["u1", "u10", "a", "a:b"], at_once=1))

    assert ran == ["u1", "u10"]
    assert outcomes[0] == ("u1", "U1")
    assert [k for k, _ in outcomes[1:]] == ["u10", "a", "a:b"]
    assert all(isinstance(o, SoftTimeLimitExceeded) for _, o in outcomes[1:])
