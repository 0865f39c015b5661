"""Operator commands on the store and the indexes: `reindex`, `maintain`, `restore`, `migrate`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from cli.common import CliError, DataDir, check_user, echo_json, parse_now, settings_for, setup_logging
from service.operations.recall import check_model_cached
from workers.runtime.local import open_runtime


def reindex(
    data_dir: DataDir = None, verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False
) -> None:
    """Rebuild the vector indexes (memories, conversation log) from Postgres, re-embedding vectors
    of any other model."""
    setup_logging(verbose)
    from service.operations.index_followups import reindex as rebuild

    with open_runtime(settings_for(data_dir)) as rt:
        stats = rebuild(rt.container)
    typer.echo(json.dumps(stats))


def maintain(
    now: Annotated[
        str | None, typer.Option("--now", help="ISO 8601 time to run at (reproducible runs)")
    ] = None,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Run the lifecycle once: decay, task TTL, archive, consolidation, then (where this process
    may open the index) index sync, score push, reconciliation and optimize. Prints counts as JSON."""
    from service.operations.index_followups import maintain_index
    from shared.lifecycle.sweeps import maintain_store

    setup_logging(verbose)
    at = parse_now(now)
    with open_runtime(settings_for(data_dir)) as rt:
        c = rt.container
        check_model_cached(c)
        store, touched = maintain_store(c.uow, c.embedder, at, c.lifecycle)
        index, optimized = maintain_index(c, touched)
    summary = {"now": at.isoformat(), **store, **index, "index_optimized": optimized}
    typer.echo(json.dumps(summary))


def restore(
    memory_id: Annotated[
        str,
        typer.Argument(
            help="The id of an archived, superseded, expired or forgotten memory", metavar="MEMORY_ID"
        ),
    ],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The memory's tenant [default: CUEMEM_TENANT_ID]")
    ] = None,
    now: Annotated[str | None, typer.Option("--now", help="ISO 8601 time of the restore")] = None,
    data_dir: DataDir = None,
) -> None:
    """Bring a memory back, as the API's restore does: active again, re-indexed, with a history entry."""
    from service.operations.curation import restore as restore_memory
    from service.operations.index_followups import INDEXED
    from shared.lifecycle.curation import MemoryNotFound, Refused

    setup_logging(False)
    check_user(user)
    at = parse_now(now)
    with open_runtime(settings_for(data_dir)) as rt:
        tenant_id = tenant or rt.settings.tenant_id
        try:
            memory, outcome = restore_memory(rt.container, tenant_id, user, memory_id, at)
        except (MemoryNotFound, Refused) as exc:
            raise CliError(f"MEMORY_ID: {exc}") from None
    # The command's JSON says true when indexed here (a stable contract), the API's word otherwise.
    reindexed: bool | str = True if outcome == INDEXED else outcome
    typer.echo(json.dumps({"restored": memory.id, "status": memory.status.value, "indexed": reindexed}))


def delete_user(
    user: Annotated[str, typer.Option("--user", help="The user to delete everywhere (required)")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The user's tenant [default: CUEMEM_TENANT_ID]")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm: this cannot be undone")] = False,
    data_dir: DataDir = None,
) -> None:
    """Delete a user everywhere (a privacy request) and verify it: prints each store's count of
    deleted, left (0) and everyone else's items before and after; exits 1 unless verified."""
    from service.operations.erasure import erase_user
    from shared.erasure import ErasureFailed

    setup_logging(False)
    check_user(user)
    if not yes:
        raise CliError("--yes: required; deleting a user everywhere cannot be undone")
    with open_runtime(settings_for(data_dir)) as rt:
        try:
            report = erase_user(rt.container, tenant or rt.settings.tenant_id, user)
        except ErasureFailed as exc:
            raise CliError(f"{exc}; nothing of it was committed: try again") from None
    echo_json(report.to_public())
    if not report.verified:
        raise typer.Exit(1)


def export(
    user: Annotated[
        str | None, typer.Option("--user", help="Export this user (else the whole tenant)")
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The tenant [default: CUEMEM_TENANT_ID]")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file [default: standard output]")
    ] = None,
    data_dir: DataDir = None,
) -> None:
    """Export a user (--user) or a whole tenant as JSON Lines, format cuemem-export version 1:
    events, memories with status, history, sources and scores (README, "Export and import")."""
    from service.operations.transfer import export_lines

    setup_logging(False)
    if user is not None:
        check_user(user)
    with open_runtime(settings_for(data_dir)) as rt:
        lines = export_lines(rt.container, tenant or rt.settings.tenant_id, user)
        if out is None:
            for line in lines:
                sys.stdout.write(line + "\n")
        else:
            with out.open("w", encoding="utf-8") as f:
                for line in lines:
                    f.write(line + "\n")


def import_(
    file: Annotated[Path, typer.Argument(help="A cuemem-export file ('-': standard input)", metavar="FILE")],
    data_dir: DataDir = None,
) -> None:
    """Import an export: checked line by line as publish checks (the first bad line refuses the
    whole file, nothing written), idempotent (rows present already stay; memory ids made this
    tenant's own), seqs kept, no LLM call, re-embedded only when the file's embedding model is not
    this deployment's."""
    from service.operations.transfer import import_file
    from shared.transfer import ImportRefused

    setup_logging(False)
    if str(file) != "-" and not file.is_file():
        raise CliError(f"FILE: {file} is not a file")
    with open_runtime(settings_for(data_dir)) as rt:
        try:
            if str(file) == "-":
                report = import_file(rt.container, sys.stdin.buffer)
            else:
                with file.open("rb") as f:
                    report = import_file(rt.container, f)
        except ImportRefused as exc:
            raise CliError(f"FILE: {exc}; nothing was imported") from None
    echo_json(report)


def migrate(data_dir: DataDir = None) -> None:
    """Bring the Postgres schema to the latest version, and Redis's keys to their current form
    (also done by every embedded start)."""
    setup_logging(True)
    settings = settings_for(data_dir)
    if settings.database_url:
        from sqlalchemy import create_engine

        from workers.db.migrate import upgrade, upgrade_redis

        engine = create_engine(settings.database_url)
        upgrade(engine)
        engine.dispose()
        upgrade_redis(settings.effective_redis_url)
    else:
        with open_runtime(settings):
            pass
    typer.echo("schema up to date")
