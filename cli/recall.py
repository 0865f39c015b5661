"""The commands that read memory: `recall`, `memories`, `timeline` and `history`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli.common import CliError, DataDir, check_user, echo_json, settings_for, setup_logging
from service.operations.recall import answer_recall
from shared.events import InvalidInput
from shared.models import HISTORICAL_STATUSES, RECALLABLE_STATUSES
from shared.recall.request import parse_recall
from shared.zones import local_time, zone_name
from workers.runtime.local import open_runtime

RECALL_FORMATS = ("items", "prompt")
# What `cuemem recall` calls each field of a recall (shared.recall.request.parse_recall), so that
# an error names the option to fix; the problem text is the one every entry point gives.
RECALL_OPTIONS = {
    "user_id": "--user",
    "query": "QUERY",
    "k": "--k",
    "now": "--now",
    "session_id": "--session",
    "budget_tokens": "--budget",
    "tenant_id": "CUEMEM_TENANT_ID",
}


def recall_cmd(
    query: Annotated[str, typer.Argument(help="What to remember", metavar="QUERY")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    k: Annotated[int, typer.Option("--k", help="How many items (1 to 200)")] = 5,
    now: Annotated[str | None, typer.Option("--now", help="ISO 8601 time to recall at")] = None,
    session: Annotated[str | None, typer.Option("--session", help="Current conversation")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="items: the list (readable, or JSON with --json); prompt: only the prompt block"
        ),
    ] = "items",
    budget: Annotated[
        int | None,
        typer.Option("--budget", help="Token budget of the items and the prompt block (prompt: 1000)"),
    ] = None,
    include_archived: Annotated[
        bool, typer.Option("--include-archived", help="Archived memories may be returned too")
    ] = False,
    reinforce: Annotated[
        bool, typer.Option("--reinforce", help="Count the returned memories as used (access count + 1)")
    ] = False,
    include_history: Annotated[
        bool,
        typer.Option(
            "--include-history",
            help="Past statements may be returned too (superseded, archived, expired), marked by status",
        ),
    ] = False,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Recall memories for one user: exact cues first, then vector and keyword search."""
    setup_logging(verbose)
    if fmt not in RECALL_FORMATS:
        raise CliError(f"--format: {fmt!r} is not one of {', '.join(RECALL_FORMATS)}")
    settings = settings_for(data_dir)
    try:
        asked = parse_recall(
            user_id=user,
            query=query,
            k=k,
            now=now,
            session_id=session,
            budget_tokens=budget,
            include_archived=include_archived,
            include_history=include_history,
            reinforce=reinforce,
            tenant_id=settings.tenant_id,
            max_id_chars=settings.max_id_chars,
        )
    except InvalidInput as exc:
        raise CliError(option_errors(exc)) from None
    with open_runtime(settings) as rt:
        out = answer_recall(rt.container, asked)
    if fmt == "prompt":
        if out["prompt"]:
            typer.echo(out["prompt"])
    elif as_json:
        echo_json(out)
    else:
        print_recall(query, out)


def option_errors(exc: InvalidInput) -> str:
    """A recall's errors (:func:`shared.recall.request.parse_recall`), each named by the option to
    fix: ``--k: must be between 1 and 200, got 0``."""
    return "; ".join(f"{RECALL_OPTIONS.get(e.field, e.field)}: {e.problem}" for e in exc.errors)


def why_line(explanation: dict[str, Any]) -> str:
    """What found an item and how likely it is to answer, in one line: its paths, the cues it
    matched, its cosine to the query (the better of its own and its context window's) and the
    relevance model's probability (an item near 0 is
    only the closest thing the store holds, and the plain output must let a reader see that)."""
    why = "+".join(explanation.get("paths", []))
    if explanation.get("matched_cues"):
        why += " " + ",".join(explanation["matched_cues"])
    # The dense list ranks by the better cosine, the memory's own or its context window's.
    cosines = [explanation[k] for k in ("vector_score", "turn_vector_score") if k in explanation]
    if cosines:
        why += f" cos={max(cosines):.2f}"
    if "relevance" in explanation:
        why += f" relevance={explanation['relevance']:.3f}"
    return why


def print_recall(query: str, out: dict[str, Any]) -> None:
    """A recall in plain text: the items, each with its :func:`why_line`, then the trace's notes,
    which say what put an item above one the model gave a higher probability ("the query asks for
    profile:job: its current memory comes first") or why nothing was cut."""
    typer.echo(f"? {query}  [stage: {out['stage']}]")
    notes = out["trace"].get("notes", [])
    if not out["items"]:
        typer.echo("  (nothing found) " + "; ".join(notes))
        return
    for i, item in enumerate(out["items"], 1):
        status = "" if item["status"] in ("active", "working", "log") else f" ({item['status']})"
        typer.echo(f"  {i}. [{item['type']}]{status} {item['content']}   <- {why_line(item['explanation'])}")
    for note in notes:
        typer.echo(f"  note: {note}")


def memories(
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    include_all: Annotated[
        bool, typer.Option("--all", help="Include superseded, archived and expired memories")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    data_dir: DataDir = None,
) -> None:
    """List one user's memories."""
    setup_logging(False)
    check_user(user)
    statuses = RECALLABLE_STATUSES | HISTORICAL_STATUSES if include_all else RECALLABLE_STATUSES
    with open_runtime(settings_for(data_dir)) as rt, rt.container.uow() as uow:
        rows = uow.memories.for_user(rt.settings.tenant_id, user, statuses)
        offset = uow.events.user_offset(rt.settings.tenant_id, user)
    data = [m.to_public() for m in rows]
    if as_json:
        echo_json(data)
        return
    for m in data:
        when = f"  (due {local_time(m['due_at'], offset)} {zone_name(offset)})" if m.get("due_at") else ""
        typer.echo(
            f"{m['id']}  {m['status']:<10} {m['type']:<10} imp={m['importance']:<4} x{m['access_count']}  "
            f"{m['content']}{when}"
        )


def timeline(
    user: Annotated[str, typer.Option("--user")],
    session: Annotated[str, typer.Option("--session")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    data_dir: DataDir = None,
) -> None:
    """Show one conversation's recorded turns in seq order."""
    setup_logging(False)
    check_user(user)
    with open_runtime(settings_for(data_dir)) as rt, rt.container.uow() as uow:
        events = uow.events.timeline(rt.settings.tenant_id, user, session)
    data = [{**e.event.to_message(), "stage": e.stage, "importance": e.importance} for e in events]
    if as_json:
        echo_json(data)
        return
    for e in data:
        typer.echo(f"{e['seq']:>5} {e['role']:<9} {e['stage']:<9} {e['content']}")


def history(
    memory_id: Annotated[str, typer.Argument(help="A memory id", metavar="MEMORY_ID")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    data_dir: DataDir = None,
) -> None:
    """Show a memory's chain: what superseded, merged or consolidated it, when and why."""
    from shared.lifecycle.maintenance import history_chain

    setup_logging(False)
    check_user(user)
    with open_runtime(settings_for(data_dir)) as rt, rt.container.uow() as uow:
        chain = history_chain(uow, rt.settings.tenant_id, user, memory_id)
        offset = uow.events.user_offset(rt.settings.tenant_id, user)
    if not chain["found"]:
        raise CliError(f"MEMORY_ID: no memory {memory_id!r} for user {user!r}")
    if as_json:
        echo_json(chain)
        return
    typer.echo(f"(times in {zone_name(offset)}, the user's zone)")
    for m in chain["memories"]:
        until = f" until {local_time(m['valid_to'], offset)}" if m["valid_to"] else ""
        since = local_time(m["valid_from"], offset)
        typer.echo(f"{m['id']}  {m['status']:<10} {m['type']:<10} from {since}{until}  {m['content']}")
    typer.echo("")
    for h in chain["history"]:
        related = f" -> {h['related_id']}" if h["related_id"] else ""
        typer.echo(
            f"{local_time(h['at'], offset)}  {h['memory_id'][:8]} {h['action']}{related}  [{h['judge']}] "
            f"{h['reason']}"
        )
