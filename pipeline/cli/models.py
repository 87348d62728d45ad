"""`pipeline train` (a backbone: UKGE, BEUrRE), `pipeline export` (its neural adjacency) and `pipeline train-qe`
(a query-embedding baseline)."""

from __future__ import annotations

from typing import Any

import click

from pipeline.baselines.settings import QEConfig
from pipeline.cli.group import RegistryChoice, cli, echo_json, friendly, json_option, print_table
from pipeline.core.options import click_options, from_command
from pipeline.stages.options import ExportOptions, TrainOptions


@cli.command("train", short_help="Train an uncertain-KG embedding on a data set's facts.")
@click.argument("dataset")
@click_options(TrainOptions)
@click.option("--docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Record the run's row in DIR/results_backbones.json (e.g. docs; `python tools/pages.py` "
                   "renders the results pages from it).")
@json_option("Print the results document.")
@friendly
def train_cmd(dataset: str, as_json: bool, docs_dir: str | None, **given: Any) -> None:
    """Train an uncertain-KG embedding on DATASET's train facts; select on valid; report test MSE/MAE and
    the link-prediction figures (filtered MRR, hits@1/3/10) on valid and test.

    A run directory that already holds a run is never started over silently: the same settings on the
    same data reuse a finished run and resume an unfinished one; other settings are refused (--resume
    continues a run with another epoch budget, --overwrite deletes it first)."""
    from pipeline.stages.train import train_dataset

    o = from_command(given, TrainOptions)
    done = train_dataset(dataset, o)
    res, out = done.results, str(done.path)
    if docs_dir is not None:
        from pipeline.stages.docs_data import record_backbone_run, recorded

        click.echo(recorded([record_backbone_run(docs_dir, done.docs_row(_train_command(dataset, o)))]), err=True)
    if as_json:
        echo_json({**res, "run_dir": str(out)})
        return
    lines = done.summary_lines(o)
    click.echo("\n".join(lines[:-1]))  # what was chosen (a small graph's batch size is not the model's default)
    print_table([
        {"split": k, "n": v["n"], "MSE": f"{v['mse']:.5f}", "MAE": f"{v['mae']:.5f}"}
        for k, v in res.items()
        if isinstance(v, dict) and "mse" in v
    ])
    click.echo(lines[-1])
    if rows := done.link_prediction_rows():
        click.echo("link prediction, filtered, as the unKR benchmark computes it (its tables rank the tails):")
        print_table(rows)
    for w in done.warnings():
        click.echo(f"warning: {w}")


def _train_command(dataset: str, o: TrainOptions) -> str:
    """The command line of a training, its given settings written out (the run directory and the flags that
    only decide what happens to an existing one left out)."""
    from pipeline.core.options import declared

    parts = ["pipeline", "train", dataset]
    for d in declared(TrainOptions):
        value = getattr(o, d.name)
        if not d.option.cli or d.name in ("out", "resume", "overwrite", "source") or value in (None, False):
            continue
        parts += [d.flag] if value is True else [d.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return " ".join(parts)


@cli.command("export", short_help="Write a trained run's predicted facts as Arrow files.")
@click.argument("run_dir", type=click.Path(path_type=str))
@click_options(ExportOptions)
@json_option("Print the manifest.")
@friendly
def export_cmd(run_dir: str, as_json: bool, **given: Any) -> None:
    """Write the predicted neural adjacency of a trained run as Arrow files (one per relation)."""
    from pipeline.stages.export import export_adjacency, export_summary

    man = export_adjacency(run_dir, from_command({**given, "progress": not as_json}, ExportOptions))
    line, warning = export_summary(man)
    if warning:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        echo_json(man)
        return
    print_table(
        [
            {"relation": x["relation"], "facts": x["nnz"], "MB": f"{x['bytes'] / 1e6:.2f}"}
            for x in man["relations"]
        ]
    )
    click.echo(line)
    if "pruning" in man:  # a box model: exact pruned scoring (pipeline.models.box_bounds)
        p = man["pruning"]
        click.echo(
            f"box bounds: {p['blocks_pruned']:,} of {p['block_pairs']:,} block pairs pruned "
            f"({p['pruned_share']:.1%}); {p['scored_share']:.2%} of all pairs bounded one by one, "
            f"{p.get('exact_share', p['scored_share']):.2%} scored in full"
        )


@cli.command("train-qe", short_help="Train a query-embedding baseline on query sets.")
@click.argument("dataset")
@click.option("--model", "model_name", type=RegistryChoice("baselines"), required=True, help="`pipeline ls baselines`.")
@click.option("--train-queries", multiple=True, required=True, type=click.Path(path_type=str),
              help="Train query set(s); repeat to combine files (e.g. 10k 1p/2p/2i and 1.5k 2in/2il).")
@click.option("--valid-queries", required=True, type=click.Path(path_type=str), help="Valid query set (epoch selection).")
@click_options(QEConfig)
@click.option("--device", default=None, help="cpu | cuda | cuda:N (default: cuda when present).")
@click.option("--threads", type=int, default=None,
              help="torch CPU threads (default: torch's; at most 4 per core this process may run on).")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Run directory (re-running resumes).")
@click.option("--json", "as_json", is_flag=True, help="Print the results document.")
@friendly
def train_qe_cmd(dataset: str, model_name: str, train_queries: tuple[str, ...], valid_queries: str, device: str | None,
                 threads: int | None, out_dir: str, as_json: bool, **given: Any) -> None:
    """Train a query-embedding baseline (LogicE+NE or ConE+NE) on query sets; resumable."""
    from pipeline.core.checks import check_device

    device = check_device(device, "--device")
    if threads is not None:
        from pipeline.core import limits

        limits.check_count("threads", threads)  # 100,000 once started 32,212 threads and starved the machine
    cfg = from_command({**given, "dataset": dataset, "model": model_name, "train_queries": tuple(train_queries),
                        "valid_queries": valid_queries}, QEConfig)
    import torch

    from pipeline.stages.train_qe import train_qe

    if threads:
        torch.set_num_threads(threads)
    results = train_qe(cfg, out_dir, device=device, progress=not as_json, log=lambda m: click.echo(m, err=True))
    if as_json:
        echo_json(results)
        return
    click.echo(f"{model_name}: best valid score {results['best_valid_score']:.2f} at epoch {results['best_epoch']}; "
               f"{results['train_queries']} train queries, {results['seconds_per_epoch']:.1f} s/epoch; run in {out_dir}")
