"""`pipeline answer` (a query set answered by a method: SRC over an export, or a baseline run) and
`pipeline evaluate` (the metrics tables of answers files). `answer`'s options are declared once, in
:class:`pipeline.methods.options.MethodOptions` and :class:`pipeline.stages.options.AnswerOptions`."""

from __future__ import annotations

from typing import Any

import click

from pipeline.cli.group import cli, echo_json, friendly, json_option, print_table
from pipeline.core.errors import PipelineError, printable
from pipeline.core.options import click_options, from_command
from pipeline.methods.options import MethodOptions
from pipeline.stages.options import AnswerOptions


@cli.command("answer", short_help="Answer a query set with a method (SRC by default).")
@click.argument("queries", type=click.Path(path_type=str), required=False)
@click_options(MethodOptions, AnswerOptions)
@click.option("--from-store", "from_store", is_flag=True,
              help="Answer the (:Query) nodes of --set in the store instead of a QUERIES file (SRC).")
@click.option("--set", "set_name", default=None,
              help="--from-store: the set of (:Query) nodes (default: typed, the queries created with only a text).")
@json_option()
@friendly
def answer_cmd(queries: str | None, from_store: bool, set_name: str | None, as_json: bool, **given: Any) -> None:
    """Answer a query set with a method: SRC on a neural adjacency export (default), or a query-embedding
    baseline run (--model); the same answers file (Parquet) either way. --from-store answers the (:Query)
    nodes of a set in the graph store and, with --write-back, writes the answers back to them."""
    from pipeline.core.imports import importing, imports_settled

    importing()  # until imports_settled(): no garbage collection over the modules being imported (and,
    # before torch's import, OpenMP's idle threads set to sleep)
    if given.get("adjacency"):  # before the imports below: the export's young cache files checked meanwhile
        from pipeline.formats.pair_cache import check_ahead

        check_ahead(given["adjacency"])
        if given.get("executor") in (None, "processes", "local") and not given.get("address"):
            # the compiled steps load beside the query set's read and the method's build (workers forked
            # from this process inherit them; a Ray cluster's actors load their own)
            from pipeline.formats.engine_index import load_kernels_ahead

            load_kernels_ahead(given["adjacency"], given.get("device"), None if from_store else queries)
    from pipeline.stages.answer import answer_queries

    imports_settled()  # before the query set's parse: its collections need not traverse the modules
    method = from_command(given, MethodOptions)
    how = from_command({**given, "progress": not as_json, "keep_heap": True}, AnswerOptions)
    if from_store:
        _answer_from_store(queries, set_name, method, how, as_json)
        return
    if queries is None:
        raise PipelineError("give a QUERIES file, or --from-store to answer the (:Query) nodes of the graph store")
    if set_name is not None:
        raise PipelineError("--set names a set of (:Query) nodes in the store: use it with --from-store")
    report = answer_queries(queries, method, how)
    if as_json:
        echo_json(report)
        return
    click.echo(f"{report['method']}: answers in {report['path']} ({report['seconds']:.1f} s)")
    if "delta" in report:
        click.echo(f"delta = {report['delta']:g} (chosen on the valid queries {how.valid_queries})")
    print_table([{"type": t, "queries": s["queries"], "seconds": f"{s['seconds']:.3f}", "queries/s": f"{s['queries_per_s']:.1f}"}
                 for t, s in report["throughput"].items()])
    _report_written(report, how.explain)


def _report_written(report: dict[str, Any], explain_k: int) -> None:
    if "written_back" in report:
        w = report["written_back"]
        click.echo(f"written back: {w['answers']} ANSWER relationships, {w['witnesses']} witnesses "
                   f"with {w['atoms']} atoms")
    if report.get("witnesses"):
        click.echo(f"witnesses of the top {explain_k} answers: {report['witnesses']}")


def _answer_from_store(queries: str | None, set_name: str | None, method: Any, how: Any, as_json: bool) -> None:
    """`answer --from-store`: the (:Query) nodes of a set, answered by the answering stage; texts that do
    not parse are reported one line each (and marked on their nodes), the others answered."""
    from pipeline.stages.stored_queries import TYPED_SET, answer_from_store

    if queries is not None:
        raise PipelineError(f"--from-store answers the queries of the store; drop the QUERIES file {queries}")
    report = answer_from_store(set_name or TYPED_SET, method, how)
    if as_json:
        echo_json(report)
        return
    for e in report["errors"]:
        click.echo(printable(f"query {e['qid']} ({e['text']!r}) not answered: {e['error']}"), err=True)
    if report["path"] is None:
        click.echo(f"no query of set {report['set']} parsed; nothing answered")
        return
    n_ok = sum(t["queries"] for t in report["throughput"].values())
    click.echo(f"{report['method']}: {n_ok} queries of set {report['set']} ({report['dataset']}) answered "
               f"in {report['seconds']:.1f} s, {len(report['errors'])} not parsed; answers in {report['path']}")
    _report_written(report, how.explain)


@cli.command("evaluate", short_help="Score answers files: metrics x100 per query type.")
@click.argument("answers", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (the reports).")
@click.option("--plot", "plot_file", type=click.Path(path_type=str), default=None, help="Write a PNG comparing the methods per type.")
@click.option("--update-docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Merge the tables into the results data in DIR (results.json, results_protocol.json, "
                   "results_counts.json; e.g. docs); `python tools/pages.py` renders the pages from it.")
@friendly
def evaluate_cmd(answers: str, as_json: bool, plot_file: str | None, docs_dir: str | None) -> None:
    """Metrics x100 per query type and averaged for an answers file or a directory of them.

    Saves <answers>.metrics.json and .metrics.md beside each answers file."""
    from pathlib import Path

    from pipeline.core.atomic import check_docs_folder
    from pipeline.stages.evaluate import (
        evaluate_answers,
        plot_methods,
        save_report,
        text_table,
        update_results,
        with_chance,
    )

    check_docs_folder(docs_dir, "update_docs")  # before any work: never a chain of folders made anywhere
    errors: list[str] = []
    # a folder goes on past a bad file (reported); a single file's error is the command's error
    reports = evaluate_answers(answers, errors if Path(answers).is_dir() else None)
    for e in errors:  # one bad file of a folder is reported, the others are still evaluated
        click.echo(f"error: {e} (skipped)", err=True)
    if not reports:
        raise PipelineError(f"{answers}: no answers file could be evaluated")
    for r in reports:
        save_report(r, Path(r["file"]).with_suffix(""))
    if docs_dir:
        from pipeline.stages.docs_data import recorded

        click.echo(recorded(update_results(reports, docs_dir)), err=True)
    if plot_file:
        by_method = {r["method"]: r["summary"] for r in reports}
        plot_methods(by_method, plot_file, title=", ".join(sorted({r["dataset"] for r in reports})))
    if as_json:
        echo_json(reports)
        return
    for r in reports:
        click.echo(f"{r['dataset']}  {r['method']}  ({sum(r['counts'].values())} queries: "
                   + ", ".join(f"{t} {n}" for t, n in r["counts"].items()) + ")")
        click.echo(text_table(with_chance(r)))  # MAP/NDCG chance: a random ranking of the same answers
        for name, by in (r.get("undefined") or {}).items():
            click.echo(f"{name} undefined on {by['all']} queries (one answer, or constant true or predicted utilities)")
        if r.get("paper_protocol"):
            avg = {m: v.get("avg") for m, v in r["paper_protocol"].items()}
            click.echo("paper protocol (ids break ties; comparison only): "
                       + ", ".join(f"{m} {v:.1f}" for m, v in avg.items() if v == v))
        click.echo()
