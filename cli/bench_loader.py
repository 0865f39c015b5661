"""`cuemem bench`: the measurement code lives in the checkout's `bench/`, which the wheel leaves out.

Nothing imports `bench` statically (an import contract), so the CLI finds it at run time: first on
the import path (a source tree on PYTHONPATH, or the working directory), then next to this
package when cuemem is installed in editable mode from a checkout. Installed from a wheel, the
command is still listed and says what it needs.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import typer

CHECKOUT = Path(__file__).resolve().parent.parent


def _bench_app() -> typer.Typer | None:
    try:
        module = importlib.import_module("bench.cli")
    except ModuleNotFoundError as exc:
        if exc.name not in ("bench", "bench.cli"):
            raise
        if not (CHECKOUT / "bench" / "cli.py").is_file():
            return None
        sys.path.insert(0, str(CHECKOUT))
        module = importlib.import_module("bench.cli")
    app = module.bench_app
    assert isinstance(app, typer.Typer)
    return app


def bench_app() -> typer.Typer:
    """The bench sub-app, or a stand-in that explains how to get it."""
    app = _bench_app()
    if app is not None:
        return app
    missing = typer.Typer(help="Benchmarks (needs a source checkout: pip install -e '.[bench]').")

    @missing.callback(invoke_without_command=True)
    def _explain() -> None:
        typer.echo(
            "error: cuemem bench runs from a source checkout: clone the repository and "
            "`pip install -e '.[bench]'` there (the wheel ships no benchmark code)",
            err=True,
        )
        raise typer.Exit(2)

    return missing
