"""The in-process memory backend of :class:`producers.agent_tools.MemoryTools` and ``cuemem mcp``.

It searches with :func:`service.operations.recall.recall_for` on a container and publishes through
a ``Publisher``, so it needs the workers' adapters: it lives here, in the service layer, and
``producers`` (which imports ``shared`` and ``infra`` only) keeps the two backends that need none
(:mod:`producers.backends`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from producers.backends import ForgetFn, PublisherLike, PublishingBackend
from service.operations.ports import RecallPorts
from service.operations.recall import recall_for


class LibraryBackend(PublishingBackend):
    """In-process: ``recall_for`` on a container, publishing through a ``Publisher``.

    ``forget`` is injected (``(user_id, memory_id) -> {"deleted", "hard"}``) because forgetting
    in-process needs a unit of work and the index, which the composition root owns; ``cuemem mcp``
    passes one (see ``service/mcp/serve.py``). Searches are read-only unless ``reinforce``: then
    the memories each search returns count as used.
    """

    def __init__(
        self,
        container: RecallPorts,
        publisher: PublisherLike,
        *,
        forget: ForgetFn | None = None,
        reinforce: bool = False,
    ):
        super().__init__(publisher, forget)
        self.container = container
        self.reinforce = reinforce

    def search(self, user_id: str, query: str, k: int, session_id: str | None) -> Mapping[str, Any]:
        return recall_for(
            self.container, user_id, query, k=k, session_id=session_id, reinforce=self.reinforce
        )
