"""`cuemem bench ...`: one command per benchmark. Each prints progress, records the machine and
the exact command, and writes results.json plus a Markdown report into --out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bench.cli_ranker import ranker_features_cmd, small_stores_cmd, train_ranker_cmd
from bench.scratch import DEFAULT_PG_ADMIN, INGEST_REDIS, LATENCY_REDIS

bench_app = typer.Typer(
    help="Benchmarks (they measure and report; they are not tests).", no_args_is_help=True
)


# The scratch services of the benchmarks that measure on real ones (latency, ingest, footprint):
# their options, written once. Databases are created on --pg-admin and dropped at the end; the
# Redis db is flushed.
PgAdmin = Annotated[
    str, typer.Option("--pg-admin", help="Admin URL: fresh databases are created there and dropped")
]
ScratchRedis = Annotated[str, typer.Option("--redis-url", help="A dedicated Redis db (flushed)")]
Keep = Annotated[bool, typer.Option("--keep", help="Keep the databases and data dirs (debugging)")]


@bench_app.callback()
def _user_lexicon() -> None:
    # Some benchmarks analyse text without a container (latency, baselines): install the user cue
    # lexicon (CUEMEM_LEXICON_PATHS) here so that every benchmark measures the configured words.
    from shared.settings import Settings
    from workers.lexicon import apply_lexicon

    apply_lexicon(Settings())


@bench_app.command("decay")
def decay_cmd(
    out: Annotated[Path, typer.Option("--out", help="Where results.json and report.md go")],
    sizes: Annotated[str, typer.Option(help="Comma-separated table sizes")] = "100000,1000000",
    index_sizes: Annotated[str, typer.Option(help="Comma-separated index sync sizes")] = "100000",
    database_url: Annotated[
        str, typer.Option(help="Admin URL of a Postgres server; a fresh database is created and dropped")
    ] = DEFAULT_PG_ADMIN,
) -> None:
    """Half-life score recompute and index sync at 100k and 1M memories."""
    from bench.decay import run_decay

    out.mkdir(parents=True, exist_ok=True)
    run_decay(database_url, out, _csv_ints(sizes, "--sizes"), _csv_ints(index_sizes, "--index-sizes"))


@bench_app.command("locomo")
def locomo_cmd(
    data: Annotated[Path, typer.Option("--data", help="locomo10.json (CC BY-NC; read, never copied)")],
    out: Annotated[Path, typer.Option("--out", help="Where results.json, report.md and plots go")],
    conversations: Annotated[
        int | None, typer.Option("--conversations", min=1, help="Only the first N conversations")
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="cuemem state to ingest into (default: a fresh data/ under --out)"),
    ] = None,
) -> None:
    """LoCoMo retrieval recall: every turn through the real pipeline, cuemem vs BM25/dense/hybrid."""
    from bench.locomo import run_locomo
    from bench.locomo_data import LocomoDataError, load_locomo

    if not data.is_file():
        raise typer.BadParameter(f"{data} does not exist or is not a file", param_hint="--data")
    try:
        load_locomo(data)  # fail before starting any service
    except LocomoDataError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from None
    try:
        run_locomo(data, out, conversations=conversations, data_dir=data_dir)
    except LocomoDataError as exc:  # an --out/data dir this benchmark did not make
        raise typer.BadParameter(str(exc), param_hint="--out") from None


@bench_app.command("suite")
def suite_cmd(
    out: Annotated[Path, typer.Option("--out", help="Where the suite's results.json and report.md go")],
    sets: Annotated[
        str,
        typer.Option(
            "--sets", help="all, or a comma-separated list of: locomo, longmemeval-dev, madial-zh, madial-en"
        ),
    ] = "all",
    data_root: Annotated[
        Path, typer.Option("--data-root", help="Where the dev files are (read, never copied)")
    ] = Path("../shared/bench"),
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Keep each set's cuemem state in DIR/<set> and reuse it when there"),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N conversations of each set")
    ] = None,
    questions: Annotated[
        int | None, typer.Option("--questions", min=1, help="Only the first N questions of each conversation")
    ] = None,
    no_answer: Annotated[
        bool, typer.Option("--no-answer/--no-no-answer", help="Also run the no-answer protocol")
    ] = True,
) -> None:
    """Every dev set in one run: one table of cuemem vs BM25/dense/hybrid with a do-no-harm verdict."""
    from bench.locomo_data import LocomoDataError, load_locomo
    from bench.suite import SETS, parse_sets, run_suite

    try:
        chosen = parse_sets(sets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sets") from None
    for name in chosen:  # fail before starting any service
        path = data_root / SETS[name].file
        if not path.is_file():
            raise typer.BadParameter(
                f"{path} does not exist or is not a file ({name})", param_hint="--data-root"
            )
        try:
            load_locomo(path)
        except LocomoDataError as exc:
            raise typer.BadParameter(f"{name}: {exc}", param_hint="--data-root") from None
    try:
        results = run_suite(
            data_root,
            out,
            chosen,
            data_dir=data_dir,
            conversations=limit,
            questions=questions,
            no_answer=no_answer,
        )
    except LocomoDataError as exc:  # a sample missing from a file, or an --out data dir it did not make
        raise typer.BadParameter(str(exc), param_hint="--data-root / --out") from None
    for name, r in results["sets"].items():
        for c in r["cells"]:
            typer.echo(f"{c['verdict']:>14}  {name} {c['metric']}: cuemem {c['cuemem']}")
    typer.echo(f"report: {out / 'report.md'}")


# The relevance model's commands live in their own module (bench.cli_ranker).
bench_app.command("small-stores")(small_stores_cmd)
bench_app.command("ranker-features")(ranker_features_cmd)
bench_app.command("train-ranker")(train_ranker_cmd)


def _csv_ints(value: str, option: str) -> list[int]:
    """``"1000,10_000"`` -> ``[1000, 10000]``; empty entries are skipped, so ``""`` is ``[]``."""
    try:
        return [int(v.replace("_", "")) for v in value.split(",") if v.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is not a comma-separated list of integers", param_hint=option
        ) from None


def _csv_positive_ints(value: str, option: str) -> list[int]:
    """As ``_csv_ints``, for options where zero, a negative number or no number at all makes no run."""
    out = _csv_ints(value, option)
    if not out or any(v <= 0 for v in out):
        raise typer.BadParameter(f"{value!r} must list positive integers", param_hint=option)
    return out


def _echo_verdicts(results: dict[str, Any], out: Path) -> None:
    """The closing lines of a benchmark that checks targets: one verdict per target, then the report."""
    for t in results["targets"]:
        typer.echo(f"{t['verdict']:>10}  {t['target']}: {t['measured']}")
    typer.echo(f"report: {out / 'report.md'}")


@bench_app.command("latency")
def latency_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for results.json and report.md")],
    sizes: Annotated[str, typer.Option("--sizes", help="Memories per measured user")] = "1000,10000,100000",
    queries: Annotated[int, typer.Option("--queries", min=10, help="Recall queries per user and mode")] = 200,
    clients: Annotated[int, typer.Option("--clients", min=1, help="Concurrent client threads")] = 4,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where the Qdrant shard goes (default: a temp dir)")
    ] = None,
    deterministic_1m: Annotated[
        bool, typer.Option("--deterministic-1m/--no-deterministic-1m", help="Also time the cue stage at 1M")
    ] = True,
    big_rows: Annotated[
        int, typer.Option("--big-rows", min=1000, help="Memories of the user of the deterministic scale test")
    ] = 1_000_000,
    hnsw: Annotated[bool, typer.Option("--hnsw/--no-hnsw", help="Re-measure after building HNSW")] = True,
    turns: Annotated[
        bool,
        typer.Option(
            "--turns/--no-turns",
            help="Give every user a conversation log and search it as recall does by default "
            "(--no-turns: memories only, as with CUEMEM_INDEX_TURNS off)",
        ),
    ] = True,
    turns_per_memory: Annotated[
        float,
        typer.Option(
            "--turns-per-memory",
            min=1.0,
            max=8.0,
            help="Turns in the log per memory, its source turn included",
        ),
    ] = 2.0,
    pool_size: Annotated[
        int, typer.Option("--pool-size", min=50, help="Distinct texts embedded with E5")
    ] = 2000,
    pg_admin: PgAdmin = DEFAULT_PG_ADMIN,
    redis_url: ScratchRedis = LATENCY_REDIS,  # working memory
    keep: Keep = False,
) -> None:
    """Recall latency per stage at 1k/10k/100k memories per user; the cue stage alone at 1M."""
    from bench.latency import LatencyConfig, run

    cfg = LatencyConfig(
        out=out,
        sizes=_csv_positive_ints(sizes, "--sizes"),
        queries=queries,
        clients=clients,
        data_dir=data_dir,
        deterministic_1m=deterministic_1m,
        big_rows=big_rows,
        hnsw=hnsw,
        turns=turns,
        turns_per_memory=turns_per_memory,
        pool_size=pool_size,
        pg_admin=pg_admin,
        redis_url=redis_url,
        keep=keep,
    )
    _echo_verdicts(run(cfg), out)


@bench_app.command("serve")
def serve_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for results.json and report.md")],
    workers: Annotated[str, typer.Option("--workers", help="API process counts to try")] = "1,2",
    clients: Annotated[int, typer.Option("--clients", min=1, help="Concurrent client threads")] = 4,
    seconds: Annotated[float, typer.Option("--seconds", min=5, help="Length of each run")] = 30.0,
    turns: Annotated[int, typer.Option("--turns", min=50, help="Synthetic turns ingested first")] = 600,
) -> None:
    """Recall throughput of `cuemem serve --workers N` on the embedded default."""
    from bench.serve import ServeConfig, run

    run(ServeConfig(out=out, workers=_csv_positive_ints(workers, "--workers"), clients=clients,
                    seconds=seconds, turns=turns))  # fmt: skip


@bench_app.command("ingest")
def ingest_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for results.json and report.md")],
    events: Annotated[int, typer.Option("--events", min=20, help="Turns published per worker count")] = 2000,
    workers: Annotated[str, typer.Option("--workers", help="Pipeline worker processes to try")] = "1,2,4",
    steady_seconds: Annotated[
        float, typer.Option("--steady-seconds", min=1, help="Length of the steady-load phase")
    ] = 30.0,
    steady_fraction: Annotated[
        float, typer.Option("--steady-fraction", min=0.05, max=1.0, help="Steady rate as a share of capacity")
    ] = 0.8,
    steady_rate: Annotated[
        float | None,
        typer.Option("--steady-rate", min=0.1, help="Steady rate in turns/s (instead of --steady-fraction)"),
    ] = None,
    noop_tasks: Annotated[
        int, typer.Option("--noop-tasks", min=100, help="No-op tasks per worker count")
    ] = 2000,
    pg_admin: PgAdmin = DEFAULT_PG_ADMIN,  # a fresh database per phase
    redis_url: ScratchRedis = INGEST_REDIS,  # broker and working memory
    keep: Keep = False,
) -> None:
    """Events/s through the whole pipeline at 1/2/4 workers vs raw embedding and a no-op task."""
    from bench.ingest import IngestConfig, run

    cfg = IngestConfig(
        out=out,
        events=events,
        workers=_csv_positive_ints(workers, "--workers"),
        steady_seconds=steady_seconds,
        steady_fraction=steady_fraction,
        steady_rate=steady_rate,
        noop_tasks=noop_tasks,
        pg_admin=pg_admin,
        redis_url=redis_url,
        keep=keep,
    )
    _echo_verdicts(run(cfg), out)


@bench_app.command("footprint")
def footprint_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for results.json, report.md and logs")],
    load_seconds: Annotated[float, typer.Option("--load-seconds", min=5, help="Length of the load")] = 60.0,
    idle_seconds: Annotated[float, typer.Option("--idle-seconds", min=5, help="Length of idle")] = 20.0,
    turns_per_s: Annotated[float, typer.Option("--turns-per-s", min=0.1, help="Turns published")] = 4.0,
    recalls_per_s: Annotated[float, typer.Option("--recalls-per-s", min=0.1, help="Recalls asked")] = 2.0,
    batch_every_s: Annotated[
        float, typer.Option("--batch-every-s", min=1, help="Seconds between import batches of 64 turns")
    ] = 20.0,
    pg_admin: PgAdmin = DEFAULT_PG_ADMIN,
) -> None:
    """RSS and CPU of each deployed process (API, worker, index owner, beat, Flower, Redis), idle
    and under load: what deploy/kubernetes/ sizes its containers from."""
    from bench.footprint import FootprintConfig, run

    run(FootprintConfig(out=out, load_seconds=load_seconds, idle_seconds=idle_seconds,
                        turns_per_s=turns_per_s, recalls_per_s=recalls_per_s,
                        batch_every_s=batch_every_s, pg_admin=pg_admin))  # fmt: skip
    typer.echo((out / "report.md").read_text())
