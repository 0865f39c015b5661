"""`cuemem ingest --wait --timeout` that runs out of time (issue 18): the summary is still printed
(published, each final state, pending, ``timed_out``) and the exit code (3) and an error line say
it was the timeout. No worker runs here, so nothing can finish: the wait always times out."""

from __future__ import annotations

import json
from pathlib import Path

from shared.settings import Settings
from tests.support.services import cuemem_in_process


def test_a_timed_out_wait_prints_the_summary_and_exits_with_the_timeout_code(
    it_settings: Settings, tmp_path: Path
):
    turns = tmp_path / "turns.jsonl"
    lines = [
        {
            "event_id": f"t-{i}",
            "user_id": "alice",
            "session_id": "s1",
            "seq": i,
            "role": "user",
            "content": f"turn {i}",
        }
        for i in (1, 2, 3)
    ]
    turns.write_text("\n".join(json.dumps(line) for line in lines) + "\n")

    run = cuemem_in_process(it_settings, "ingest", "--wait", "--timeout", "0", str(turns))

    assert run.returncode == 3, (run.stdout, run.stderr)
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["published"] == 3 and summary["pending"] == 3 and summary["timed_out"] is True
    assert (summary["done"], summary["failed"], summary["rejected"]) == (0, 0, 0)
    assert "timed out after 0 s (--timeout): 3 of 3 published turns still pending" in run.stderr
