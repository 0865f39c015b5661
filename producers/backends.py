"""Where the agent tools and the MCP server read and write memory: the library or the HTTP API.

A backend is three calls for one tenant (the library's configured tenant, or the API key's):

- ``search(user_id, query, k, session_id)`` -> the recall result (``{"stage", "items", ...}``)
- ``remember(user_id, session_id, content, metadata)`` -> what was published (``event_id``, ``seq``)
- ``forget(user_id, memory_id)`` -> ``{"deleted": [ids], "hard": False}`` (a soft delete)

Two implementations here:

- :class:`ApiBackend` over :class:`producers.client.CuememClient` (an app in another process or
  on another machine; nothing but ``httpx`` needed);
- :class:`CallableBackend`, the original shape of :class:`producers.agent_tools.MemoryTools`: a
  recall callable and a publisher the app wires itself.

The in-process one, ``LibraryBackend`` over a container, is a use case and lives with them
(:mod:`service.operations.library_backend`): ``producers`` imports ``shared`` and ``infra`` only
(an app that only publishes, or only uses the API, must not pull in Celery workers, SQLAlchemy or
the embedder), and ``lint-imports`` holds it to that.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from producers.client import CuememClient

RecallFn = Callable[[str, int, str | None], Mapping[str, Any]]
# (user_id, memory_id) -> {"deleted": [...], "hard": False}
ForgetFn = Callable[[str, str], Mapping[str, Any]]


class PublishedLike(Protocol):
    @property
    def event_id(self) -> str: ...

    @property
    def seq(self) -> int: ...


class PublisherLike(Protocol):
    """What ``remember`` needs of :class:`producers.publisher.Publisher` (or ``CuememClient``)."""

    def publish(
        self,
        *,
        user_id: str,
        session_id: str,
        role: str,
        content: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> PublishedLike: ...


class ForgetUnsupported(NotImplementedError):
    """The backend was built without a way to forget."""


class MemoryBackend(Protocol):
    def search(self, user_id: str, query: str, k: int, session_id: str | None) -> Mapping[str, Any]: ...

    def remember(
        self, user_id: str, session_id: str, content: str, metadata: Mapping[str, Any]
    ) -> PublishedLike: ...

    def forget(self, user_id: str, memory_id: str) -> Mapping[str, Any]: ...


def publish_remembered(
    publisher: PublisherLike, user_id: str, session_id: str, content: str, metadata: Mapping[str, Any]
) -> PublishedLike:
    """Publish what a ``remember`` call was given, the same way for every backend."""
    # A remembered statement is the user's own turn: it goes through the same pipeline as any
    # other (sequenced, visible in working memory at once), flagged so extraction keeps it.
    return publisher.publish(
        user_id=user_id, session_id=session_id, role="user", content=content, metadata=dict(metadata)
    )


class PublishingBackend:
    """What the backends over a publisher share: ``remember`` publishes, ``forget`` calls the
    injected callable (or says it has none). Subclasses add ``search``."""

    def __init__(self, publisher: PublisherLike, forget: ForgetFn | None = None):
        self.publisher = publisher
        self._forget = forget

    def remember(
        self, user_id: str, session_id: str, content: str, metadata: Mapping[str, Any]
    ) -> PublishedLike:
        return publish_remembered(self.publisher, user_id, session_id, content, metadata)

    def forget(self, user_id: str, memory_id: str) -> Mapping[str, Any]:
        if self._forget is None:
            raise ForgetUnsupported("forget is not available: this backend was built without it")
        return self._forget(user_id, memory_id)


class CallableBackend(PublishingBackend):
    """A recall callable and a publisher (and optionally a forget callable), wired by the app."""

    def __init__(self, recall: RecallFn, publisher: PublisherLike, forget: ForgetFn | None = None):
        super().__init__(publisher, forget)
        self.recall = recall

    def search(self, user_id: str, query: str, k: int, session_id: str | None) -> Mapping[str, Any]:
        # The callable is already bound to its user (the original MemoryTools contract).
        return self.recall(query, k, session_id)


class ApiBackend:
    """The HTTP API through :class:`producers.client.CuememClient`; the tenant is the key's.
    Searches are read-only unless ``reinforce``: then the memories each returns count as used."""

    def __init__(self, client: CuememClient, *, reinforce: bool = False):
        self.client = client
        self.reinforce = reinforce

    def search(self, user_id: str, query: str, k: int, session_id: str | None) -> Mapping[str, Any]:
        return self.client.recall(user_id, query, k=k, session_id=session_id, reinforce=self.reinforce)

    def remember(
        self, user_id: str, session_id: str, content: str, metadata: Mapping[str, Any]
    ) -> PublishedLike:
        return publish_remembered(self.client, user_id, session_id, content, metadata)

    def forget(self, user_id: str, memory_id: str) -> Mapping[str, Any]:
        # Soft only: an agent may let a memory go, a privacy erasure is an operator's call.
        return self.client.forget(user_id, memory_id, hard=False)
