"""``cuemem serve``: the API under uvicorn, on the embedded default (with its workers) or on the
configured services."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from shared.settings import Settings

if TYPE_CHECKING:
    from fastapi import FastAPI

    from workers.runtime.local import Runtime

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
    """The server cannot or must not start as asked (options that would expose the API unsafely,
    a port in use, a data dir another process serves); the message names the problem."""


def check_options(host: str, auth: bool) -> None:
    if not auth and not is_loopback(host):
        raise ServeRefused(
            f"--no-auth: only allowed on a loopback address (127.0.0.1, ::1, localhost), not {host!r}; "
            "create a key with `cuemem keys create` instead"
        )


def check_port(host: str, port: int) -> None:
    """Refuse, before anything starts, an address uvicorn could not listen on: each address
    ``host`` resolves to is bound once and let go, as uvicorn will bind it (``SO_REUSEADDR``; an
    IPv6 socket for IPv6 only, as asyncio's server does)."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeRefused(f"--host: cannot listen on {host!r}: {exc.strerror}") from None
    for family, kind, proto, _, address in dict.fromkeys(addresses):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise ServeRefused(
                        f"--port: {port} on {host} is already in use by another process; stop it, or "
                        "choose another --port"
                    ) from None
                raise ServeRefused(f"--host: cannot listen on {host} port {port}: {exc.strerror}") from None


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
    from workers.runtime.local import open_runtime
    from workers.runtime.serving import DataDirServed, serving

    check_options(host, auth)
    if workers < 1:
        raise ServeRefused(f"--workers: must be at least 1, got {workers}")
    embedded = not settings.broker_url
    with ExitStack() as stack:
        # Refused before any service starts or any line is printed: the data dir another process
        # serves (its workers own the embedded index), then the port another process listens on.
        if embedded:
            try:
                stack.enter_context(serving(settings.resolved_data_dir, "cuemem serve"))
            except DataDirServed as exc:
                raise ServeRefused(str(exc)) from None
        check_port(host, port)
        # On the embedded default nothing else consumes the queues: run the workers (and beat, for
        # the periodic sweeps) for as long as the server runs, as `cuemem worker` does.
        rt = stack.enter_context(
            open_runtime(settings, start_workers=embedded, beat=embedded, command="cuemem serve")
        )
        _announce_and_serve(
            rt, settings, host, port, auth=auth, echo=echo, log_json=log_json, workers=workers
        )


def _announce_and_serve(
    rt: Runtime,
    settings: Settings,
    host: str,
    port: int,
    *,
    auth: bool,
    echo: Callable[[str], None],
    log_json: bool,
    workers: int,
) -> None:
    """Print the banner and serve until stopped, on the started runtime."""
    import uvicorn

    from service.http import logs
    from service.http.app import create_app
    from workers.bootstrap import build_api_container
    from workers.runtime.embedded import settings_env

    embedded = not settings.broker_url
    logs.configure(rt.settings.log_level, as_json=log_json)
    if not auth:
        echo(
            f"WARNING: auth is OFF: every request acts as tenant {rt.settings.tenant_id!r} "
            f"(CUEMEM_TENANT_ID); listening on {host} only"
        )
    where = f"embedded default under {rt.settings.resolved_data_dir}" if embedded else "configured services"
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
    container = build_api_container(rt.settings)
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
    from workers.bootstrap import build_api_container

    settings = Settings()
    logs.configure(settings.log_level, as_json=os.environ.get(_LOG_JSON_ENV, "1") == "1")
    container = build_api_container(settings)
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
