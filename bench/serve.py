"""`cuemem bench serve`: recall throughput of `cuemem serve --workers N` on the embedded default.

Recall is CPU-bound Python: one API process answers one recall at a time (the GIL), whatever the
number of clients. This measures what more API processes buy on this machine. A fresh data dir;
``turns`` synthetic turns (``bench.synthetic.make_turns``: 55 % memorable, 20 users) ingested with
`cuemem ingest --wait`; then, for each N, `cuemem serve --workers N --no-auth` on that data dir
(with its embedded Postgres, Redis, pipeline worker and index owner, as a user runs it) and
``clients`` client threads posting `/v1/recall` for ``seconds`` after a warm-up. Every query text
is used once, so the per-process query-embedding cache never answers. The server is stopped
between runs, so each N starts from the same data.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import machine_info, machine_markdown, percentiles, write_json

CUEMEM = str(Path(sys.executable).with_name("cuemem"))


@dataclass
class ServeConfig:
    out: Path
    workers: list[int] = field(default_factory=lambda: [1, 2])
    clients: int = 4
    seconds: float = 30.0
    warmup: int = 20
    turns: int = 600
    seed: int = 11


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _queries(turns: list[Any], count: int, seed: int) -> list[tuple[str, str]]:
    """(user, query) pairs, each text once: a memorable turn's opening words, cut at a random length."""
    rng = random.Random(seed)
    said = [t for t in turns if t.role == "user"]
    out: dict[tuple[str, str], None] = {}
    while len(out) < count:
        t = rng.choice(said)
        words = t.content.split()
        text = " ".join(words[: rng.randint(2, max(2, len(words)))]) if len(words) > 2 else t.content
        cut = text[: rng.randint(6, max(6, len(text)))]
        out[(t.user_id, f"{cut} {rng.randrange(10**6)}")] = None
    return list(out)


def _ingest(cfg: ServeConfig, data_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    from bench import synthetic

    turns = synthetic.make_turns(cfg.turns, seed=cfg.seed)
    path = data_dir.parent / "turns.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"user_id": t.user_id, "session_id": t.session_id, "role": t.role, "content": t.content}
            )
            + "\n"
            for t in turns
        ),
        encoding="utf-8",
    )
    started = time.perf_counter()
    done = subprocess.run(
        [CUEMEM, "ingest", str(path), "--wait", "--data-dir", str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cuemem ingest failed ({done.returncode}): {done.stderr[-2000:]}")
    return {
        "turns": len(turns),
        "seconds": round(time.perf_counter() - started, 1),
        "summary": done.stdout[-500:],
    }


def _serve_run(
    cfg: ServeConfig, n: int, data_dir: Path, env: dict[str, str], queries: list[Any]
) -> dict[str, Any]:
    import httpx

    port = _free_port()
    log_path = cfg.out / f"serve-{n}.log"
    base = f"http://127.0.0.1:{port}"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                CUEMEM,
                "serve",
                "--workers",
                str(n),
                "--no-auth",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(base + "/v1/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"cuemem serve --workers {n} did not come up: {log_path.read_text()[-2000:]}"
                )
            time.sleep(0.5)
        pending = iter(queries)
        lock = threading.Lock()
        latencies: list[float] = []
        errors: list[str] = []

        def ask(client: httpx.Client) -> float | None:
            with lock:
                user, query = next(pending)
            t = time.perf_counter()
            answer = client.post("/v1/recall", json={"user_id": user, "query": query, "reinforce": False})
            if answer.status_code != 200:
                errors.append(f"{answer.status_code} {answer.text[:200]}")
                return None
            return (time.perf_counter() - t) * 1e3

        with httpx.Client(base_url=base, timeout=60) as warm:  # every process loads its model
            for _ in range(cfg.warmup * n):
                ask(warm)
        stop = time.monotonic() + cfg.seconds
        load_before = os.getloadavg()

        def client_loop() -> None:
            with httpx.Client(base_url=base, timeout=60) as client:
                while time.monotonic() < stop:
                    took = ask(client)
                    if took is not None:
                        with lock:
                            latencies.append(took)

        started = time.perf_counter()
        threads = [threading.Thread(target=client_loop) for _ in range(cfg.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        return {
            "api_processes": n,
            "clients": cfg.clients,
            "recalls": len(latencies),
            "errors": len(errors),
            "first_errors": errors[:3],
            "seconds": round(elapsed, 2),
            "recalls_per_s": round(len(latencies) / elapsed, 2),
            "latency_ms": percentiles(latencies),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "load_average_before": [round(x, 2) for x in load_before],
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def run(cfg: ServeConfig) -> dict[str, Any]:
    from bench import synthetic

    cfg.out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    root = Path(tempfile.mkdtemp(prefix="cuemem-bench-serve-"))
    data_dir = root / "data"
    # The embedded default: no configured services, the bundled model.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUEMEM_")}
    # Throughput is what is measured: the per-tenant recall budget would cap it at its rate.
    env["CUEMEM_RATE_LIMITS"] = "false"
    started = time.perf_counter()
    try:
        ingest = _ingest(cfg, data_dir, env)
        turns = synthetic.make_turns(cfg.turns, seed=cfg.seed)
        runs = []
        for n in cfg.workers:
            queries = _queries(turns, 20_000, cfg.seed + n)
            runs.append(_serve_run(cfg, n, data_dir, env, queries))
            print(json.dumps(runs[-1]))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    single = next((r for r in runs if r["api_processes"] == 1), None)
    for r in runs:
        r["speedup"] = round(r["recalls_per_s"] / single["recalls_per_s"], 2) if single else None
    results = {
        "machine": info,
        "config": {**cfg.__dict__, "out": str(cfg.out)},
        "ingest": ingest,
        "runs": runs,
        "duration_s": round(time.perf_counter() - started, 1),
    }
    write_json(cfg.out / "results.json", results)
    (cfg.out / "report.md").write_text(_report(results), encoding="utf-8")
    return results


def _report(r: dict[str, Any]) -> str:
    lines = [
        "# API processes and recall throughput (`cuemem serve --workers N`)",
        "",
        machine_markdown(r["machine"]),
        f"- data: {r['ingest']['turns']} synthetic turns ingested in {r['ingest']['seconds']} s on the "
        "embedded default; recall over 20 users' memories and conversation logs",
        f"- load: {r['config']['clients']} client threads in this process, {r['config']['seconds']} s per "
        "run after a warm-up; each query text used once (no query-embedding cache hits); reinforcement off",
        f"- duration: {r['duration_s']} s",
        "",
        "| API processes | recalls/s | × one process | p50 / p95 / p99 ms | errors | load average after |",
        "|---:|---:|---:|---|---:|---|",
    ]
    for x in r["runs"]:
        lat = x["latency_ms"]
        lines.append(
            f"| {x['api_processes']} | {x['recalls_per_s']} | {x['speedup']} | "
            f"{lat.get('p50')} / {lat.get('p95')} / {lat.get('p99')} | {x['errors']} | {x['load_average']} |"
        )
    lines += [
        "",
        "Target (issue 16): at least 1.7 × the single process's throughput at 2 API processes. On the",
        "embedded default every process's searches go through the one index worker, and Postgres, the",
        "index worker and the client threads share the same 2 cores.",
        "",
    ]
    return "\n".join(lines)
