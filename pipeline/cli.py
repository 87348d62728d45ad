"""The `pipeline` command line (design section 5). Each command is a thin shell over one stage module;
stage modules are imported lazily so `pipeline ls` stays instant and the store never pulls in torch.

Every PipelineError becomes one line on stderr and exit code 2; `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from pipeline.errors import PipelineError


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn typed errors into one clear line and exit code 2 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PipelineError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


def print_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    """A plain aligned text table on stdout."""
    if not rows:
        click.echo("(none)")
        return
    columns = columns or list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def echo_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="soft-queries")
def cli() -> None:
    """Soft queries over uncertain knowledge graphs: ingest, sample, train, export, answer, evaluate."""


# ------------------------------------------------------------------------------------------------------ ls


@cli.command("ls")
@click.argument("what", type=click.Choice(["datasets", "models", "query-types", "metrics"]))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def ls_cmd(what: str, as_json: bool) -> None:
    """List registered components (tables generated from the registries)."""
    rows = registry_rows(what)
    if as_json:
        echo_json(rows)
    else:
        print_table(rows)


def registry_rows(what: str) -> list[dict[str, Any]]:
    """The rows `pipeline ls WHAT` prints, straight from each registry."""
    if what == "datasets":
        from loaders import REGISTRY

        return [
            {
                "name": s.name,
                "domain": s.domain,
                "entities": s.n_entities,
                "relations": s.n_relations,
                "train": s.facts.get("train"),
                "val": s.facts.get("val"),
                "test": s.facts.get("test"),
                "source": s.source_url,
            }
            for s in REGISTRY.values()
        ]
    if what == "models":
        from pipeline.models import MODELS

        return [{"name": name, "description": cls.description} for name, cls in MODELS.items()]
    if what == "query-types":
        from pipeline.query.types import QUERY_TYPES

        return [{"name": qt.name, "train": "yes" if qt.train else "", "text": qt.text} for qt in QUERY_TYPES.values()]
    if what == "metrics":
        from pipeline.metrics import METRICS

        return [
            {"name": m.name, "range": f"[{m.lower}, {m.upper}]", "increasing": m.increasing, "description": m.description}
            for m in METRICS.values()
        ]
    raise PipelineError(f"nothing to list for {what}")


# --------------------------------------------------------------------------- store and ingest (foundation)


@cli.group("store")
def store_group() -> None:
    """Manage the embedded FalkorDB server (data under PIPELINE_HOME/store)."""


@store_group.command("start")
@click.option(
    "--bolt-port",
    type=int,
    default=None,
    help="Also serve Bolt on this port (< 32768; 0 = a free one). FalkorDB's Bolt is experimental: it always "
    "uses the graph 'falkordb'.",
)
@_friendly
def store_start_cmd(bolt_port: int | None) -> None:
    """Start the embedded server on a free loopback port (no-op when it runs already)."""
    from pipeline.store import embedded

    was = embedded.status()
    info = was or embedded.start(bolt_port=bolt_port)
    state = "already running" if was else "started"
    bolt = f", bolt://{info.host}:{info.bolt_port}" if info.bolt_port else ""
    click.echo(f"{state}: {info.uri}{bolt} (pid {info.pid}, data {info.data_dir})")


@store_group.command("stop")
@_friendly
def store_stop_cmd() -> None:
    """Save the data and stop the embedded server."""
    from pipeline.store import embedded

    click.echo("stopped" if embedded.stop() else "not running")


@store_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def store_status_cmd(as_json: bool) -> None:
    """Whether the embedded server runs, and where."""
    from dataclasses import asdict

    from pipeline.store import embedded

    info = embedded.status()
    if as_json:
        echo_json({"running": info is not None, **(asdict(info) if info else {})})
    elif info is None:
        click.echo(f"not running (data {embedded.store_dir()})")
    else:
        bolt = f", bolt://{info.host}:{info.bolt_port}" if info.bolt_port else ""
        click.echo(f"running: {info.uri}{bolt} (pid {info.pid}, data {info.data_dir})")


@cli.command("ingest")
@click.argument("dataset")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option(
    "--store",
    "store_uri",
    default=None,
    help="embedded (default) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p",
)
@click.option(
    "--batch-size", type=int, default=10_000, show_default=True, help="Rows per UNWIND batch (Cypher path)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@_friendly
def ingest_cmd(
    dataset: str, source: str | None, store_uri: str | None, batch_size: int, as_json: bool
) -> None:
    """Load the observed KG of DATASET into the graph store (idempotent; a killed run can be re-run)."""
    from dataclasses import asdict

    from loaders import load
    from pipeline.store import open_store
    from pipeline.store.ingest import ingest

    kg = load(dataset, source=source)  # validated before the store is touched
    with open_store(store_uri) as store:
        report = ingest(kg, store, batch_size=batch_size, progress=not as_json)
        where = store.uri
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


@cli.command("stats")
@click.argument("dataset")
@click.option(
    "--store",
    "store_uri",
    default=None,
    help="embedded (default) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def stats_cmd(dataset: str, store_uri: str | None, as_json: bool) -> None:
    """Counts and per-relation confidence percentiles (the low/normal/high alpha levels), read from the store."""
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


# -------------------------------------------------------------------------- query language and engine (SRC)


@cli.command("query")
@click.argument("text")
@click.option("--dataset", required=True, help="Data set whose names the query uses (e.g. cn15k, ppi5k).")
@click.option(
    "--graph", "graph", type=click.Choice(["train", "valid", "test"]), help="Observed graph to query."
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
@_friendly
def query_cmd(
    text: str,
    dataset: str,
    graph: str | None,
    adjacency: str | None,
    top: int,
    cycle_cap: int | None,
    as_json: bool,
) -> None:
    """Answer one soft query TEXT exactly (max-plus search); deterministic, no graph store needed."""
    from pipeline.engine.ask import ask

    ans = ask(text, dataset, graph=graph, adjacency=adjacency, top=top, cycle_cap=cycle_cap)
    if ans.approximate:
        click.echo("note: a cycle cap skipped candidates; utilities are lower bounds", err=True)
    if as_json:
        echo_json(ans.rows)
        return
    click.echo(f"{ans.query}   [{dataset}, {ans.source}; {ans.n_answers} answers]")
    print_table([{"rank": i + 1, **r} for i, r in enumerate(ans.rows)], ["rank", "eid", "name", "utility"])


# --------------------------------------------------------------------------- backbones: train and export
@cli.command("train")
@click.argument("dataset")
@click.option(
    "--model", "model_name", required=True, help="ukge_logi | ukge_rect | beurre (see `pipeline ls models`)."
)
@click.option("--psl", is_flag=True, help="Add the data set's soft-logic facts (UKGE+PSL).")
@click.option(
    "--epochs", type=int, default=None, help="Epoch budget (default 100; early stopping on valid MSE)."
)
@click.option("--dim", type=int, default=None, help="Embedding size (model default: UKGE 128, BEUrRE 64).")
@click.option("--lr", type=float, default=None, help="Adam learning rate (model default).")
@click.option("--batch-size", type=int, default=None, help="Facts per batch (model default).")
@click.option("--negatives", type=int, default=None, help="Corruptions per fact and side (model default).")
@click.option("--patience", type=int, default=None, help="Epochs without a better valid MSE before stopping.")
@click.option(
    "--select-on",
    type=click.Choice(["valid_pos_neg", "valid_pos", "last"]),
    default=None,
    help="Early stopping / selection MSE: valid positives + sampled negatives (default), positives only, "
    "or last (keep the final epoch, no early stopping).",
)
@click.option(
    "--out",
    type=click.Path(path_type=str),
    default=None,
    help="Run directory (default PIPELINE_HOME/runs/DATASET-MODEL[-psl]-sSEED).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None, help="cpu | cuda | cuda:N (default: cuda when present).")
@click.option("--resume", is_flag=True, help="Continue from the run directory's checkpoint.")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the results document.")
@_friendly
def train_cmd(
    dataset: str,
    model_name: str,
    psl: bool,
    epochs: int | None,
    dim: int | None,
    lr: float | None,
    batch_size: int | None,
    negatives: int | None,
    patience: int | None,
    select_on: str | None,
    out: str | None,
    seed: int,
    device: str | None,
    resume: bool,
    source: str | None,
    as_json: bool,
) -> None:
    """Train an uncertain-KG embedding on DATASET's train facts; select on valid; report test MSE/MAE."""
    from loaders import load
    from pipeline import config
    from pipeline.models import default_config, train

    cfg = default_config(
        dataset.lower(),
        model_name.lower(),
        psl=psl,
        epochs=epochs,
        dim=dim,
        lr=lr,
        batch_size=batch_size,
        negatives=negatives,
        patience=patience,
        select_on=select_on,
        seed=seed,
        device=device,
    )
    kg = load(cfg.dataset, source=source)
    out = out or config.home() / "runs" / f"{kg.name}-{cfg.model}{'-psl' if psl else ''}-s{seed}"
    res = train(kg, cfg, out, resume=resume)
    out = str(out)
    if as_json:
        echo_json({**res, "run_dir": str(out)})
        return
    rows = [
        {"split": k, "n": v["n"], "MSE": f"{v['mse']:.5f}", "MAE": f"{v['mae']:.5f}"}
        for k, v in res.items()
        if isinstance(v, dict) and "mse" in v
    ]
    print_table(rows)
    click.echo(
        f"run {out}: {res['epochs_run']} epochs (best {res['best_epoch']}), "
        f"{res['seconds_per_epoch'] or 0:.1f} s/epoch on {res['device']}"
    )


@cli.command("export")
@click.argument("run_dir", type=click.Path(path_type=str))
@click.option(
    "--threshold", type=float, default=0.1, show_default=True, help="Keep facts with confidence >= T."
)
@click.option(
    "--out",
    type=click.Path(path_type=str),
    default=None,
    help="Export directory (default PIPELINE_HOME/exports/DATASET-HASH-tT).",
)
@click.option("--device", default=None, help="cpu | cuda (default: cuda when present).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest.")
@_friendly
def export_cmd(run_dir: str, threshold: float, out: str | None, device: str | None, as_json: bool) -> None:
    """Write the predicted neural adjacency of a trained run as Arrow files (one per relation)."""
    from pipeline.export import export_adjacency

    man = export_adjacency(run_dir, threshold, out, device=device)
    if as_json:
        echo_json(man)
        return
    print_table(
        [
            {"relation": x["relation"], "facts": x["nnz"], "MB": f"{x['bytes'] / 1e6:.2f}"}
            for x in man["relations"]
        ]
    )
    frac = man["bytes"] / man["dense_float32_bytes"]
    click.echo(
        f"{man['path']}: {man['nnz']} facts, {man['bytes'] / 1e6:.1f} MB ({100 * frac:.2f}% of dense float32)"
        + (" [cached]" if man["cached"] else f" in {man['seconds']:.1f} s")
    )
    if "pruning" in man:  # a box model: exact pruned scoring (pipeline.models.box_bounds)
        p = man["pruning"]
        click.echo(
            f"box bounds: {p['blocks_pruned']:,} of {p['block_pairs']:,} block pairs pruned "
            f"({p['pruned_share']:.1%}); {p['scored_share']:.2%} of all pairs scored exactly"
        )


# ----------------------------------------------------------------------------------------------- sampling
@cli.command("sample")
@click.argument("dataset")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Folder of the query set file.")
@click.option("--types", default=None, help="Comma-separated query types (default: train types for train, all 12 otherwise).")
@click.option("--per-type", type=int, default=None, help="Queries per type (default: the literature's, 2000 or 3000 on CN15k).")
@click.option("--split", type=click.Choice(["train", "valid", "test"]), default="test", show_default=True)
@click.option("--alpha", type=click.Choice(["zero", "low", "normal", "high", "hybrid"]), default="zero", show_default=True)
@click.option("--beta", type=click.Choice(["equal", "random"]), default="equal", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--store", "store_uri", default=None, help="embedded (default) | falkordb://h:p | bolt://h:p | neo4j://h:p")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--no-browse", is_flag=True, help="Do not write (:Query) nodes into the store.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@_friendly
def sample_cmd(dataset: str, out_dir: str, types: str | None, per_type: int | None, split: str, alpha: str, beta: str,
               seed: int, store_uri: str | None, source: str | None, no_browse: bool, as_json: bool) -> None:
    """Sample soft queries of DATASET by Cypher walks over the store, with exact ground truth (easy: train
    graph, hard: the split's graph); valid/test keep only useful queries."""
    from loaders import load
    from pipeline.sampling.run import sample_to_dir
    from pipeline.sampling.sampler import SamplingError, resolve_types
    from pipeline.store import open_store

    names = resolve_types([t.strip() for t in types.split(",") if t.strip()] if types else None, split)
    if per_type is not None and per_type < 1:  # checked before the data and the store are touched
        raise SamplingError(f"--per-type must be at least 1, got {per_type}")
    kg = load(dataset, source=source)
    with open_store(store_uri) as store:
        res = sample_to_dir(kg, store, out_dir, split, names, per_type, alpha, beta, seed, browse=not no_browse)
    if as_json:
        echo_json(res)
        return
    print_table([{"type": r["type"], "kept": r["kept"], "walks": r["attempts"], "useful%": f"{100 * r['useful_share']:.1f}",
                  "store s": f"{r['store_seconds']:.2f}", "engine s": f"{r['engine_seconds']:.2f}",
                  "answers med/p90/max": f"{r['answers_median']:g}/{r['answers_p90']:g}/{r['answers_max']}"}
                 for r in res["types"]])
    click.echo(f"{res['file']}: {res['queries']} queries in {res['seconds']:.1f} s")


@cli.command("import-squk")
@click.argument("dataset")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Folder of the query set files.")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@_friendly
def import_squk_cmd(dataset: str, files: tuple[str, ...], out_dir: str, source: str | None, as_json: bool) -> None:
    """Import published SQUK query files ({split}_type{NNNN}..._soft_efo1_qaa.json) as query sets, with
    our engine's answers next to the published ones."""
    from loaders import load
    from pipeline.sampling.importer import import_squk
    from pipeline.sampling.levels import kg_alpha_table

    kg = load(dataset, source=source)
    res = import_squk(list(files), kg, kg_alpha_table(kg), out_dir)
    if as_json:
        echo_json(res)
        return
    print_table(res, ["file", "type", "split", "queries", "same_as_published", "other_shape", "out"])


# ----------------------------------------------------------------------------- answer, evaluate, reproduce


@cli.command("answer")
@click.argument("queries", type=click.Path(path_type=str))
@click.option("--adjacency", required=True, type=click.Path(path_type=str), help="A neural adjacency export directory.")
@click.option("--calibration", type=click.Choice(["none", "D", "L", "D+L"]), default="none", show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=str), default=None, help="Answers directory (default: beside QUERIES, answers/).")
@click.option("--valid-queries", type=click.Path(path_type=str), default=None, help="Valid query set (D chooses delta there, L selects there).")
@click.option("--train-queries", type=click.Path(path_type=str), default=None, help="Train query set (L is fitted there, alpha = 0).")
@click.option("--run", "run_dir", type=click.Path(path_type=str), default=None, help="The backbone's run directory (default: the export's).")
@click.option("--l-epochs", type=int, default=20, show_default=True, help="Epochs of calibration L.")
@click.option("--device", default=None, help="cpu | cuda (default: cuda when present).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--write-back", is_flag=True, help="Write the top answers into the graph store as (:Query)-[:ANSWER]->(:Entity).")
@click.option("--store", "store_uri", default=None, help="Store URI for --write-back (default: PIPELINE_STORE or embedded).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def answer_cmd(queries: str, adjacency: str, calibration: str, out_dir: str | None, valid_queries: str | None,
               train_queries: str | None, run_dir: str | None, l_epochs: int, device: str | None, seed: int,
               write_back: bool, store_uri: str | None, as_json: bool) -> None:
    """Answer a query set with SRC on a neural adjacency export (answers as Parquet)."""
    from pipeline.answer import run_answer

    report = run_answer(queries, adjacency, calibration, out_dir, valid_queries, train_queries, run_dir, device, seed,
                        l_epochs, progress=True)
    if write_back:
        from pipeline.writeback import write_back_file

        report["written_back"] = write_back_file(report["path"], store_uri)
    if as_json:
        echo_json(report)
        return
    click.echo(f"{report['method']}: answers in {report['path']} ({report['seconds']:.1f} s)")
    if "delta" in report:
        click.echo(f"delta = {report['delta']:g} (chosen on the valid queries)")
    print_table([{"type": t, "queries": s["queries"], "seconds": f"{s['seconds']:.3f}", "queries/s": f"{s['queries_per_s']:.1f}"}
                 for t, s in report["throughput"].items()])
    if write_back:
        click.echo(f"written back: {report['written_back']} ANSWER relationships")


@cli.command("evaluate")
@click.argument("answers", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (the reports).")
@click.option("--plot", "plot_file", type=click.Path(path_type=str), default=None, help="Write a PNG comparing the methods per type.")
@click.option("--update-docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Merge the tables into DIR/results.json and DIR/results.md (e.g. docs).")
@_friendly
def evaluate_cmd(answers: str, as_json: bool, plot_file: str | None, docs_dir: str | None) -> None:
    """Metrics x100 per query type and averaged for an answers file or a directory of them.

    Saves <answers>.metrics.json and .metrics.md beside each answers file."""
    from pathlib import Path

    from pipeline import evaluate

    reports = evaluate.evaluate_answers(answers)
    for r in reports:
        evaluate.save_report(r, Path(r["file"]).with_suffix(""))
    if docs_dir:
        evaluate.update_results(reports, docs_dir)
    if plot_file:
        by_method = {r["method"]: r["summary"] for r in reports}
        evaluate.plot_methods(by_method, plot_file, title=", ".join(sorted({r["dataset"] for r in reports})))
    if as_json:
        echo_json(reports)
        return
    for r in reports:
        click.echo(f"{r['dataset']}  {r['method']}  ({sum(r['counts'].values())} queries: "
                   + ", ".join(f"{t} {n}" for t, n in r["counts"].items()) + ")")
        click.echo(evaluate.text_table(r["summary"]))
        click.echo()


@cli.command("reproduce")
@click.argument("dataset")
@click.option("--out", "out_dir", type=click.Path(path_type=str), default=None,
              help="Work directory (default PIPELINE_HOME/reproduce/DATASET-sSEED); re-running resumes there.")
@click.option("--models", default="ukge_logi", show_default=True, help="Comma-separated backbones, e.g. ukge_logi,beurre.")
@click.option("--epochs", type=int, default=None, help="Training epochs (default: the backbone's).")
@click.option("--dim", type=int, default=None, help="Embedding dimension (default: the backbone's).")
@click.option("--select-on", type=click.Choice(["valid_pos_neg", "valid_pos", "last"]), default=None,
              help="Training epoch selection (default valid_pos_neg early stopping; last keeps the final epoch).")
@click.option("--per-type", type=int, default=100, show_default=True, help="Valid and test queries per type.")
@click.option("--train-per-type", type=int, default=200, show_default=True, help="Train queries per type (for L).")
@click.option("--alpha", default="hybrid", show_default=True, help="Alpha mode of the valid/test queries.")
@click.option("--beta", default="random", show_default=True, help="Beta mode of all queries.")
@click.option("--threshold", type=float, default=0.1, show_default=True, help="Export threshold.")
@click.option("--l-epochs", type=int, default=20, show_default=True, help="Epochs of calibration L.")
@click.option("--calibrations", default="none,D,L,D+L", show_default=True, help="Comma-separated SRC variants.")
@click.option("--docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Update DIR/results.json and DIR/results.md (e.g. docs).")
@click.option("--store", "store_uri", default=None, help="Store URI (default: PIPELINE_STORE or embedded).")
@click.option("--run", "runs", multiple=True, help="MODEL=RUN_DIR: use this trained run instead of training MODEL.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def reproduce_cmd(dataset: str, out_dir: str | None, models: str, epochs: int | None, dim: int | None,
                  select_on: str | None, per_type: int,
                  train_per_type: int, alpha: str, beta: str, threshold: float, l_epochs: int, calibrations: str,
                  docs_dir: str | None, store_uri: str | None, runs: tuple[str, ...], seed: int, device: str | None,
                  as_json: bool) -> None:
    """Ingest, sample, train, export, answer with SRC/D/L/D+L and evaluate DATASET; each stage is skipped
    when its output for the same inputs exists."""
    from pipeline import config
    from pipeline.evaluate import text_table
    from pipeline.reproduce import ReproduceConfig, reproduce

    cfg = ReproduceConfig(dataset=dataset, models=tuple(m.strip() for m in models.split(",") if m.strip()), epochs=epochs,
                          dim=dim, per_type=per_type, train_per_type=train_per_type, alpha=alpha, beta=beta,
                          threshold=threshold, l_epochs=l_epochs,
                          calibrations=tuple(c.strip() for c in calibrations.split(",") if c.strip()), seed=seed,
                          device=device, select_on=select_on)
    pretrained = {}
    for item in runs:
        model, sep, path = item.partition("=")
        if not sep or not path:
            raise PipelineError(f"--run {item!r}: expected MODEL=RUN_DIR")
        pretrained[model.strip()] = path
    out = out_dir or str(config.home() / "reproduce" / f"{dataset}-s{seed}")
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


def main() -> None:
    cli(prog_name="pipeline")


if __name__ == "__main__":
    main()
