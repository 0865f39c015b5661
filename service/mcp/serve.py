"""`cuemem mcp`: build the backend for one tenant/user and serve the MCP tools over stdio.

Two backends (``producers/backends.py``, ``service/operations/library_backend.py``):

- the HTTP API (``--api-url`` or ``CUEMEM_API_URL``, key from ``CUEMEM_API_KEY``): the tenant is
  the key's; nothing runs here but the client;
- the library (otherwise): the embedded default under ``--data-dir`` (with its own worker
  processes, so a remembered turn becomes a memory while the server runs), or the configured
  ``CUEMEM_*`` services (whose workers do that).

Either way ``search_memory`` is read-only unless the server is started with ``--reinforce``
(``reinforce``): then the memories each search returns count as used.

The library backend runs on ``workers.bootstrap.build_api_container``, as the HTTP API does: a
long-running process beside the workers must never take the embedded vector index from the index
worker, so its searches go through that worker and its index writes become tasks for it.

Stdout is the protocol's wire: anything else printed there would corrupt it, so while the
embedded services and the workers start, file descriptor 1 points at stderr.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

from producers.agent_tools import MemoryTools
from producers.backends import ForgetFn, MemoryBackend
from service.mcp.server import build_server  # the optional `mcp` extra: fails here, named
from service.operations import curation as curation_api
from service.operations.library_backend import LibraryBackend
from shared.settings import Settings
from workers.bootstrap import Container, build_api_container

log = logging.getLogger(__name__)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Point fd 1 at stderr for the duration (child processes started meanwhile inherit that)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def library_forget(container: Container, tenant_id: str) -> ForgetFn:
    """The API's soft delete (``DELETE .../memories/{id}``), in-process: status ``forgotten`` with
    a history entry, then the user's index synced (by the index worker on the embedded index)."""

    def forget(user_id: str, memory_id: str) -> Mapping[str, Any]:
        deleted = curation_api.forget(container, tenant_id, user_id, memory_id)
        log.info("mcp: forgot %s of %s/%s", memory_id, tenant_id, user_id)
        return {"deleted": deleted, "hard": False}

    return forget


def serve(tools: MemoryTools) -> None:
    """Serve until the client closes stdin."""
    build_server(tools).run("stdio")


def serve_api(api_url: str, user_id: str, session_id: str, *, reinforce: bool = False) -> None:
    from producers.backends import ApiBackend
    from producers.client import CuememClient

    with CuememClient(api_url) as client:
        backend: MemoryBackend = ApiBackend(client, reinforce=reinforce)
        serve(MemoryTools.over(backend, user_id, session_id))


def serve_library(settings: Settings, user_id: str, session_id: str, *, reinforce: bool = False) -> None:
    from producers.publisher import Publisher
    from workers.runtime.local import open_runtime

    # On the embedded default no other worker exists: start ours, or a remembered turn would stay
    # in working memory only. With CUEMEM_BROKER_URL set, the deployment's workers process it.
    start_workers = not settings.broker_url
    with ExitStack() as stack:
        with stdout_to_stderr():
            rt = stack.enter_context(
                open_runtime(settings, start_workers=start_workers, command="cuemem mcp")
            )
            publisher = stack.enter_context(Publisher.from_settings(rt.settings))
            container = build_api_container(rt.settings)
            stack.callback(container.close)
        tenant_id = rt.settings.tenant_id
        backend = LibraryBackend(
            container, publisher, forget=library_forget(container, tenant_id), reinforce=reinforce
        )
        print(
            f"cuemem mcp: serving user {user_id!r} of tenant {tenant_id!r} from the library "
            f"(data dir {rt.settings.resolved_data_dir}) over stdio",
            file=sys.stderr,
            flush=True,
        )
        serve(MemoryTools.over(backend, user_id, session_id))
