"""The long-running processes: `worker`, `beat`, `serve` (HTTP API) and `mcp` (MCP over stdio)."""

from __future__ import annotations

import os
import sys
import time
from contextlib import ExitStack
from typing import Annotated

import typer

from cli.common import CliError, DataDir, check_user, settings_for, setup_logging
from shared.settings import Settings
from workers.runtime.local import open_runtime
from workers.runtime.processes import check_alive, index_owner_command, worker_command, worker_queues
from workers.runtime.serving import DataDirServed, serving


def worker(
    queues: Annotated[str | None, typer.Option("--queues", "-Q", help="Comma-separated queues")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", "-c", min=1)] = None,
    index_owner: Annotated[
        bool,
        typer.Option(
            "--index-owner",
            help="Consume only the search and index queues (searches first) in one process (embedded index)",
        ),
    ] = False,
    data_dir: DataDir = None,
) -> None:
    """Run workers in the foreground. On the embedded default this starts the services too."""
    setup_logging(True)
    settings = settings_for(data_dir)
    if settings.broker_url:
        if index_owner:
            cmd = index_owner_command(settings)
        else:
            chosen = queues.split(",") if queues else worker_queues(settings)
            cmd = worker_command(
                "cuemem-worker",
                chosen,
                concurrency=concurrency or settings.worker_concurrency,
                pool="prefork",
                loglevel=settings.log_level,
            )
        os.execvp(cmd[0], cmd)
    with ExitStack() as stack:
        # The data dir's workers own its embedded index: a second set beside `cuemem serve` or
        # another `cuemem worker` could never open it. Refused before anything starts.
        try:
            stack.enter_context(serving(settings.resolved_data_dir, "cuemem worker"))
        except DataDirServed as exc:
            raise CliError(str(exc)) from None
        rt = stack.enter_context(
            open_runtime(settings, start_workers=True, beat=True, command="cuemem worker")
        )
        typer.echo(
            f"embedded workers and beat running (data dir {rt.settings.resolved_data_dir}); "
            "Ctrl-C stops them",
            err=True,
        )
        try:
            while True:
                check_alive(rt.workers)
                time.sleep(1)
        except KeyboardInterrupt:
            typer.echo("stopping", err=True)


def beat(data_dir: DataDir = None) -> None:
    """Run the periodic scheduler. Run exactly one per deployment."""
    settings = settings_for(data_dir)
    if not settings.broker_url:
        raise CliError(
            "beat needs CUEMEM_BROKER_URL (on the embedded default, `cuemem worker` runs beat itself)"
        )
    _refuse_second_beat(settings)
    schedule = settings.resolved_data_dir / "celerybeat-schedule"
    schedule.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.celery_app",
        "beat",
        "-s",
        str(schedule),
        "-l",
        settings.log_level,
    ]
    os.execvp(cmd[0], cmd)


def _refuse_second_beat(settings: Settings) -> None:
    """Say it plainly before exec: the scheduler itself refuses too (workers/redis/beat_lock.py)."""
    from infra.broker import open_redis
    from workers.redis.beat_lock import BeatLock

    url = settings.effective_redis_url
    if url is None:
        return
    client = open_redis(url)
    try:
        holder = BeatLock(client).holder()
    finally:
        client.close()
    if holder is not None:
        raise CliError(
            f"another beat is running (it holds the beat lock: {holder}); exactly one beat may run per "
            "deployment"
        )


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to bind")] = 8080,
    no_auth: Annotated[
        bool,
        typer.Option(
            "--no-auth", help="Serve CUEMEM_TENANT_ID without API keys (only on a loopback address)"
        ),
    ] = False,
    log_format: Annotated[str, typer.Option("--log-format", help="json or text")] = "json",
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="API processes on the one port (recall is CPU-bound: one per core)",
        ),
    ] = 1,
    data_dir: DataDir = None,
) -> None:
    """Run the HTTP API (OpenAPI at /docs). On the embedded default it runs the workers too."""
    from service.http.serve import ServeRefused, check_options
    from service.http.serve import serve as run_server

    if log_format not in ("json", "text"):
        raise CliError(f"--log-format: {log_format!r} is not one of json, text")
    try:
        check_options(host, not no_auth)  # before any service starts
        run_server(
            settings_for(data_dir),
            host,
            port,
            auth=not no_auth,
            echo=lambda line: typer.echo(line, err=True),
            log_json=log_format == "json",
            workers=workers,
        )
    except ServeRefused as exc:
        raise CliError(str(exc)) from None


def mcp_cmd(
    user: Annotated[str, typer.Option("--user", help="Whose memory the tools act on (required)")],
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="The user's tenant, library only [default: CUEMEM_TENANT_ID]"),
    ] = None,
    api_url: Annotated[
        str | None,
        typer.Option(
            "--api-url",
            envvar="CUEMEM_API_URL",
            help="Use the HTTP API there (key from CUEMEM_API_KEY) instead of the library",
        ),
    ] = None,
    session: Annotated[
        str, typer.Option("--session", help="The conversation remembered turns belong to")
    ] = "mcp",
    reinforce: Annotated[
        bool,
        typer.Option(
            "--reinforce", help="Count the memories search_memory returns as used (access count + 1)"
        ),
    ] = False,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Serve search_memory, remember and forget for one user as an MCP server over stdio."""
    setup_logging(verbose)
    check_user(user)
    from shared.events import SAFE_ID_TEXT, is_safe_id

    for option, value in (("--tenant", tenant), ("--session", session)):
        if value is not None and not is_safe_id(value):
            raise CliError(f"{option}: {value!r} must be non-empty and use only {SAFE_ID_TEXT}")
    if api_url and tenant is not None:
        raise CliError("--tenant: with --api-url the tenant is the API key's (CUEMEM_API_KEY)")
    try:
        from service.mcp import serve as mcp_serve
    except ImportError as exc:  # the SDK is the optional `mcp` extra
        raise CliError(f"the MCP server needs the mcp package: pip install 'cuemem[mcp]' ({exc})") from None
    if api_url:
        mcp_serve.serve_api(api_url, user, session, reinforce=reinforce)
        return
    settings = settings_for(data_dir)
    if tenant is not None:
        settings = settings.model_copy(update={"tenant_id": tenant})
    mcp_serve.serve_library(settings, user, session, reinforce=reinforce)
