"""One bad row costs its own unit, never the sweep: skip it, record it, go on with the rest.

A sweep (the index repair, consolidation, the stalled sweep) walks every tenant's rows one unit
(one user, one event) at a time. A row no code expects (a value written by SQL by hand, or stored
before a bound existed) used to fail the whole run on every run, for every tenant after it. Here
such a unit is rolled back and skipped, with a log line naming it and a dead letter an operator
lists (``cuemem dead-letters list``) holding the sweep, the ids and the error. An outage of the
store (``UnitOfWork.outages``) or of the index is not a bad row: it ends the run, whose next run
(or Celery's retry) goes on once the store is back.

Beside the storage port rather than in ``shared/lifecycle/``: the index repair
(``shared.indexing.reconcile``) uses it too, and indexing sits below lifecycle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from shared.ports import IndexUnavailable
from shared.storage import DeadLetter, UnitOfWork

log = logging.getLogger(__name__)

T = TypeVar("T")
# Not a row's fault: the index or a connection is down (every unit would fail the same way).
_OUTAGES: tuple[type[BaseException], ...] = (IndexUnavailable, ConnectionError, TimeoutError)


def skipping_bad_rows(
    uow_factory: Callable[[], UnitOfWork],
    sweep: str,
    args: list[str],
    work: Callable[[UnitOfWork], T],
    *,
    event_id: str | None = None,
) -> T | None:
    """Run ``work`` in its own unit of work and commit; when it fails for its rows (anything but an
    outage), roll back, record the skip (``sweep``, ``args``: the unit's ids) and return None."""
    with uow_factory() as uow:
        try:
            result = work(uow)
            uow.commit()
            return result
        except _OUTAGES + uow.outages:
            raise
        except Exception as exc:
            # Leaving the block rolls the unit back: nothing of the bad unit is written.
            reason = f"skipped by {sweep}: {type(exc).__name__}: {exc}"[:4000]
    log.error("%s skipped %s (event %s), a bad row: %s", sweep, args, event_id, reason)
    with uow_factory() as uow:
        uow.dead_letters.add(DeadLetter(sweep, None, event_id, list(args), reason, 0))
        uow.commit()
    return None
