"""Running a snippet of Python in a fresh interpreter on this checkout: for what must happen in
another process (a second owner of an index, a task module imported without a broker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def python_json(code: str, *args: str, timeout: float, **env: str) -> Any:
    """Run ``code`` with ``args`` in a new interpreter importing this checkout (``env`` added to
    the environment); the JSON it prints last. A non-zero exit raises."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        },
        cwd=REPO_ROOT,
        timeout=timeout,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_python_runs(code: str, *, timeout: float, env: dict[str, str] | None = None) -> None:
    """Run ``code`` in a new interpreter (``env``: its whole environment, else this process's);
    fail with the tail of its stderr unless it exits 0."""
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-2000:]
