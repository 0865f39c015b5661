"""``cuemem serve``: the API under uvicorn, on the embedded default (with its workers) or on the
configured services."""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from shared.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


class ServeRefused(ValueError):
    """The options would expose the API unsafely; the message names the option."""


def check_options(host: str, auth: bool) -> None:
    if not auth and not is_loopback(host):
        raise ServeRefused(
            f"--no-auth: only allowed on a loopback address (127.0.0.1, ::1, localhost), not {host!r}; "
            "create a key with `cuemem keys create` instead"
        )


def inspector_hint(host: str, port: int, *, auth: bool, tenant_id: str, data_dir: str | None) -> list[str]:
    """The lines `cuemem serve` prints about the inspector: its URL and, with auth on, how to get
    a key for it (with ``data_dir`` when the state is not in the default place) or how to run
    without keys on this machine."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]") else host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    url = f"http://{shown}:{port}/inspector/"
    if not auth:
        return [f"Inspector: {url} (no key needed: auth is off)"]
    where = f" --data-dir {data_dir}" if data_dir else ""
    return [
        f"Inspector: {url}",
        f"  It asks for an API key of tenant {tenant_id!r}. Create one (printed once) with:",
        f"    cuemem keys create --tenant {tenant_id} --name inspector{where}",
        "  or, on this machine only, serve without keys: cuemem serve --no-auth",
    ]


# What the parent of `cuemem serve --workers N` tells its API processes beyond the settings.
_AUTH_ENV = "CUEMEM_SERVE_AUTH"
_LOG_JSON_ENV = "CUEMEM_SERVE_LOG_JSON"


def serve(
    settings: Settings,
    host: str,
    port: int,
    *,
    auth: bool,
    echo: Callable[[str], None],
    log_json: bool = True,
    workers: int = 1,
) -> None:
    """The API under uvicorn. ``workers`` > 1 runs that many API processes on the one socket
    (uvicorn's supervisor): recall is CPU-bound Python, and one process serves one recall at a
    time (the GIL). Each process builds its own container from the settings this one exports
    (``settings_env``: on the embedded default, the URLs of the services started here); on the
    embedded index every process searches through the index worker, with a Qdrant server each
    searches it directly."""
    import uvicorn

    from service.http import logs
    from service.http.app import create_app
    from service.operations.curation import api_container
    from workers.runtime.embedded import settings_env
    from workers.runtime.local import open_runtime

    check_options(host, auth)
    if workers < 1:
        raise ServeRefused(f"--workers: must be at least 1, got {workers}")
    embedded = not settings.broker_url
    # On the embedded default nothing else consumes the queues: run the workers (and beat, for
    # the periodic sweeps) for as long as the server runs, as `cuemem worker` does.
    with open_runtime(settings, start_workers=embedded, beat=embedded) as rt:
        logs.configure(rt.settings.log_level, as_json=log_json)
        if not auth:
            echo(
                f"WARNING: auth is OFF: every request acts as tenant {rt.settings.tenant_id!r} "
                f"(CUEMEM_TENANT_ID); listening on {host} only"
            )
        where = (
            f"embedded default under {rt.settings.resolved_data_dir}" if embedded else "configured services"
        )
        processes = f", {workers} API processes" if workers > 1 else ""
        echo(f"cuemem API on http://{host}:{port} ({where}{processes}); docs at /docs")
        default_dir = Settings.model_fields["data_dir"].default
        for line in inspector_hint(
            host,
            port,
            auth=auth,
            tenant_id=rt.settings.tenant_id,
            data_dir=str(settings.data_dir) if embedded and settings.data_dir != default_dir else None,
        ):
            echo(line)
        if workers > 1:
            # The API processes are spawned: they read everything from the environment.
            os.environ.update(settings_env(rt.settings))
            os.environ[_AUTH_ENV] = "1" if auth else "0"
            os.environ[_LOG_JSON_ENV] = "1" if log_json else "0"
            uvicorn.run(
                f"{__name__}:api_process_app",
                factory=True,
                workers=workers,
                host=host,
                port=port,
                log_config=None,
                access_log=False,
            )
            return
        container = api_container(rt.settings)
        app = create_app(container, auth=auth)
        try:
            uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
        finally:
            app.state.close()
            container.close()


def api_process_app() -> FastAPI:
    """One API process of `cuemem serve --workers N` (uvicorn calls this in each): the settings
    and options its parent exported, its own container, closed when the process stops."""
    from service.http import logs
    from service.http.app import create_app
    from service.operations.curation import api_container

    settings = Settings()
    logs.configure(settings.log_level, as_json=os.environ.get(_LOG_JSON_ENV, "1") == "1")
    container = api_container(settings)
    app = create_app(container, auth=os.environ.get(_AUTH_ENV, "1") == "1")

    opened = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[Any]:
        try:
            async with opened(served) as state:
                yield state
        finally:  # the process is stopping: its publisher and its database pool go with it
            app.state.close()
            container.close()

    app.router.lifespan_context = lifespan
    log.info("API process %d ready", os.getpid())
    return app
