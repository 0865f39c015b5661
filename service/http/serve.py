"""``cuemem serve``: the API under uvicorn, on the embedded default (with its workers) or on the
configured services."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable

from shared.settings import Settings

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


def serve(
    settings: Settings,
    host: str,
    port: int,
    *,
    auth: bool,
    echo: Callable[[str], None],
    log_json: bool = True,
) -> None:
    import uvicorn

    from service.http import logs
    from service.http.app import create_app
    from service.operations.curation import api_container
    from workers.runtime.local import open_runtime

    check_options(host, auth)
    embedded = not settings.broker_url
    # On the embedded default nothing else consumes the queues: run the workers (and beat, for
    # the periodic sweeps) for as long as the server runs, as `cuemem worker` does.
    with open_runtime(settings, start_workers=embedded, beat=embedded) as rt:
        logs.configure(rt.settings.log_level, as_json=log_json)
        container = api_container(rt.settings)
        app = create_app(container, auth=auth)
        if not auth:
            echo(
                f"WARNING: auth is OFF: every request acts as tenant {rt.settings.tenant_id!r} "
                f"(CUEMEM_TENANT_ID); listening on {host} only"
            )
        where = (
            f"embedded default under {rt.settings.resolved_data_dir}" if embedded else "configured services"
        )
        echo(f"cuemem API on http://{host}:{port} ({where}); docs at /docs, inspector at /inspector/")
        try:
            uvicorn.run(app, host=host, port=port, log_config=None, access_log=False)
        finally:
            app.state.close()
            container.close()
