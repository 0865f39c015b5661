"""`cuemem bench small-stores`, `ranker-features` and `train-ranker`: the relevance model's data,
fit and floor (registered on ``bench.cli.bench_app``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer


def small_stores_cmd(
    data: Annotated[Path, typer.Option("--data", help="A LoCoMo-shaped file (read, never changed)")],
    out: Annotated[
        Path, typer.Option("--out", help="The file of small stores to write (outside the repository)")
    ],
    extra: Annotated[
        int, typer.Option("--extra", min=0, help="Sessions beside a question's evidence in its store")
    ] = 2,
    seed: Annotated[int, typer.Option("--seed", help="The draw of the extra sessions")] = 30,
    questions: Annotated[
        int | None,
        typer.Option("--questions", min=1, help="Only the first N questions with evidence of each sample"),
    ] = None,
) -> None:
    """A LoCoMo-shaped file of small stores, one per question (its evidence and --extra sessions)."""
    from bench.locomo_data import LocomoDataError
    from bench.small_stores import write_small_stores

    if not data.is_file():
        raise typer.BadParameter(f"{data} does not exist or is not a file", param_hint="--data")
    if out.resolve() == data.resolve():
        raise typer.BadParameter("the stores would overwrite --data: give another path", param_hint="--out")
    try:
        counts = write_small_stores(data, out, extra, seed, questions)
    except LocomoDataError as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from None
    except OSError as exc:
        raise typer.BadParameter(str(exc), param_hint="--out") from None
    typer.echo(
        f"{counts['questions']} stores of {counts['sessions']} sessions in all "
        f"({counts['left_out']} questions left out: no place in the no-answer order): {out}"
    )


def ranker_features_cmd(
    data: Annotated[Path, typer.Option("--data", help="A LoCoMo-shaped file (read, never copied)")],
    out: Annotated[Path, typer.Option("--out", help="The features file (JSON lines) to write")],
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="cuemem state to ingest into, reused when it holds the data")
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="The set's name in the file (default: the data file's stem)")
    ] = None,
    samples: Annotated[
        int | None,
        typer.Option("--samples", min=1, help="Only N samples, drawn with --seed (the training subset)"),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="The draw of --samples")] = 30,
    sample_ids: Annotated[
        str | None, typer.Option("--sample-ids", help="Only these comma-separated sample ids (file order)")
    ] = None,
    questions: Annotated[
        int | None, typer.Option("--questions", min=1, help="Only the first N questions of each sample")
    ] = None,
    foreign: Annotated[
        bool,
        typer.Option(
            "--no-answer/--no-no-answer", help="Also ask each sample's questions of the next sample's user"
        ),
    ] = True,
) -> None:
    """Each question's candidates from every recall path, with features and labels (train-ranker's input)."""
    from bench.locomo_data import LocomoDataError, load_locomo
    from bench.ranker_features import dump_features, seeded_samples

    if not data.is_file():
        raise typer.BadParameter(f"{data} does not exist or is not a file", param_hint="--data")
    if samples is not None and sample_ids is not None:
        raise typer.BadParameter("give --samples or --sample-ids, not both", param_hint="--samples")
    try:
        load_locomo(data)
        chosen = (
            seeded_samples(data, samples, seed)
            if samples is not None
            else [s.strip() for s in sample_ids.split(",") if s.strip()]
            if sample_ids is not None
            else None
        )
        counts = dump_features(
            data, out, data_dir, name=name or data.stem, samples=chosen, questions=questions, foreign=foreign
        )
    except (LocomoDataError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--data / --samples") from None
    typer.echo(
        f"{counts['questions']} questions, {counts['candidates']} candidates, "
        f"{counts['relevant']} relevant: {out}"
    )


def _model_file(path: Path) -> Any:
    """A relevance model file, read as recall reads one; a clear error naming the file if not."""
    import json

    from shared.recall.relevance import RelevanceModel

    try:
        return RelevanceModel.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:  # ModelFileError is a ValueError
        raise typer.BadParameter(f"{path}: {exc}", param_hint="--prior") from None


def train_ranker_cmd(
    train: Annotated[
        list[Path] | None,
        typer.Option("--train", help="A features file of the training split (repeatable)"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="The model file to write")] = Path(
        "shared/data/relevance-model.json"
    ),
    dev: Annotated[
        list[Path] | None,
        typer.Option("--dev", help="A features file of a dev set to choose on (repeatable)"),
    ] = None,
    report: Annotated[
        Path | None, typer.Option("--report", help="Also write the whole report (JSON) here")
    ] = None,
    compare_lightgbm: Annotated[
        bool,
        typer.Option(
            "--compare-lightgbm", help="Also fit LightGBM on the same rows and report its dev numbers"
        ),
    ] = False,
    prior: Annotated[
        Path | None,
        typer.Option(
            "--prior",
            help="The model file in service: each fit is also blended with it, and the choice keeps "
            "every dev set's headline metrics and no-answer share at least its own (needs --dev); "
            "when none gains, nothing is written",
        ),
    ] = None,
    refloor_model: Annotated[
        Path | None,
        typer.Option(
            "--refloor",
            help="Fit nothing: choose only the floor of this model file again on the --dev sets "
            "(its weights stay) and write it to --out",
        ),
    ] = None,
    extend_floor_model: Annotated[
        Path | None,
        typer.Option(
            "--extend-floor",
            help="Fit nothing: choose this model file's floor for pools smaller than its "
            "min_candidates on the --dev sets' (`cuemem bench small-stores`), as its floor was "
            "chosen (no set's own any@5, all@5 or all@10 down by more than 0.01), and write it to --out",
        ),
    ] = None,
) -> None:
    """Fit the relevance model on the training split's features, choose on the dev sets', write it."""
    import json

    from bench.ranker import train as train_model
    from bench.ranker_floor import refloor

    if (
        sum(1 for given in (bool(train), refloor_model is not None, extend_floor_model is not None) if given)
        != 1
    ):
        raise typer.BadParameter(
            "give one of --train files to fit, --refloor MODEL or --extend-floor MODEL", param_hint="--train"
        )
    models = (refloor_model, extend_floor_model, prior)
    for path in [*(train or []), *(dev or []), *(p for p in models if p is not None)]:
        if not path.is_file():
            raise typer.BadParameter(
                f"{path} does not exist or is not a file",
                param_hint="--train / --dev / --refloor / --extend-floor / --prior",
            )
    if prior is not None and not train:
        raise typer.BadParameter(
            "--prior blends fits: give it with --train, not --refloor or --extend-floor", param_hint="--prior"
        )
    if extend_floor_model is not None:
        _extend_floor(extend_floor_model, dev or [], out, report)
        return
    if prior is not None and not dev:
        raise typer.BadParameter(
            "give --dev sets to compare the fits with the prior on", param_hint="--prior"
        )
    prior_model = _model_file(prior) if prior is not None else None
    from bench.ranker_lightgbm import compare_boosted

    try:
        if refloor_model is not None:
            result = refloor(refloor_model, dev or [], out)
        else:
            result = train_model(train or [], dev or [], out, prior=prior_model)
        if compare_lightgbm and train:
            result["lightgbm"] = compare_boosted(train, dev or [])
    except ValueError as exc:
        hint = "--prior" if str(exc).startswith("prior:") else "--train / --dev"
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if result.get("kept_prior"):
        typer.echo(f"no fit keeps every dev number of {result['kept_prior']} and gains: nothing written")
        return
    share = f", {result['prior']['weight']} of {result['prior']['version']}" if result.get("prior") else ""
    if result.get("on_top_l2") is not None:
        share = f" (on top of {result['prior']['version']}, L2 {result['on_top_l2']})"
    typer.echo(f"model {result['version']}: C {result['C']}{share}, min_relevance {result['min_relevance']}")
    for name, numbers in result["dev_at_min_relevance"].items():
        typer.echo(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in numbers.items()))
    for objective, sets in result.get("lightgbm", {}).items():
        for name, numbers in sets.items():
            typer.echo(f"  lightgbm {objective} {name}: " + ", ".join(f"{k} {v}" for k, v in numbers.items()))
    typer.echo(f"written: {out}")


def _extend_floor(model: Path, dev: list[Path], out: Path, report: Path | None) -> None:
    import json

    from bench.ranker_floor import extend_floor

    try:
        result = extend_floor(model, dev, out)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--extend-floor / --dev") from None
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    typer.echo(
        f"model {result['version']}: pools of {result['small_min_candidates']} to "
        f"{result['min_candidates'] - 1} candidates get the floor {result['small_min_relevance']} "
        f"(larger ones {result['min_relevance']})"
    )
    for name, check in result["sets"].items():
        at, base = check["at_floor"], check["without_floor"]
        typer.echo(
            f"  {name}: {check['own']} own questions (fewest candidates {check['fewest_candidates']}), "
            f"any@5 {base['any@5']} -> {at['any@5']}, all@10 {base['all@10']} -> {at['all@10']}; "
            f"{check['no_answer']} no-answer questions, {at['no_answer_empty']:.1%} left empty"
        )
    typer.echo(f"written: {out}")
