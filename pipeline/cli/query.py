"""`pipeline query` (one soft query, answered exactly) and `pipeline browse` (a stored query's answers as a page)."""

from __future__ import annotations

import click

from pipeline.cli.group import cli, echo_json, friendly, print_table
from pipeline.core.errors import printable

# `--explain` given without K: every answer shown (more than --top can show)
EVERY_SHOWN = 2**31 - 1


@cli.command("query", short_help="Answer one soft query exactly, with witnesses on request.")
@click.argument("text")
@click.option("--dataset", required=True, help="Data set whose names the query uses (e.g. cn15k, ppi5k).")
@click.option(
    "--graph", "graph", type=click.Choice(["train", "valid", "test"], case_sensitive=False), help="Observed graph to query."
)
@click.option(
    "--adjacency", type=click.Path(file_okay=False), help="A neural adjacency export to query (SRC)."
)
@click.option(
    "--top", default=20, show_default=True, type=click.IntRange(1), help="How many answers to show."
)
@click.option(
    "--cycle-cap",
    type=click.IntRange(1),
    default=None,
    help="At most this many candidates per cycle variable (the answer is then marked approximate).",
)
@click.option("--json", "as_json", is_flag=True, help='Print [{"eid", "name", "utility"}, ...] best first.')
@click.option("--explain", type=click.IntRange(0), default=0, is_flag=False, flag_value=EVERY_SHOWN, metavar="[K]",
              help="The witnesses of the top K answers shown (entity per variable, every atom's confidence, source, "
                   "value), as `answer --explain K` and pl.query(explain=K); --explain alone: every answer shown.")
@click.option("--calibration", "calibration_paths", multiple=True, type=click.Path(exists=True),
              help="A saved SRC calibration of `pipeline answer` (RUN/calibration/D-*.json and/or L-* folder).")
@friendly
def query_cmd(
    text: str,
    dataset: str,
    graph: str | None,
    adjacency: str | None,
    top: int,
    cycle_cap: int | None,
    as_json: bool,
    explain: int = 0,
    calibration_paths: tuple[str, ...] = (),
) -> None:
    """Answer one soft query TEXT exactly (max-plus search); deterministic, no graph store needed."""
    from pipeline.core.imports import importing, imports_settled

    importing()  # until imports_settled(): no garbage collection over the modules being imported (and,
    # before torch's import, OpenMP's idle threads set to sleep)
    from loaders import dataset_name
    from pipeline.engine import kernels
    from pipeline.stages.ask import ask

    imports_settled()
    with kernels.one_query():  # one query, then the process ends: no compiled form loaded for it
        ans = ask(text, dataset, graph=graph, adjacency=adjacency, top=top, cycle_cap=cycle_cap, explain=explain,
                  calibration=tuple(calibration_paths))
    if ans.approximate:
        click.echo("note: a cycle cap skipped candidates; utilities are lower bounds", err=True)
    if as_json:
        if ans.empty_reason:
            click.echo(ans.empty_reason, err=True)  # stdout stays one document
        echo_json([e.record for e in ans.explanations] if explain else ans.rows)
        return
    click.echo(printable(f"{ans.query}   [{dataset_name(dataset)}, {ans.source}; {ans.n_answers} answers]"))
    if ans.empty_reason:
        click.echo(printable(ans.empty_reason))
        return
    if explain:
        for e in ans.explanations:
            click.echo(printable(e.text))
        return
    print_table([{"rank": i + 1, **r} for i, r in enumerate(ans.rows)], ["rank", "eid", "name", "utility"])


@cli.command("browse", short_help="Write a page of a stored query's answers and witnesses.")
@click.argument("query_id")
@click.option("--html", "html_path", required=True, type=click.Path(path_type=str), help="The page to write.")
@click.option("--method", default=None, help="Whose answers (the method label, e.g. 'ukge_logi SRC'); needed when several.")
@click.option("--dataset", default=None, help="The query's data set, when the id is in several.")
@click.option("--set", "set_name", default=None, help="The query's set, when the id is in several.")
@click.option("--store", "store_uri", default=None, help="Store URI (default: PIPELINE_STORE or embedded).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@friendly
def browse_cmd(query_id: str, html_path: str, method: str | None, dataset: str | None, set_name: str | None,
               store_uri: str | None, as_json: bool) -> None:
    """An interactive page of a stored query's answers and their witnesses (neo4j-viz; the [browse] extra)."""
    from pipeline.stages.browse import browse

    rep = browse(query_id, html_path, method, dataset, set_name, store_uri)
    if as_json:
        echo_json(rep)
        return
    click.echo(f"{rep['query']}   [{rep['title']}, {rep['method']}]")
    click.echo(f"page: {rep['path']} ({rep['nodes']} nodes, {rep['edges']} relationships; answers: "
               f"{', '.join(rep['answers'])})")
