"""What every `cuemem` command shares: the --data-dir option, settings, logging, JSON output, the
checks of --user and --now, and the error a user can fix (printed without a traceback, exit 2)."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from shared.events import bounded_at
from shared.settings import Settings

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar="CUEMEM_DATA_DIR", help="State of the embedded default [default: ./.cuemem]"
    ),
]


class CliError(Exception):
    """An error the user can fix: printed without a traceback, exit code 2."""


def settings_for(data_dir: Path | None) -> Settings:
    settings = Settings()
    if data_dir is not None:
        settings = settings.model_copy(update={"data_dir": data_dir})
    return settings


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def parse_now(now: str | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    try:
        return bounded_at(now)
    except ValueError as exc:
        raise CliError(f"--now: {exc}") from None


def check_user(user: str) -> str:
    from shared.events import SAFE_ID_TEXT, is_safe_id

    if not is_safe_id(user):
        raise CliError(f"--user: {user!r} must be non-empty and use only {SAFE_ID_TEXT}")
    return user
