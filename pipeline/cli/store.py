"""`pipeline ls`, `pipeline store start|stop|status`, `pipeline cypher`, `pipeline ingest`, `pipeline stats`
and `pipeline synth`: the registries, the graph store and what goes into it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from pipeline.cli.group import cli, echo_json, friendly, json_option, print_table
from pipeline.core.options import click_options, from_command
from pipeline.core.registry import REGISTRIES
from pipeline.stages.options import IngestOptions


@cli.command("ls", short_help="List the registered components of one kind.")
@click.argument("what", type=click.Choice(list(REGISTRIES), case_sensitive=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@friendly
def ls_cmd(what: str, as_json: bool) -> None:
    """List registered components (tables generated from the registries)."""
    from pipeline.core.registry import registry_rows

    rows = registry_rows(what)
    if as_json:
        echo_json(rows)
    else:
        print_table(rows)


@cli.group("store", short_help="Start, stop or inspect the embedded FalkorDB server.")
def store_group() -> None:
    """Manage the embedded FalkorDB server (data under PIPELINE_HOME/store)."""


@store_group.command("start", short_help="Start the embedded server on loopback.")
@click.option("--port", type=int, default=None,
              help="Listen on this loopback port (default: the one used last, unless taken; else a free one).")
@friendly
def store_start_cmd(port: int | None) -> None:
    """Start the embedded server on loopback (no-op when it runs already); it requires its password."""
    from pipeline.store import embedded

    info, started = embedded.ensure_running(port=port)
    state = "started" if started else "already running"
    click.echo(f"{state}: {info.uri} (pid {info.pid}, data {info.data_dir})")


@store_group.command("stop", short_help="Stop the embedded server.")
@friendly
def store_stop_cmd() -> None:
    """Stop the embedded server (its append-only file is flushed first)."""
    from pipeline.store import embedded

    click.echo("stopped" if embedded.stop() else "not running")


@store_group.command("status", short_help="Say whether the embedded server runs, and where.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@friendly
def store_status_cmd(as_json: bool) -> None:
    """Whether the embedded server runs, where, and how another client logs in (never the password). A
    server that does not answer is told apart: loading its append-only file, busy, suspended (SIGSTOP),
    hung (deadlocked), or not running (and why its last server ended)."""
    from dataclasses import asdict

    from pipeline.store import auth, embedded

    st = embedded.server_state()
    info = st.info
    folder = Path(info.data_dir) if info else embedded.store_dir()
    login = {"user": auth.DATA_USER, "credentials_file": str(auth.credentials_path(folder))}
    if as_json:
        echo_json({"running": st.state == "running", "state": st.state, **(asdict(info) if info else {}),
                   **({"note": st.note} if st.note else {}), "auth": login})
    elif info is None:
        click.echo(f"not running (data {embedded.store_dir()}){': ' + st.note if st.note else ''}")
    elif st.state != "running":
        click.echo(f"{st.state}: {info.uri} (pid {info.pid}, data {info.data_dir}){': ' + st.note if st.note else ''}")
    else:
        click.echo(f"running: {info.uri} (pid {info.pid}, data {info.data_dir}){': ' + st.note if st.note else ''}")
        click.echo(
            f"log in as user '{login['user']}' with the password in {login['credentials_file']} "
            "(readable by you only); `pipeline cypher` does it for you"
        )


@cli.command("cypher", short_help="Run one Cypher statement on the store and print its rows.")
@click.argument("statement")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A query parameter $NAME (VALUE read as JSON when it is JSON, else a string); repeatable.")
@click.option("--store", "store_uri", default=None, help="embedded (default) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON document.")
@click.option("--timeout", "timeout_s", type=float, default=None,
              help="Seconds the server lets it run (default 60, at most 600); a write stopped there is not applied.")
@friendly
def cypher_cmd(statement: str, params: tuple[str, ...], store_uri: str | None, as_json: bool,
               timeout_s: float | None) -> None:
    """Run one Cypher STATEMENT on the project's store (authenticated) and print its rows, and what a
    write changed. Example: pipeline cypher "MATCH (q:Query {dataset: $d}) RETURN q.qid, q.text LIMIT 5" --param d=ppi5k"""
    from pipeline.store import run_cypher
    from pipeline.store.statement import cell, counters_line, parse_params

    values = parse_params(params)  # checked before the store is started
    done = run_cypher(statement, values, store_uri, timeout_s)
    if as_json:
        echo_json(done.rows)
        if done.counters:
            click.echo(counters_line(done.counters), err=True)
        return
    if done.rows or not done.counters:
        print_table([{k: cell(v) for k, v in r.items()} for r in done.rows])
    if done.counters:
        click.echo(counters_line(done.counters))


@cli.command("ingest", short_help="Load a data set's observed KG into the graph store.")
@click.argument("dataset")
@click.option("--source", default=None, help="A benchmark: the local folder holding its files.")
@click.option("--from", "from_path", default=None, help="Your own KG: a folder with train/valid/test files or ONE "
              "file (TSV, CSV or Parquet; head, relation, tail, confidence as names). Records DATASET.")
@click.option("--from-store", "from_store", default=None, help="Your own KG in a graph store (URI as --store).")
@click_options(IngestOptions)
@json_option("Print the report as one JSON document.")
@friendly
def ingest_cmd(dataset: str, source: str | None, from_path: str | None, from_store: str | None, as_json: bool,
               **given: Any) -> None:
    """Load the observed KG of DATASET into the graph store (idempotent; a killed run can be re-run).
    With --from/--from-store, first record DATASET as your own uncertain KG (see README)."""
    from dataclasses import asdict

    from pipeline.stages.user_ingest import ingest_benchmark, ingest_user

    o = from_command({**given, "progress": not as_json}, IngestOptions)
    if from_path or from_store:
        rep = ingest_user(dataset, from_path=from_path, from_store=from_store, options=o)
        if as_json:
            echo_json(rep)
            return
        rows = rep["rows"] or {}
        print_table([{"dataset": dataset, "entities": rep["entities"], "relations": rep["relations"],
                      **{f"rows {k}": v for k, v in rows.items()}, "duplicates": rep["duplicate_rows"]}])
        state = "unchanged" if rep["unchanged"] else "recorded"
        sr = rep["store_report"]
        done = "unchanged" if sr["skipped"] else "replaced" if sr["replaced"] else "loaded"
        click.echo(f"{state}: {rep['record']} (source {rep['source']}, sha256 {rep['checksum'][:16]}); "
                   f"store {rep['store']}: {done}")
        _echo_stale(dataset, sr["stale_sets"], sr["stale_writebacks"])
        return
    report, where = ingest_benchmark(dataset, source, o.store, o.batch_size, progress=o.progress)
    if as_json:
        echo_json({**asdict(report), "store": where})
        return
    if report.skipped:
        click.echo(f"{dataset}: already in {where}, unchanged ({report.facts} facts)")
        return
    print_table(
        [
            {
                "dataset": report.dataset,
                "entities": report.entities,
                "relations": report.relations,
                "facts": report.facts,
                "seconds": f"{report.seconds:.2f}",
                "facts/s": f"{report.facts_per_s:,.0f}",
                "method": report.method,
            }
        ]
    )
    click.echo(f"{'replaced' if report.replaced else 'loaded'} into {where}")
    _echo_stale(dataset, report.stale_sets, report.stale_writebacks)


def _echo_stale(dataset: str, sets: Sequence[str], writebacks: Sequence[Sequence[str]]) -> None:
    """After a replacing ingest: what in the store was made from another version of the data set."""
    if sets:
        click.echo(f"stale (made from another version of '{dataset}', now refused): {len(sets)} query "
                   f"set(s) in the store: {', '.join(sets)}; sample again (`pipeline sample {dataset} ...`)")
    if writebacks:
        listed = ", ".join(f"{s} [{m}]" for s, m in writebacks)
        click.echo(f"stale (made from another version of '{dataset}', now refused): {len(writebacks)} "
                   f"write-back(s): {listed}; answer and write back again on a new sample")


@cli.command("stats", short_help="Print a data set's counts and alpha levels, from the store.")
@click.argument("dataset")
@click.option(
    "--store",
    "store_uri",
    default=None,
    help="embedded (default) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@friendly
def stats_cmd(dataset: str, store_uri: str | None, as_json: bool) -> None:
    """Counts and per-relation alpha levels, read from the store.

    train/valid/test: distinct facts per nested graph; p25/p50/p75 (low/normal/high alpha): percentiles of
    ALL published rows of train+val+test, duplicates kept (the SQUK benchmark's definition)."""
    from pipeline.store import open_store
    from pipeline.store.stats import dataset_stats

    with open_store(store_uri) as store:
        st = dataset_stats(store, dataset)
    if as_json:
        echo_json(st.to_json())
        return
    click.echo(
        f"{st.dataset}: {st.entities} entities, {st.relations} relations, facts "
        f"train {st.facts['train']} / valid {st.facts['valid']} / test {st.facts['test']}"
    )
    fmt = lambda v: "" if v is None else f"{v:.4f}"  # noqa: E731
    print_table(
        [
            {
                "rid": r.rid,
                "relation": r.name,
                "train": r.train,
                "valid": r.valid,
                "test": r.test,
                "p25 (low)": fmt(r.p25),
                "p50 (normal)": fmt(r.p50),
                "p75 (high)": fmt(r.p75),
            }
            for r in st.per_relation
        ]
    )
    click.echo("train/valid/test: distinct facts per nested graph; p25/p50/p75: alpha levels, percentiles of "
               "all published rows of train+val+test (duplicates kept; SQUK's definition)")


@cli.command("synth", short_help="Generate a synthetic uncertain KG and record it as a data set.")
@click.argument("name")
@click.option("--entities", type=int, required=True, help="Number of entities N (each gets at least one fact).")
@click.option("--relations", type=int, required=True, help="Number of relations R.")
@click.option("--facts", type=int, required=True, help="Number of distinct (h, r, t) facts F.")
@click.option("--like", type=click.Choice(["ppi5k", "cn15k"], case_sensitive=False), default="ppi5k", show_default=True,
              help="Draw confidences like this data set's train facts.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generator and of the split.")
@click.option("--split", default="0.8,0.1,0.1", show_default=True, help="train,valid,test fractions.")
@click.option("--out", type=click.Path(path_type=str), default=None, help="TSV file (default PIPELINE_HOME/synth/NAME.tsv).")
@click.option("--store", "store_uri", default=None, help="embedded (default) | falkordb://h:p | bolt://h:p | neo4j://h:p")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@friendly
def synth_cmd(name: str, entities: int, relations: int, facts: int, like: str, seed: int, split: str,
              out: str | None, store_uri: str | None, as_json: bool) -> None:
    """Generate a synthetic uncertain KG (power-law degrees, confidences like PPI5k's or CN15k's) and record
    it as the user data set NAME through `pipeline ingest NAME --from FILE`."""
    from pipeline.stages.synth import synth_dataset

    rep = synth_dataset(name, entities, relations, facts, like=like, out=out,
                        options=IngestOptions(seed=seed, split=split, store=store_uri, progress=not as_json))
    if as_json:
        echo_json(rep)
        return
    rows = rep["rows"] or {}
    print_table([{"dataset": name, "entities": rep["entities"], "relations": rep["relations"],
                  **{f"rows {k}": v for k, v in rows.items()}, "like": like}])
    click.echo(f"{'unchanged' if rep['unchanged'] else 'recorded'}: {rep['record']} (from {rep['file']}); "
               f"store {rep['store']}")


def main() -> None:
    cli(prog_name="pipeline")


if __name__ == "__main__":
    main()
