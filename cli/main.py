"""The `cuemem` command line. Its commands, options and JSON shapes are a stable contract."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from tqdm import tqdm

from cli.bench_loader import bench_app
from producers.jsonl import count_lines, read_jsonl
from producers.publisher import Publisher
from service.operations.recall import recall_for
from shared.events import InvalidEvent, parse_at
from shared.ingest.pipeline import EMBEDDING_MODEL_KEY
from shared.ingest.progress import Progress, progress
from shared.lexicon import LexiconError
from shared.models import HISTORICAL_STATUSES, RECALLABLE_STATUSES
from shared.ports import EmbeddingModelMismatch
from shared.settings import Settings
from workers.runtime.local import Runtime, open_runtime
from workers.runtime.processes import check_alive, index_owner_command, worker_command, worker_queues

app = typer.Typer(
    help="cuemem: long-term memory for LLM agents. Without CUEMEM_* service URLs every command runs on "
    "the embedded default under --data-dir.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(bench_app(), name="bench")

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar="CUEMEM_DATA_DIR", help="State of the embedded default [default: ./.cuemem]"
    ),
]


class CliError(Exception):
    """An error the user can fix: printed without a traceback, exit code 2."""


def _settings(data_dir: Path | None) -> Settings:
    settings = Settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


# --- waiting ----------------------------------------------------------------------------------


def wait_for(rt: Runtime, event_ids: list[str], timeout_s: float, *, show: bool = True) -> Progress:
    """Poll Postgres until every event is done, a duplicate, rejected or dead-lettered."""
    deadline = time.monotonic() + timeout_s
    bar = tqdm(total=len(event_ids), desc="processing", unit="turn", disable=not show, file=sys.stderr)
    try:
        while True:
            with rt.container.uow() as uow:
                state = progress(uow, event_ids)
            bar.update(state.finished - bar.n)
            # A re-sent event counts as finished at once (its first delivery was); with the
            # command's own workers, also wait until they consumed every message, or the
            # re-sent ones would stay queued after the workers stop.
            if state.complete and (not rt.workers or broker_idle(rt.settings)):
                return state
            check_alive(rt.workers)
            if time.monotonic() > deadline:
                waiting = {
                    k: v
                    for k, v in state.counts.items()
                    if k not in ("done", "duplicate", "rejected", "failed")
                }
                raise CliError(f"timed out after {timeout_s:.0f} s; still in flight: {waiting}")
            time.sleep(0.2)
    finally:
        bar.close()


def broker_idle(settings: Settings) -> bool:
    """No message waiting in any cuemem queue and none delivered but unacknowledged."""
    from producers.broker import open_redis
    from workers.broker import queue_depths

    url = settings.effective_redis_url
    if url is None:
        return True
    client = open_redis(url)
    try:
        return not any(queue_depths(client).values())
    finally:
        client.close()


def _publish_lines(
    publisher: Publisher, lines: list[tuple[int, dict[str, Any]]], *, show: bool
) -> tuple[dict[str, int], list[str]]:
    """Publish parsed lines; returns event id -> line number, and the per-line errors."""
    published: dict[str, int] = {}
    errors: list[str] = []
    for number, data in tqdm(lines, desc="publishing", unit="turn", disable=not show, file=sys.stderr):
        try:
            published[publisher.publish_turn(data).event_id] = number
        except InvalidEvent as exc:
            errors.append(f"line {number}: {exc}")
    return published, errors


# --- commands ---------------------------------------------------------------------------------


@app.command()
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
    _setup_logging(verbose)
    if not file.is_file():
        raise CliError(f"FILE: {file} does not exist or is not a file")
    settings = _settings(data_dir)
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
    with open_runtime(settings, start_workers=embedded_broker) as rt:
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
            state = wait_for(rt, list(published), timeout, show=show)
            for event_id, reason in sorted(state.reasons.items(), key=lambda kv: published[kv[0]]):
                typer.echo(f"line {published[event_id]}: {state.states[event_id]}: {reason}", err=True)
            summary.update({k: state.counts.get(k, 0) for k in ("done", "duplicate", "rejected", "failed")})
            failed = bool(state.counts.get("rejected") or state.counts.get("failed"))
        typer.echo(json.dumps(summary))
    if invalid or failed:
        raise typer.Exit(1)


def _check_model(rt: Runtime) -> None:
    with rt.container.uow() as uow:
        stored = uow.meta.get(EMBEDDING_MODEL_KEY)
    configured = rt.container.embedder.model_name
    if stored is not None and stored != configured:
        raise CliError(str(EmbeddingModelMismatch(stored, configured)))


def run_recall(
    rt: Runtime,
    user: str,
    query: str,
    *,
    k: int,
    now: datetime,
    session: str | None,
    budget: int | None = None,
    include_archived: bool = False,
    reinforce: bool = False,
    include_history: bool = False,
) -> dict[str, Any]:
    """`cuemem recall --json` output (plus "prompt"); the demo calls it too.

    Unlike the in-process ``recall_for``, a command-line recall does not count as a use unless
    asked (``--reinforce``): it is how operators inspect memory, and re-running the demo or a
    recall must leave the memories as they were."""
    _check_model(rt)
    return recall_for(
        rt.container,
        user,
        query,
        k=k,
        now=now,
        session_id=session,
        budget_tokens=budget,
        include_archived=include_archived,
        reinforce=reinforce,
        include_history=include_history,
    )


def _parse_now(now: str | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    try:
        return parse_at(now)
    except ValueError as exc:
        raise CliError(f"--now: {exc}") from None


def _check_user(user: str) -> str:
    from shared.events import SAFE_ID, SAFE_ID_TEXT

    if not user or not SAFE_ID.match(user):
        raise CliError(f"--user: {user!r} must be non-empty and use only {SAFE_ID_TEXT}")
    return user


RECALL_FORMATS = ("items", "prompt")


@app.command("recall")
def recall_cmd(
    query: Annotated[str, typer.Argument(help="What to remember", metavar="QUERY")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    k: Annotated[int, typer.Option("--k", min=1, max=200, help="How many items")] = 5,
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
    _setup_logging(verbose)
    _check_user(user)
    at = _parse_now(now)
    if not query.strip():
        raise CliError("QUERY: must not be empty")
    if fmt not in RECALL_FORMATS:
        raise CliError(f"--format: {fmt!r} is not one of {', '.join(RECALL_FORMATS)}")
    if budget is not None and budget < 1:
        raise CliError(f"--budget: must be at least 1 token, got {budget}")
    with open_runtime(_settings(data_dir)) as rt:
        out = run_recall(
            rt,
            user,
            query,
            k=k,
            now=at,
            session=session,
            budget=budget,
            include_archived=include_archived,
            reinforce=reinforce,
            include_history=include_history,
        )
    if fmt == "prompt":
        if out["prompt"]:
            typer.echo(out["prompt"])
    elif as_json:
        _echo_json(out)
    else:
        _print_recall(query, out)


def _print_recall(query: str, out: dict[str, Any]) -> None:
    typer.echo(f"? {query}  [stage: {out['stage']}]")
    if not out["items"]:
        typer.echo("  (nothing found) " + "; ".join(out["trace"].get("notes", [])))
    for i, item in enumerate(out["items"], 1):
        ex = item["explanation"]
        why = ", ".join(ex.get("paths", []))
        if ex.get("matched_cues"):
            why += " cues=" + ",".join(ex["matched_cues"])
        if "vector_score" in ex:
            why += f" cos={ex['vector_score']:.3f}"
        status = "" if item["status"] in ("active", "working", "log") else f" ({item['status']})"
        typer.echo(f"  {i}. [{item['type']}]{status} {item['content']}   ({why})")


@app.command()
def memories(
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    include_all: Annotated[
        bool, typer.Option("--all", help="Include superseded, archived and expired memories")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    data_dir: DataDir = None,
) -> None:
    """List one user's memories."""
    _setup_logging(False)
    _check_user(user)
    statuses = RECALLABLE_STATUSES | HISTORICAL_STATUSES if include_all else RECALLABLE_STATUSES
    with open_runtime(_settings(data_dir)) as rt, rt.container.uow() as uow:
        rows = uow.memories.for_user(rt.settings.tenant_id, user, statuses)
    data = [m.to_public() for m in rows]
    if as_json:
        _echo_json(data)
        return
    for m in data:
        typer.echo(
            f"{m['id']}  {m['status']:<10} {m['type']:<10} imp={m['importance']:<4} x{m['access_count']}  "
            f"{m['content']}"
        )


@app.command()
def timeline(
    user: Annotated[str, typer.Option("--user")],
    session: Annotated[str, typer.Option("--session")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    data_dir: DataDir = None,
) -> None:
    """Show one conversation's recorded turns in seq order."""
    _setup_logging(False)
    _check_user(user)
    with open_runtime(_settings(data_dir)) as rt, rt.container.uow() as uow:
        events = uow.events.timeline(rt.settings.tenant_id, user, session)
    data = [{**e.event.to_message(), "stage": e.stage, "importance": e.importance} for e in events]
    if as_json:
        _echo_json(data)
        return
    for e in data:
        typer.echo(f"{e['seq']:>5} {e['role']:<9} {e['stage']:<9} {e['content']}")


@app.command()
def reindex(
    data_dir: DataDir = None, verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False
) -> None:
    """Rebuild the vector indexes (memories, conversation log) from Postgres, re-embedding vectors
    of any other model."""
    _setup_logging(verbose)
    from shared.lifecycle.maintenance import rebuild_indexes
    from shared.ports import IndexOwnedElsewhere

    with open_runtime(_settings(data_dir)) as rt:
        c = rt.container
        try:
            stats = rebuild_indexes(c.uow, c.index, c.turn_index, c.embedder)
        except IndexOwnedElsewhere:
            # A running index worker owns the embedded index: let it do the rebuild.
            from producers.broker import send_only_app
            from shared.queues import ROUTES, TaskName

            remote = send_only_app(rt.settings.broker_url or "", with_results=True)
            result = remote.send_task(TaskName.REINDEX.value, queue=ROUTES[TaskName.REINDEX].value)
            stats = result.get(timeout=24 * 3600)
    typer.echo(json.dumps(stats))


@app.command()
def history(
    memory_id: Annotated[str, typer.Argument(help="A memory id", metavar="MEMORY_ID")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    data_dir: DataDir = None,
) -> None:
    """Show a memory's chain: what superseded, merged or consolidated it, when and why."""
    from shared.lifecycle.maintenance import history_chain

    _setup_logging(False)
    _check_user(user)
    with open_runtime(_settings(data_dir)) as rt, rt.container.uow() as uow:
        chain = history_chain(uow, rt.settings.tenant_id, user, memory_id)
    if not chain["found"]:
        raise CliError(f"MEMORY_ID: no memory {memory_id!r} for user {user!r}")
    if as_json:
        _echo_json(chain)
        return
    for m in chain["memories"]:
        until = f" until {m['valid_to']}" if m["valid_to"] else ""
        typer.echo(
            f"{m['id']}  {m['status']:<10} {m['type']:<10} from {m['valid_from']}{until}  {m['content']}"
        )
    typer.echo("")
    for h in chain["history"]:
        related = f" -> {h['related_id']}" if h["related_id"] else ""
        typer.echo(f"{h['at']}  {h['memory_id'][:8]} {h['action']}{related}  [{h['judge']}] {h['reason']}")


@app.command()
def maintain(
    now: Annotated[
        str | None, typer.Option("--now", help="ISO 8601 time to run at (reproducible runs)")
    ] = None,
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Run the lifecycle once: decay, task TTL, archive, consolidation, then (where this process
    may open the index) index sync, score push, reconciliation and optimize. Prints counts as JSON."""
    from shared.lifecycle import sweeps as lifecycle
    from shared.ports import IndexOwnedElsewhere
    from shared.queues import TaskName
    from shared.storage import FollowUp

    _setup_logging(verbose)
    at = _parse_now(now)
    with open_runtime(_settings(data_dir)) as rt:
        c = rt.container
        _check_model(rt)
        policy = c.lifecycle
        store, touched = lifecycle.maintain_store(c.uow, c.embedder, at, policy)
        try:
            index = lifecycle.maintain_index(
                c.uow, c.index, c.embedder, touched, policy, turn_index=c.turn_index
            )
            optimized = c.index.optimize()
            if c.turn_index is not None:  # both graphs: `|`, not `or`, which would skip the second
                optimized = c.turn_index.optimize() | optimized
        except IndexOwnedElsewhere:
            # A running index worker owns the embedded index: it syncs, pushes, reconciles, optimizes.
            c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, pair) for pair in touched])
            c.dispatch(
                [
                    FollowUp(TaskName.PUSH_SCORES.value, ()),
                    FollowUp(TaskName.RECONCILE.value, ()),
                    FollowUp(TaskName.OPTIMIZE_INDEX.value, ()),
                ]
            )
            index, optimized = {"indexed": 0, "sent_to_index_worker": True}, False
    summary = {"now": at.isoformat(), **store, **index, "index_optimized": optimized}
    typer.echo(json.dumps(summary))


@app.command()
def restore(
    memory_id: Annotated[str, typer.Argument(help="An archived memory's id", metavar="MEMORY_ID")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required)")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The memory's tenant [default: CUEMEM_TENANT_ID]")
    ] = None,
    now: Annotated[str | None, typer.Option("--now", help="ISO 8601 time of the restore")] = None,
    data_dir: DataDir = None,
) -> None:
    """Bring an archived memory back: active again, re-indexed, with a history entry."""
    from shared.ingest.pipeline import sync_user_index
    from shared.lifecycle.sweeps import RestoreRefused, restore_memory
    from shared.ports import IndexOwnedElsewhere
    from shared.queues import TaskName
    from shared.storage import FollowUp

    _setup_logging(False)
    _check_user(user)
    at = _parse_now(now)
    with open_runtime(_settings(data_dir)) as rt:
        c = rt.container
        tenant_id = tenant or rt.settings.tenant_id
        with c.uow() as uow:
            try:
                memory = restore_memory(uow, tenant_id, user, memory_id, at, c.lifecycle.decay)
            except RestoreRefused as exc:
                raise CliError(f"MEMORY_ID: {exc}") from None
            uow.commit()
        try:
            with c.uow() as uow:
                sync_user_index(uow, c.index, c.embedder, tenant_id, user)
                uow.commit()
            reindexed: bool | str = True
        except IndexOwnedElsewhere:
            c.dispatch([FollowUp(TaskName.SYNC_INDEX.value, (tenant_id, user))])
            reindexed = "sent to the index worker"
    typer.echo(json.dumps({"restored": memory.id, "status": memory.status.value, "indexed": reindexed}))


@app.command()
def migrate(data_dir: DataDir = None) -> None:
    """Bring the Postgres schema to the latest version (also done by every embedded start)."""
    _setup_logging(True)
    settings = _settings(data_dir)
    if settings.database_url:
        from sqlalchemy import create_engine

        from workers.db.migrate import upgrade

        engine = create_engine(settings.database_url)
        upgrade(engine)
        engine.dispose()
    else:
        with open_runtime(settings):
            pass
    typer.echo("schema up to date")


@app.command()
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
    _setup_logging(True)
    settings = _settings(data_dir)
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
    with open_runtime(settings, start_workers=True, beat=True) as rt:
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


@app.command()
def beat(data_dir: DataDir = None) -> None:
    """Run the periodic scheduler. Run exactly one per deployment."""
    settings = _settings(data_dir)
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
    from producers.broker import open_redis
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


@app.command()
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
            _settings(data_dir),
            host,
            port,
            auth=not no_auth,
            echo=lambda line: typer.echo(line, err=True),
            log_json=log_format == "json",
        )
    except ServeRefused as exc:
        raise CliError(str(exc)) from None


keys_app = typer.Typer(help="API keys of the HTTP API: one tenant each, stored hashed.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for (required)")],
    name: Annotated[str, typer.Option("--name", help="What the key is for (required)")],
    data_dir: DataDir = None,
) -> None:
    """Create a key and print it once, as JSON {id, tenant_id, name, key}: only its hash is kept."""
    from service.operations.curation import create_key
    from shared.api_keys import MAX_NAME_CHARS
    from shared.lifecycle.curation import InvalidInput

    _setup_logging(False)
    if not name.strip() or len(name) > MAX_NAME_CHARS:
        raise CliError(f"--name: must be 1 to {MAX_NAME_CHARS} characters")
    with open_runtime(_settings(data_dir)) as rt:
        try:
            created = create_key(rt.container, tenant, name.strip())
        except InvalidInput as exc:
            raise CliError(f"--tenant: {exc.errors[0].problem}") from None
    typer.echo(json.dumps(created))


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys")] = None,
    data_dir: DataDir = None,
) -> None:
    """List keys as JSON (id, tenant, name, prefix, created, revoked); never the keys themselves."""
    from service.operations.curation import list_keys

    _setup_logging(False)
    with open_runtime(_settings(data_dir)) as rt:
        keys = list_keys(rt.container, tenant)
    _echo_json([k.to_public() for k in keys])


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `cuemem keys list`)", metavar="KEY_ID")],
    data_dir: DataDir = None,
) -> None:
    """Revoke a key: every request with it is refused from now on."""
    from service.operations.curation import revoke_key

    _setup_logging(False)
    with open_runtime(_settings(data_dir)) as rt:
        key = revoke_key(rt.container, key_id)
    if key is None:
        raise CliError(f"KEY_ID: no key {key_id!r}")
    typer.echo(json.dumps(key.to_public()))


dead_letters_app = typer.Typer(
    help="Messages the pipeline gave up on, with the reason: list them, replay them.", no_args_is_help=True
)
app.add_typer(dead_letters_app, name="dead-letters")


@dead_letters_app.command("list")
def dead_letters_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (with the stored arguments)")] = False,
    pending: Annotated[bool, typer.Option("--pending", help="Only those not replayed yet")] = False,
    data_dir: DataDir = None,
) -> None:
    """List dead letters, oldest first: id, task, event, reason, when parked and when replayed."""
    from service.operations.dead_letters import list_dead_letters

    _setup_logging(False)
    with open_runtime(_settings(data_dir)) as rt:
        letters = list_dead_letters(rt.container, include_replayed=not pending)
    if as_json:
        _echo_json([d.to_public() for d in letters])
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

    _setup_logging(verbose)
    if bool(ids) == replay_all:
        raise CliError("ID: give dead letter ids or --all (not both)")
    settings = _settings(data_dir)
    embedded_broker = not settings.broker_url
    with open_runtime(settings, start_workers=embedded_broker) as rt:
        try:
            done = replay(rt.container, None if replay_all else ids)
        except UnknownDeadLetter as exc:
            raise CliError(f"ID: {exc}") from None
        except NotReplayable as exc:
            raise CliError(str(exc)) from None
        summary: dict[str, Any] = {"replayed": [d.id for d in done]}
        events = sorted({d.event_id for d in done if d.event_id})
        if embedded_broker and events:
            state = wait_for(rt, events, timeout, show=sys.stderr.isatty() or verbose)
            summary["states"] = {e: state.states[e] for e in events}
    typer.echo(json.dumps(summary))


@app.command()
def demo(
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Ingest a bundled bilingual conversation, then show what was remembered and a few recalls."""
    from cli.demo import run_demo

    _setup_logging(verbose)
    run_demo(_settings(data_dir), wait_for=wait_for, recall=run_recall, echo=typer.echo)


@app.command("mcp")
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
    data_dir: DataDir = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose")] = False,
) -> None:
    """Serve search_memory, remember and forget for one user as an MCP server over stdio."""
    _setup_logging(verbose)
    _check_user(user)
    from shared.events import SAFE_ID, SAFE_ID_TEXT

    for option, value in (("--tenant", tenant), ("--session", session)):
        if value is not None and (not value or not SAFE_ID.match(value)):
            raise CliError(f"{option}: {value!r} must be non-empty and use only {SAFE_ID_TEXT}")
    if api_url and tenant is not None:
        raise CliError("--tenant: with --api-url the tenant is the API key's (CUEMEM_API_KEY)")
    try:
        from service.mcp import serve as mcp_serve
    except ImportError as exc:  # the SDK is the optional `mcp` extra
        raise CliError(f"the MCP server needs the mcp package: pip install 'cuemem[mcp]' ({exc})") from None
    if api_url:
        mcp_serve.serve_api(api_url, user, session)
        return
    settings = _settings(data_dir)
    if tenant is not None:
        settings = settings.model_copy(update={"tenant_id": tenant})
    mcp_serve.serve_library(settings, user, session)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    # Turn SIGTERM into a normal exit so the context managers stop the workers and the embedded
    # services (without this, `kill` would leave Postgres, Redis and the workers running).
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        app()
    except (CliError, EmbeddingModelMismatch, LexiconError) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
