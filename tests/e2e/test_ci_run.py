"""`.ci/run`, CI's entry point, runs README's test command, and runs it with
``CUEMEM_REQUIRE_BROWSER=1`` (without it a CI machine lacking Chromium skips the only in-browser
XSS/CSP checks with a warning instead of failing them, ``tests/support/browser.py``).

The script is run for real by bash, on a copy of itself, with stand-ins on the ``PATH`` for what it
calls: the services answer as up, Chromium is there, and ``python3 -m venv .venv`` makes a
``.venv/bin`` whose pip, ruff, mypy, lint-imports and pytest only write down their arguments and
the environment they were started with. So what is checked is what bash runs, whatever way the
script is written (a removed, misplaced, overridden or unset export fails it alike)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = ROOT / ".ci" / "run"
README = ROOT / "README.md"
REQUIRE = "CUEMEM_REQUIRE_BROWSER"
HANG_GUARD_S = 300  # a bound for a stuck run, not a measurement
VENV_TOOLS = ("pip", "ruff", "mypy", "lint-imports", "pytest")

# A stand-in: writes one JSON line (the command as bash ran it: a name found on the PATH by that
# name, others by the path given; its arguments; REQUIRE's value). `python3 -m venv DIR` also
# makes DIR/bin with a copy of itself for each tool of the test command.
STAND_IN = """#!{python}
import json, os, shutil, sys
from pathlib import Path
here = Path(sys.argv[0])
name = here.name if here.parent == Path({shims!r}) else sys.argv[0]
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(json.dumps({{"argv": [name, *args], "require": os.environ.get({require!r})}}) + "\\n")
if name == "python3" and args[:2] == ["-m", "venv"]:
    (Path(args[2]) / "bin").mkdir(parents=True)
    for tool in {tools!r}:
        shutil.copy2(__file__, Path(args[2]) / "bin" / tool)
"""


def _answering(directory: Path, name: str, code: int = 0) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\nexit {code}\n")
    path.chmod(0o755)


def _readme_command() -> str:
    """The command of README's "Set up and run the tests" block: its one bash block running pytest."""
    blocks = README.read_text().split("```bash\n")[1:]
    commands = [block.split("```", 1)[0].strip() for block in blocks]
    found = [c for c in commands if "pytest" in c]
    assert len(found) == 1 and "\n" not in found[0], f"README's test command is not one line: {found}"
    return found[0]


def _run_ci(tmp_path: Path) -> list[dict[str, Any]]:
    repo, shims, log = tmp_path / "repo", tmp_path / "shims", tmp_path / "ran.jsonl"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy2(CI_RUN, repo / ".ci" / "run")
    shims.mkdir()
    stand_in = STAND_IN.format(
        python=sys.executable, shims=str(shims), log=str(log), require=REQUIRE, tools=VENV_TOOLS
    )
    (shims / "python3").write_text(stand_in)
    (shims / "python3").chmod(0o755)
    for up in ("pg_isready", "redis-cli", "chromium"):
        _answering(shims, up)
    # Not CI's environment: REQUIRE must come from the script itself.
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["bash", str(repo / ".ci" / "run")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, f".ci/run failed ({done.returncode}): {done.stdout}{done.stderr}"
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_ci_runs_readmes_test_command_with_the_browser_required(tmp_path: Path) -> None:
    readme = _readme_command()
    ran = _run_ci(tmp_path)
    expected = [shlex.split(part) for part in readme.split("&&")]
    assert [r["argv"] for r in ran] == expected, "what .ci/run runs is not README's test command"
    without = [" ".join(r["argv"]) for r in ran if r["require"] != "1"]
    assert not without, f"run without {REQUIRE}=1 (a missing Chromium would skip, not fail): {without}"
    assert any(r["argv"][0] == ".venv/bin/pytest" for r in ran)


def test_ci_holds_readmes_test_command_verbatim() -> None:
    """The script says it runs README's command verbatim: one line of it is that command."""
    readme = _readme_command()
    lines = [line.strip() for line in CI_RUN.read_text().splitlines()]
    assert readme in lines, f".ci/run does not hold README's test command:\n{readme}"
    assert os.access(CI_RUN, os.X_OK), ".ci/run must be executable"
