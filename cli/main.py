"""The `cuemem` command line: the Typer app and the registration of its commands, in the order
`cuemem --help` lists them. Its commands, options and JSON shapes are a stable contract; each group
of commands lives in its own module (cli/ingest.py, cli/recall.py, cli/admin.py, cli/processes.py,
cli/demo.py, cli/keys.py, cli/dead_letters.py), what they share in cli/common.py."""

from __future__ import annotations

import signal
import sys

import typer

from cli import admin, demo, ingest, processes, recall
from cli.bench_loader import bench_app
from cli.common import CliError
from cli.dead_letters import dead_letters_app
from cli.keys import keys_app
from service.operations.waiting import WaitTimedOut
from shared.language.lexicon import LexiconError
from shared.ports import EmbeddingModelMismatch
from workers.runtime.serving import DataDirServed

app = typer.Typer(
    help="cuemem: long-term memory for LLM agents. Without CUEMEM_* service URLs every command runs on "
    "the embedded default under --data-dir.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(bench_app(), name="bench")
app.command()(ingest.ingest)
app.command("recall")(recall.recall_cmd)
app.command()(recall.memories)
app.command()(recall.timeline)
app.command()(admin.reindex)
app.command()(recall.history)
app.command()(admin.maintain)
app.command()(admin.restore)
app.command("delete-user")(admin.delete_user)
app.command()(admin.export)
app.command("import")(admin.import_)
app.command()(admin.migrate)
app.command()(processes.worker)
app.command()(processes.beat)
app.command()(processes.serve)
app.add_typer(keys_app, name="keys")
app.add_typer(dead_letters_app, name="dead-letters")
app.command()(demo.demo)
app.command("mcp")(processes.mcp_cmd)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    # Turn SIGTERM into a normal exit so the context managers stop the workers and the embedded
    # services (without this, `kill` would leave Postgres, Redis and the workers running).
    raise SystemExit(128 + signum)


# A user's mistake or a refusal the user can act on (a data dir another process serves, for every
# command that starts workers on the embedded default): printed as one line, exit code 2.
USER_ERRORS = (CliError, DataDirServed, EmbeddingModelMismatch, LexiconError, WaitTimedOut)


def main() -> None:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        app()
    except USER_ERRORS as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
