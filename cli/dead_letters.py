"""`cuemem dead-letters`: what the pipeline gave up on (list, replay)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from cli.common import CliError, DataDir, echo_json, settings_for, setup_logging
from service.operations.waiting import wait_for
from workers.runtime.local import open_runtime

dead_letters_app = typer.Typer(
    help="Messages the pipeline gave up on, with the reason: list them, replay them.", no_args_is_help=True
)


@dead_letters_app.command("list")
def dead_letters_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (with the stored arguments)")] = False,
    pending: Annotated[bool, typer.Option("--pending", help="Only those not replayed yet")] = False,
    data_dir: DataDir = None,
) -> None:
    """List dead letters, oldest first: id, task, event, reason, when parked and when replayed."""
    from service.operations.dead_letters import list_dead_letters

    setup_logging(False)
    with open_runtime(settings_for(data_dir)) as rt:
        letters = list_dead_letters(rt.container, include_replayed=not pending)
    if as_json:
        echo_json([d.to_public() for d in letters])
        return
    for d in letters:
        replayed = f"replayed {d.replayed_at.isoformat()}" if d.replayed_at else "not replayed"
        typer.echo(f"{d.id:>6}  {d.task_name:<16} {d.event_id or '-'}  {replayed}  {d.reason[:200]}")


@dead_letters_app.command("replay")
def dead_letters_replay(
    ids: Annotated[list[int] | None, typer.Argument(help="Dead letter ids", metavar="ID...")] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Every dead letter not replayed yet")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait on the embedded default")] = 600.0,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Send dead letters again through the broker (a new task id each) and mark them replayed.

    Handlers are idempotent, so replaying twice changes nothing more. On the embedded default the
    command runs its own workers and waits for the replayed events, as `ingest` does."""
    from service.operations.dead_letters import NotReplayable, UnknownDeadLetter, replay

    setup_logging(verbose)
    if bool(ids) == replay_all:
        raise CliError("ID: give dead letter ids or --all (not both)")
    settings = settings_for(data_dir)
    embedded_broker = not settings.broker_url
    with open_runtime(settings, start_workers=embedded_broker, command="cuemem dead-letters replay") as rt:
        try:
            done = replay(rt.container, None if replay_all else ids)
        except UnknownDeadLetter as exc:
            raise CliError(f"ID: {exc}") from None
        except NotReplayable as exc:
            raise CliError(str(exc)) from None
        summary: dict[str, Any] = {"replayed": [d.id for d in done]}
        events = {d.ref: d.event_id for d in done if d.ref and d.event_id}
        if embedded_broker and events:
            state = wait_for(rt, sorted(events), timeout, show=sys.stderr.isatty() or verbose)
            summary["states"] = {event_id: state.states[ref] for ref, event_id in sorted(events.items())}
    typer.echo(json.dumps(summary))
