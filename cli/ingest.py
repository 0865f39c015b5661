"""`cuemem ingest`: publish a JSONL file of turns, and on the embedded default process them before exit."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from tqdm import tqdm

from cli.common import CliError, DataDir, settings_for, setup_logging
from producers.jsonl import count_lines, read_jsonl
from producers.publisher import BATCH_SIZE, Publisher
from service.operations.waiting import WaitTimedOut, throughput, wait_for, work_seconds
from shared.ingest.progress import Progress
from workers.runtime.local import open_runtime

# `--wait` ran out of time (2 is a usage error, 1 a rejected or failed line).
EXIT_TIMED_OUT = 3
FINAL_COUNTS = ("done", "duplicate", "rejected", "failed")


def _publish_lines(
    publisher: Publisher, lines: list[tuple[int, dict[str, Any]]], *, show: bool
) -> tuple[dict[str, int], list[str]]:
    """Publish parsed lines in batches (one message per ``BATCH_SIZE`` turns: the workers record,
    embed and index a batch in one go); returns the pipeline key (tenant and event id) -> line
    number, and the per-line errors."""
    published: dict[str, int] = {}
    errors: list[str] = []
    with tqdm(total=len(lines), desc="publishing", unit="turn", disable=not show, file=sys.stderr) as bar:
        for start in range(0, len(lines), BATCH_SIZE):
            chunk = lines[start : start + BATCH_SIZE]
            result = publisher.publish_batch([data for _, data in chunk])
            bad = {i for i, _ in result.errors}
            kept = [number for i, (number, _) in enumerate(chunk) if i not in bad]
            published.update({p.ref: number for p, number in zip(result.published, kept, strict=True)})
            errors += [f"line {chunk[i][0]}: {exc}" for i, exc in result.errors]
            bar.update(len(chunk))
    return published, errors


def ingest(
    file: Annotated[Path, typer.Argument(help="JSONL file: one turn per line", metavar="FILE")],
    wait: Annotated[
        bool, typer.Option("--wait", help="Return only once every event is fully processed")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait with --wait")] = 3600.0,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Publish a JSONL file of turns; invalid lines are reported as `line N: <reason>` and skipped."""
    setup_logging(verbose)
    if not file.is_file():
        raise CliError(f"FILE: {file} does not exist or is not a file")
    settings = settings_for(data_dir)
    embedded_broker = not settings.broker_url
    show = sys.stderr.isatty() or verbose
    invalid: list[str] = []
    lines: list[tuple[int, dict[str, Any]]] = []
    for line in tqdm(
        read_jsonl(file),
        total=count_lines(file),
        desc="reading",
        unit="line",
        disable=not show,
        file=sys.stderr,
    ):
        if line.error is not None or line.data is None:
            invalid.append(f"line {line.number}: {line.error}")
        else:
            lines.append((line.number, line.data))
    if not lines:
        for message in invalid:
            typer.echo(message, err=True)
        typer.echo(json.dumps({"published": 0, "invalid": len(invalid)}))
        raise typer.Exit(1 if invalid else 0)
    with open_runtime(settings, start_workers=embedded_broker, command="cuemem ingest") as rt:
        # From the first publish: on the embedded default the workers start on the turns at once.
        before, started = work_seconds(rt.settings), time.perf_counter()
        with Publisher.from_settings(rt.settings) as publisher:
            published, errors = _publish_lines(publisher, lines, show=show)
        invalid.extend(errors)
        invalid.sort(key=lambda e: int(e.split(":", 1)[0].split()[1]))
        for message in invalid:
            typer.echo(message, err=True)
        summary: dict[str, Any] = {"published": len(published), "invalid": len(invalid)}
        failed = False
        if wait or embedded_broker:
            if embedded_broker and not wait:
                typer.echo("embedded default: processing before exit (no external worker runs)", err=True)
            try:
                state = wait_for(rt, list(published), timeout, show=show)
            except WaitTimedOut as exc:
                # What was published is not lost: say how far it got, then exit with the timeout code.
                summary |= _counts(exc.state) | {"timed_out": True}
                typer.echo(json.dumps(summary))
                typer.echo(
                    f"error: timed out after {timeout:g} s (--timeout): {summary['pending']} of "
                    f"{len(published)} published turns still pending; they go on in the workers",
                    err=True,
                )
                raise typer.Exit(EXIT_TIMED_OUT) from exc
            elapsed = time.perf_counter() - started
            summary |= throughput(len(published), elapsed, before, work_seconds(rt.settings))
            for event_id, reason in sorted(state.reasons.items(), key=lambda kv: published[kv[0]]):
                typer.echo(f"line {published[event_id]}: {state.states[event_id]}: {reason}", err=True)
            summary |= _counts(state)
            failed = bool(state.counts.get("rejected") or state.counts.get("failed"))
        typer.echo(json.dumps(summary))
    if invalid or failed:
        raise typer.Exit(1)


def _counts(state: Progress) -> dict[str, int]:
    """The summary's counts: each final state, and ``pending`` for the turns still on their way."""
    counts = {k: state.counts.get(k, 0) for k in FINAL_COUNTS}
    return counts | {"pending": len(state.states) - sum(counts.values())}
