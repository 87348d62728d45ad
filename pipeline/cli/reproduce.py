"""`pipeline reproduce`: every stage of the paper's experiment (ingest, sample, train, export, answer with
SRC/D/L/D+L and the baselines, evaluate), each skipped when its output for the same inputs exists; and its
soft-requirements study."""

from __future__ import annotations

from typing import Any

import click

from pipeline.cli.group import cli, echo_json, friendly, print_table
from pipeline.core import jsontext
from pipeline.core.errors import PipelineError
from pipeline.core.options import click_options, declared, from_command
from pipeline.methods.options import LOptions
from pipeline.stages.reproduce import ReproduceConfig


@cli.command("reproduce", short_help="Run every stage of the paper's experiment on a data set.")
@click.argument("dataset")
@click.option("--out", "out_dir", type=click.Path(path_type=str), default=None,
              help="Work directory (default PIPELINE_HOME/reproduce/DATASET-sSEED); re-running resumes there.")
@click_options(ReproduceConfig)
@click.option("--docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Record the tables and this run in the results data in DIR (results*.json, e.g. docs); "
                   "`python tools/pages.py` renders the pages from it.")
@click.option("--store", "store_uri", default=None, help="Store URI (default: PIPELINE_STORE or embedded).")
@click.option("--run", "runs", multiple=True, help="MODEL=RUN_DIR: use this trained run instead of training MODEL.")
@click.option("--config", "config_file", type=click.Path(path_type=str), default=None,
              help="Replay a reproduction: its reproduce.json (or a JSON of these settings); options given besides override it.")
@click.option("--qe", "qe_settings", multiple=True,
              help="A baseline setting KEY=VALUE (MODEL.KEY=VALUE for one model), e.g. train_per_type=2000, epochs=4, "
                   "cone_ne.lr=3e-3 (defaults in docs/baselines.md).")
@click.option("--study", type=click.Choice(["main", "soft-requirements"], case_sensitive=False), default="main", show_default=True,
              help="soft-requirements: SRC on test sets with alpha zero|normal x beta equal|random (needs --run).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click_options(LOptions)  # calibration L's settings: `pipeline answer`'s declarations
@click.pass_context
@friendly
def reproduce_cmd(click_ctx: click.Context, dataset: str, out_dir: str | None, docs_dir: str | None,
                  store_uri: str | None, runs: tuple[str, ...], config_file: str | None, qe_settings: tuple[str, ...],
                  study: str, as_json: bool, **given: Any) -> None:
    """Ingest, sample, train, export, answer with SRC/D/L/D+L and evaluate DATASET; each stage is skipped
    when its output for the same inputs exists. --study soft-requirements runs the alpha/beta ablation."""
    from pipeline.core.atomic import check_docs_folder

    check_docs_folder(docs_dir, "docs")  # before the heavy imports and any stage
    from pipeline.core import config
    from pipeline.stages.evaluate import text_table
    from pipeline.stages.reproduce import PER_TYPE, reproduce

    if study == "soft-requirements":
        from pipeline.studies.soft_requirements import run_study

        if len(runs) != 1 or "=" not in runs[0]:
            raise PipelineError("--study soft-requirements needs one trained backbone: --run MODEL=RUN_DIR")
        from loaders import dataset_name
        from pipeline.models.registry import BACKBONES
        from pipeline.stages.reproduce import pretrained_runs

        model, _, run_dir = runs[0].partition("=")
        try:  # the name says which backbone the run is: a typo or another backbone's run is refused up front
            model = BACKBONES.canonical(model.strip())
        except PipelineError as exc:
            raise PipelineError(f"--run {runs[0]}: {exc}") from None
        pretrained_runs({model: run_dir}, (model,), dataset_name(dataset))
        seed = given["seed"]
        from pipeline.stages.reproduce import dataset_defaults

        threshold = given["threshold"] if given["threshold"] is not None else dataset_defaults(dataset)["threshold"]
        doc = run_study(dataset, out_dir or str(config.home() / "studies" / f"{dataset}-soft-requirements-s{seed}"),
                        runs[0].partition("=")[2], per_type=given["per_type"] or PER_TYPE, threshold=threshold, seed=seed,
                        store=store_uri, docs=docs_dir, log=lambda m: click.echo(m, err=True),
                        progress=not as_json)
        if as_json:
            echo_json(doc)
        else:
            click.echo(doc["table"])
        return

    l_given = {k: given.pop(k) for k in [d.name for d in declared(LOptions)]}
    given = {**given, "qe": _qe_overrides(qe_settings), "l_epochs": l_given.pop("l_epochs"),
             "l_settings": from_command(l_given, LOptions).l_settings()}
    if config_file:
        from click.core import ParameterSource

        def typed_here(name: str) -> bool:
            return click_ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

        param = {"qe": "qe_settings"}  # settings whose option has another parameter name
        overrides = {k: v for k, v in given.items() if k != "l_settings" and typed_here(param.get(k, k))}
        # L's settings typed on the command line go on top of the replayed ones, one by one
        l_typed = {k for k in l_given if typed_here(k)}
        if l_typed:
            saved = ReproduceConfig.from_file(config_file, dataset).l_settings
            kept = {k: v for k, v in saved.items() if k not in l_typed}  # a typed default drops the saved value
            overrides["l_settings"] = {**kept, **{k: v for k, v in given["l_settings"].items() if k in l_typed}}
        cfg = ReproduceConfig.from_file(config_file, dataset, overrides)
    else:
        cfg = ReproduceConfig(dataset, **given)
    pretrained = {}
    for item in runs:
        model, sep, path = item.partition("=")
        if not sep or not path:
            raise PipelineError(f"--run {item!r}: expected MODEL=RUN_DIR")
        if model.strip().lower() in (m.lower() for m in pretrained):
            raise PipelineError(f"--run {item}: a second run for {model.strip()}")
        pretrained[model.strip()] = path
    out = out_dir or str(config.home() / "reproduce" / f"{dataset}-s{cfg.seed}")
    summary = reproduce(cfg, out, docs_dir, store_uri, log=lambda m: click.echo(m, err=True), progress=True,
                        runs=pretrained)
    if as_json:
        echo_json(summary)
        return
    print_table([{"stage": s["stage"], "skipped": "yes" if s["skipped"] else "", "seconds": f"{s['seconds']:.1f}"}
                 for s in summary["stages"]])
    for r in summary["reports"]:
        click.echo(f"\n{r['dataset']}  {r['method']}")
        click.echo(text_table(r["summary"]))
    click.echo(f"\ntotal {summary['seconds']:.1f} s; work directory {summary['out']}")


def _qe_overrides(items: tuple[str, ...]) -> dict[str, Any]:
    """--qe KEY=VALUE / MODEL.KEY=VALUE items as ReproduceConfig.qe (values read as JSON when they parse, else
    as a number when they are one, ``nan`` and ``1e-3`` included, else as text; checked where the settings
    are declared, :func:`pipeline.stages.reproduce_baselines.qe_settings`)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"--qe {item!r}: expected KEY=VALUE or MODEL.KEY=VALUE")
        try:
            value = jsontext.loads(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
        model, dot, name = key.strip().rpartition(".")
        (out.setdefault(model, {}) if dot else out)[name] = value
    return out
