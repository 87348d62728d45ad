"""`pipeline train` (a backbone: UKGE, BEUrRE), `pipeline export` (its neural adjacency) and `pipeline train-qe`
(a query-embedding baseline)."""

from __future__ import annotations

from typing import Any

import click

from pipeline.cli.group import RegistryChoice, cli, echo_json, friendly, json_option, print_table
from pipeline.core.options import click_options, from_command
from pipeline.stages.options import ExportOptions, TrainOptions


@cli.command("train")
@click.argument("dataset")
@click_options(TrainOptions)
@json_option("Print the results document.")
@friendly
def train_cmd(dataset: str, as_json: bool, **given: Any) -> None:
    """Train an uncertain-KG embedding on DATASET's train facts; select on valid; report test MSE/MAE.

    A run directory that already holds a run is never started over silently: the same settings on the
    same data reuse a finished run and resume an unfinished one; other settings are refused (--resume
    continues a run with another epoch budget, --overwrite deletes it first)."""
    from pipeline.stages.train import train_dataset

    o = from_command(given, TrainOptions)
    done = train_dataset(dataset, o)
    res, out = done.results, str(done.path)
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
    for w in done.warnings():
        click.echo(f"warning: {w}")


@cli.command("export")
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


@cli.command("train-qe")
@click.argument("dataset")
@click.option("--model", "model_name", type=RegistryChoice("baselines"), required=True, help="`pipeline ls baselines`.")
@click.option("--train-queries", multiple=True, required=True, type=click.Path(path_type=str),
              help="Train query set(s); repeat to combine files (e.g. 10k 1p/2p/2i and 1.5k 2in/2il).")
@click.option("--valid-queries", required=True, type=click.Path(path_type=str), help="Valid query set (epoch selection).")
@click.option("--dim", type=int, default=400, show_default=True, help="Embedding dimension (and NE dimension).")
@click.option("--hidden", type=int, default=800, show_default=True, help="Hidden width of the MLPs.")
@click.option("--epochs", type=int, default=20, show_default=True)
@click.option("--lr", type=float, default=1e-4, show_default=True)
@click.option("--gamma", type=float, default=12.0, show_default=True, help="Margin of the scores.")
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.option("--negatives", type=int, default=128, show_default=True, help="Uniformly sampled negatives per query.")
@click.option("--batch-negatives", type=int, default=0, show_default=True,
              help="More negatives per query drawn from the other answers of its batch (pushes away entities that answer many queries).")
@click.option("--max-answers", type=int, default=32, show_default=True, help="Answers scored per query and step (random subset).")
@click.option("--loss", type=click.Choice(["weighted", "listwise", "weighted+listwise"]), default="weighted", show_default=True)
@click.option("--tnorm", type=click.Choice(["product", "godel", "lukasiewicz"]), default="product", show_default=True,
              help="LogicE's t-norm.")
@click.option("--eval-every", type=int, default=1, show_default=True, help="Epochs between valid evaluations.")
@click.option("--max-valid", type=int, default=0, show_default=True, help="Valid queries per type used for selection (0 = all).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None, help="cpu | cuda | cuda:N (default: cuda when present).")
@click.option("--threads", type=int, default=None, help="torch CPU threads (default: torch's).")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Run directory (re-running resumes).")
@click.option("--json", "as_json", is_flag=True, help="Print the results document.")
@friendly
def train_qe_cmd(dataset: str, model_name: str, train_queries: tuple[str, ...], valid_queries: str, dim: int, hidden: int,
                 epochs: int, lr: float, gamma: float, batch_size: int, negatives: int, batch_negatives: int, max_answers: int,
                 loss: str, tnorm: str, eval_every: int, max_valid: int, seed: int, device: str | None, threads: int | None, out_dir: str,
                 as_json: bool) -> None:
    """Train a query-embedding baseline (LogicE+NE or ConE+NE) on query sets; resumable."""
    import torch

    from pipeline.stages.train_qe import QEConfig, train_qe

    if threads:
        torch.set_num_threads(threads)
    cfg = QEConfig(dataset=dataset, model=model_name, train_queries=tuple(train_queries), valid_queries=valid_queries,
                   dim=dim, hidden=hidden, gamma=gamma, lr=lr, epochs=epochs, batch_size=batch_size,
                   negatives=negatives, batch_negatives=batch_negatives, max_answers=max_answers, loss=loss, tnorm=tnorm, eval_every=eval_every, max_valid=max_valid, seed=seed)
    results = train_qe(cfg, out_dir, device=device, progress=not as_json, log=lambda m: click.echo(m, err=True))
    if as_json:
        echo_json(results)
        return
    click.echo(f"{model_name}: best valid score {results['best_valid_score']:.2f} at epoch {results['best_epoch']}; "
               f"{results['train_queries']} train queries, {results['seconds_per_epoch']:.1f} s/epoch; run in {out_dir}")
