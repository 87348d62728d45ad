"""`pipeline sample` (soft queries drawn over the store, with exact ground truth) and `pipeline import-squk`."""

from __future__ import annotations

from typing import Any

import click

from pipeline.cli.group import cli, echo_json, friendly, json_option, print_table
from pipeline.core.options import click_options, from_command
from pipeline.stages.options import SampleOptions


@cli.command("sample", short_help="Sample soft queries with their exact answers from the store.")
@click.argument("dataset")
@click_options(SampleOptions)
@json_option("Print the summary as one JSON document.")
@friendly
def sample_cmd(dataset: str, as_json: bool, **given: Any) -> None:
    """Sample soft queries of DATASET by Cypher walks over the store, with exact ground truth (easy: train
    graph, hard: the split's graph); valid/test keep only useful queries."""
    from pipeline.stages.sample import sample_dataset

    res = sample_dataset(dataset, from_command({**given, "progress": not as_json}, SampleOptions))
    if as_json:
        echo_json(res)
        return
    print_table([{"type": r["type"], "kept": r["kept"], "walks": r["attempts"], "useful%": f"{100 * r['useful_share']:.1f}",
                  "store s": f"{r['store_seconds']:.2f}", "engine s": f"{r['engine_seconds']:.2f}",
                  "answers med/p90/max": f"{r['answers_median']:g}/{r['answers_p90']:g}/{r['answers_max']}"}
                 for r in res["types"]])
    click.echo(f"{res['file']}: {res['queries']} queries in {res['seconds']:.1f} s")


@cli.command("import-squk", short_help="Import published SQUK query files as query sets.")
@click.argument("dataset")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Folder of the query set files.")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@friendly
def import_squk_cmd(dataset: str, files: tuple[str, ...], out_dir: str, source: str | None, as_json: bool) -> None:
    """Import published SQUK query files ({split}_type{NNNN}..._soft_efo1_qaa.json) as query sets, with
    our engine's answers next to the published ones."""
    from loaders import load
    from pipeline.sampling.levels import kg_alpha_table
    from pipeline.stages.import_squk import import_squk

    kg = load(dataset, source=source)
    res = import_squk(list(files), kg, kg_alpha_table(kg), out_dir)
    if as_json:
        echo_json(res)
        return
    print_table(res, ["file", "type", "split", "queries", "same_as_published", "out"])
