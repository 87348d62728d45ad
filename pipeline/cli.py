"""The `pipeline` command line (design section 5). Each command is a thin shell over one stage module;
stage modules are imported lazily so `pipeline ls` stays instant and the store never pulls in torch.

Every PipelineError becomes one line on stderr and exit code 2; `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any

import click

from pipeline.core.errors import PipelineError, os_error_line, printable


def _path_error(exc: OSError) -> str | None:
    """The one line for an OSError about a path the user gave (``--out`` under a file or in a folder they
    cannot write, ``--plot`` likewise) or a full disk: every command that writes gets it here, not one by
    one (pipeline.core.errors.os_error_line). None for any other OSError (left as it is)."""
    line = os_error_line(exc)
    return None if line is None else f"error: {line}"


def _friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn typed errors into one clear line and exit code 2 (never a traceback)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PipelineError as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(2)
        except OSError as exc:
            line = _path_error(exc)
            if line is None:
                raise
            click.echo(printable(line), err=True)
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
    # names come from the data (an entity named with a terminal escape): shown escaped, never acted on
    cells = [[printable(r.get(c, ""), keep="") for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    click.echo("  ".join("-" * w for w in widths))
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())


def echo_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


class FriendlyGroup(click.Group):
    """The command group: a PipelineError raised while an option is converted (e.g. an unknown registry
    name) is one line and exit code 2, as inside the commands."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PipelineError as exc:
            click.echo(f"error: {printable(exc)}", err=True)
            sys.exit(2)
        except OSError as exc:  # a command not wrapped by _friendly
            line = _path_error(exc)
            if line is None:
                raise
            click.echo(printable(line), err=True)
            sys.exit(2)


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="soft-queries")
def cli() -> None:
    """Soft queries over uncertain knowledge graphs: ingest, sample, train, export, answer, evaluate."""
    from pipeline.core.config import check_environment

    check_environment()  # a typo in PIPELINE_KERNELS / _VERIFY / _PAIR_CACHE: one line, not ignored


# ------------------------------------------------------------------------------------------------------ ls


def _registry(kind: str) -> Any:
    """The registry behind ``pipeline ls KIND`` and the options that name its items (imported on demand,
    so the CLI starts without torch)."""
    from importlib import import_module

    module, attr = REGISTRIES[kind]
    return getattr(import_module(module), attr)


# ls KIND -> (module, registry attribute); every registry is a pipeline.core.registry.Registry
REGISTRIES = {
    "datasets": ("loaders", "REGISTRY"),
    "models": ("pipeline.models.registry", "BACKBONES"),
    "methods": ("pipeline.methods", "METHODS"),
    "baselines": ("pipeline.baselines", "QE_MODELS"),
    "calibrations": ("pipeline.methods.calibration", "CALIBRATIONS"),
    "query-types": ("pipeline.query.types", "QUERY_TYPES"),
    "metrics": ("pipeline.core.metrics", "METRICS"),
    "alpha-modes": ("pipeline.sampling.requirements", "ALPHA_MODES"),
    "beta-modes": ("pipeline.sampling.requirements", "BETA_MODES"),
    "executors": ("pipeline.executors", "EXECUTORS"),
    "stores": ("pipeline.store.backends", "STORES"),
}


class RegistryChoice(click.ParamType):
    """A click option whose values are a registry's names: the same lookup (case, synonyms) and the same
    "did you mean" as everywhere else; converts to the canonical name."""

    def __init__(self, kind: str, extra: tuple[str, ...] = ()) -> None:
        self.kind, self.extra = kind, extra
        self.name = kind

    def _names(self) -> list[str]:
        return [*_registry(self.kind).names(), *self.extra]

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self._names()) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if value in self.extra:
            return str(value)
        return _registry(self.kind).canonical(str(value))  # UnknownNameError: one line with close matches


def _executor_options(f: Any) -> Any:
    """--executor/--address/--workers of the heavy stages (export, answer; pipeline.executors)."""
    f = click.option("--workers", type=int, default=None,
                     help="answer: worker processes (default: every core; 1 = this process). Ray: tasks/actors at once (default: the cluster's CPUs).")(f)
    f = click.option("--address", default=None, help="Ray: an existing cluster (ray://host:10001 or auto); default: start a local one.")(f)
    return click.option("--executor", "executor_name", type=RegistryChoice("executors"), default="local", show_default=True,
                        help="Where the work runs (`pipeline ls executors`).")(f)


@cli.command("ls")
@click.argument("what", type=click.Choice(list(REGISTRIES)))
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
    if what not in REGISTRIES:
        raise PipelineError(f"nothing to list for {what}; expected one of {', '.join(REGISTRIES)}")
    return _registry(what).rows()


# --------------------------------------------------------------------------- store and ingest (foundation)


@cli.group("store")
def store_group() -> None:
    """Manage the embedded FalkorDB server (data under PIPELINE_HOME/store)."""


@store_group.command("start")
@click.option("--port", type=int, default=None,
              help="Listen on this loopback port (default: the one used last, unless taken; else a free one).")
@_friendly
def store_start_cmd(port: int | None) -> None:
    """Start the embedded server on loopback (no-op when it runs already); it requires its password."""
    from pipeline.store import embedded

    info, started = embedded.ensure_running(port=port)
    state = "started" if started else "already running"
    click.echo(f"{state}: {info.uri} (pid {info.pid}, data {info.data_dir})")


@store_group.command("stop")
@_friendly
def store_stop_cmd() -> None:
    """Stop the embedded server (its append-only file is flushed first)."""
    from pipeline.store import embedded

    click.echo("stopped" if embedded.stop() else "not running")


@store_group.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def store_status_cmd(as_json: bool) -> None:
    """Whether the embedded server runs, where, and how another client logs in (never the password)."""
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
        click.echo(f"not running (data {embedded.store_dir()})")
    elif st.state != "running":
        click.echo(f"{st.state}: {info.uri} (pid {info.pid}, data {info.data_dir}){': ' + st.note if st.note else ''}")
    else:
        click.echo(f"running: {info.uri} (pid {info.pid}, data {info.data_dir})")
        click.echo(
            f"log in as user '{login['user']}' with the password in {login['credentials_file']} "
            "(readable by you only); `pipeline cypher` does it for you"
        )


@cli.command("cypher")
@click.argument("statement")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A query parameter $NAME (VALUE read as JSON when it is JSON, else a string); repeatable.")
@click.option("--store", "store_uri", default=None, help="embedded (default) | falkordb://h:p[/graph] | bolt://h:p | neo4j://h:p")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON document.")
@click.option("--timeout", "timeout_s", type=float, default=None,
              help="Seconds the server lets it run (default 60, at most 600); a write stopped there is not applied.")
@_friendly
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
@click.option("--from", "from_path", default=None, help="Your own KG: a folder with train/valid/test files or ONE "
              "file (TSV, CSV or Parquet; head, relation, tail, confidence as names). Records DATASET.")
@click.option("--from-store", "from_store", default=None, help="Your own KG in a graph store (URI as --store).")
@click.option("--split", default="0.8,0.1,0.1", show_default=True, help="train,valid,test fractions (one file).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the one-file split.")
@click.option("--columns", default=None, help="Header names of head,relation,tail,confidence (e.g. s,p,o,w).")
@click.option("--confidence-property", default=None, help="--from-store: relationship property holding c.")
@click.option("--rel-types", default=None, help="--from-store: only these relationship types (A,B).")
@click.option("--name-property", default="name", show_default=True, help="--from-store: node name property.")
@_friendly
def ingest_cmd(
    dataset: str, source: str | None, store_uri: str | None, batch_size: int, as_json: bool,
    from_path: str | None = None, from_store: str | None = None, split: str = "0.8,0.1,0.1", seed: int = 0,
    columns: str | None = None, confidence_property: str | None = None, rel_types: str | None = None,
    name_property: str = "name",
) -> None:
    """Load the observed KG of DATASET into the graph store (idempotent; a killed run can be re-run).
    With --from/--from-store, first record DATASET as your own uncertain KG (see README)."""
    from dataclasses import asdict

    from pipeline.stages.user_ingest import ingest_benchmark, ingest_user

    if from_path or from_store:
        rep = ingest_user(dataset, from_path, from_store, store_uri, split=split, seed=seed, columns=columns,
                          confidence_property=confidence_property, rel_types=rel_types,
                          name_property=name_property, batch_size=batch_size, progress=not as_json)
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
    report, where = ingest_benchmark(dataset, source, store_uri, batch_size, progress=not as_json)
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
@click.option("--explain", is_flag=True,
              help="For each answer shown: its witness (entity per variable, every atom's confidence, source, value).")
@click.option("--calibration", "calibration_paths", multiple=True, type=click.Path(exists=True),
              help="A saved SRC calibration of `pipeline answer` (RUN/calibration/D-*.json and/or L-* folder).")
@_friendly
def query_cmd(
    text: str,
    dataset: str,
    graph: str | None,
    adjacency: str | None,
    top: int,
    cycle_cap: int | None,
    as_json: bool,
    explain: bool = False,
    calibration_paths: tuple[str, ...] = (),
) -> None:
    """Answer one soft query TEXT exactly (max-plus search); deterministic, no graph store needed."""
    from pipeline.stages.ask import ask

    ans = ask(text, dataset, graph=graph, adjacency=adjacency, top=top, cycle_cap=cycle_cap, explain=explain,
              calibration=tuple(calibration_paths))
    if ans.approximate:
        click.echo("note: a cycle cap skipped candidates; utilities are lower bounds", err=True)
    if as_json:
        if ans.empty_reason:
            click.echo(ans.empty_reason, err=True)  # stdout stays one document
        echo_json(ans.witnesses if explain else ans.rows)
        return
    click.echo(printable(f"{ans.query}   [{dataset}, {ans.source}; {ans.n_answers} answers]"))
    if ans.empty_reason:
        click.echo(printable(ans.empty_reason))
        return
    if explain:
        from pipeline.stages.witness_records import witness_lines

        for i, rec in enumerate(ans.witnesses or []):
            click.echo(printable("\n".join(witness_lines(i + 1, rec))))
        return
    print_table([{"rank": i + 1, **r} for i, r in enumerate(ans.rows)], ["rank", "eid", "name", "utility"])


# --------------------------------------------------------------------------- backbones: train and export
@cli.command("train")
@click.argument("dataset")
@click.option("--model", "model_name", default=None, type=RegistryChoice("models"), help="Backbone (`pipeline ls models`).")
@click.option("--config", "config_file", type=click.Path(path_type=str), default=None,
              help="A saved config.json (e.g. RUN_DIR/config.json) to replay; options given besides override it.")
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
@click.option("--seed", type=int, default=None, help="Random seed (default 0, or the --config file's).")
@click.option("--device", default=None, help="cpu | cuda | cuda:N (default: cuda when present).")
@click.option("--resume", is_flag=True, help="Continue from the run directory's checkpoint.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Start over in a run directory that holds a run (its checkpoint and model are deleted).",
)
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the results document.")
@_friendly
def train_cmd(
    dataset: str,
    model_name: str | None,
    config_file: str | None,
    psl: bool,
    epochs: int | None,
    dim: int | None,
    lr: float | None,
    batch_size: int | None,
    negatives: int | None,
    patience: int | None,
    select_on: str | None,
    out: str | None,
    seed: int | None,
    device: str | None,
    resume: bool,
    overwrite: bool,
    source: str | None,
    as_json: bool,
) -> None:
    """Train an uncertain-KG embedding on DATASET's train facts; select on valid; report test MSE/MAE.

    A run directory that already holds a run is never started over silently: --resume continues it,
    --overwrite deletes it first."""
    from pipeline.models.config import steps_per_epoch
    from pipeline.models.stage import train_dataset

    if resume and overwrite:
        raise click.UsageError("--resume and --overwrite exclude each other")
    done = train_dataset(dataset, model_name, out, config_file=config_file, source=source, resume=resume,
                         overwrite=overwrite, psl=psl or None, epochs=epochs, dim=dim, lr=lr, batch_size=batch_size,
                         negatives=negatives, patience=patience, select_on=select_on, seed=seed, device=device)
    res, cfg, n_train, out = done.results, done.config, done.n_train, str(done.path)
    if as_json:
        echo_json({**res, "run_dir": str(out)})
        return
    # what was chosen: a small graph's batch size is not the model's default
    click.echo(
        f"trained {cfg.model} on {done.dataset}: {n_train} train facts, batch size {cfg.batch_size} "
        f"({steps_per_epoch(cfg.batch_size, n_train)} steps per epoch{_batch_note(cfg, n_train, batch_size, config_file)}), "
        f"{cfg.epochs} epochs at most, dim {cfg.dim}, lr {cfg.lr:g}"
    )
    rows = [
        {"split": k, "n": v["n"], "MSE": f"{v['mse']:.5f}", "MAE": f"{v['mae']:.5f}"}
        for k, v in res.items()
        if isinstance(v, dict) and "mse" in v
    ]
    print_table(rows)
    click.echo(
        f"run {out}: {res['epochs_run']} epochs (best {res['best_epoch']}), "
        f"{res['seconds_per_epoch'] or 0:.1f} s/epoch on {res['device']}; {_against_mean(res)}"
    )


def _batch_note(cfg: Any, n_train: int, given: int | None, config_file: str | None) -> str:
    """Why the batch size is what it is, when it is not the user's (cfg: a TrainConfig)."""
    from pipeline.models.config import MIN_STEPS_PER_EPOCH, MODEL_DEFAULTS, steps_per_epoch

    if given is not None or config_file is not None:
        return ""
    reference = MODEL_DEFAULTS.get(cfg.model, {}).get("batch_size", cfg.batch_size)
    if reference == cfg.batch_size:
        return ""
    return (f"; fitted to the graph: the model's default {reference} gives "
            f"{steps_per_epoch(reference, n_train)}, fewer than {MIN_STEPS_PER_EPOCH}")


def _against_mean(res: dict) -> str:
    """The valid MSE beside the mean predictor's, saying plainly when the model is no better (both NaN
    without valid facts: nothing to compare, no warning)."""
    import math

    mse, base = res["valid"]["mse"], res["mean_predictor"]
    text = (f"valid MSE {mse:.4f}, predicting the mean confidence ({base['confidence']:.3f}) "
            f"{base['valid_mse']:.4f}")
    if math.isfinite(base["valid_mse"]) and not mse < base["valid_mse"]:
        text += ("\nwarning: the model is no better than predicting the mean confidence; train longer "
                 "(--epochs) or with more steps per epoch (--batch-size)")
    return text


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
@click.option("--top-k", "top_k", type=int, default=None,
              help="Keep only each (head, relation)'s K best-scored tails that pass --threshold.")
@click.option("--shards", default=None,
              help="Non-local executors: where the (relation, head block) shards go (folder or URI such as s3://b/p; default OUT.shards).")
@click.option("--shard-heads", type=click.IntRange(1), default=None,
              help="Non-local executors: heads per shard task (whole scoring blocks; default one block).")
@click.option("--allow-dense", is_flag=True,
              help="Keep the export even when it holds more than a third of all (h, r, t) pairs (refused otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest.")
@_executor_options
@_friendly
def export_cmd(run_dir: str, threshold: float, out: str | None, device: str | None, as_json: bool,
               top_k: int | None = None, executor_name: str = "local", address: str | None = None,
               workers: int | None = None, shards: str | None = None, shard_heads: int | None = None,
               allow_dense: bool = False) -> None:
    """Write the predicted neural adjacency of a trained run as Arrow files (one per relation)."""
    from pipeline.executors import make_executor
    from pipeline.stages.export import MAX_FRACTION, export_adjacency

    with make_executor(executor_name, address, workers) as executor:
        man = export_adjacency(run_dir, threshold, out, device=device, top_k=top_k, executor=executor, shards=shards,
                               shard_heads=shard_heads, max_fraction=1.0 if allow_dense else MAX_FRACTION)
    # facts over all (h, r, t) pairs, not bytes over dense bytes: the Arrow headers alone outweigh a tiny
    # graph's dense matrix, which read "0 facts = 134% of dense"
    frac = man["nnz"] / max(1, man["n_entities"] ** 2 * man["n_relations"])
    if frac > MAX_FRACTION:  # only with --allow-dense (or a cached export made with it): say so plainly
        click.echo(
            f"warning: this export keeps {100 * frac:.1f}% of all (h, r, t) pairs, more than the density "
            f"guard's {MAX_FRACTION:.0%} (allowed by --allow-dense): at threshold {man['threshold']} the model "
            "calls most pairs true, and queries over it will answer with nearly every entity",
            err=True,
        )
    if as_json:
        echo_json(man)
        return
    print_table(
        [
            {"relation": x["relation"], "facts": x["nnz"], "MB": f"{x['bytes'] / 1e6:.2f}"}
            for x in man["relations"]
        ]
    )
    click.echo(
        f"{man['path']}: {man['nnz']} facts, {man['bytes'] / 1e6:.1f} MB ({100 * frac:.2f}% of all (h, r, t) pairs)"
        + (" [cached]" if man["cached"] else f" in {man['seconds']:.1f} s")
    )
    if "pruning" in man:  # a box model: exact pruned scoring (pipeline.models.box_bounds)
        p = man["pruning"]
        click.echo(
            f"box bounds: {p['blocks_pruned']:,} of {p['block_pairs']:,} block pairs pruned "
            f"({p['pruned_share']:.1%}); {p['scored_share']:.2%} of all pairs bounded one by one, "
            f"{p.get('exact_share', p['scored_share']):.2%} scored in full"
        )


# ----------------------------------------------------------------------------------------------- sampling
@cli.command("sample")
@click.argument("dataset")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=str), help="Folder of the query set file.")
@click.option("--types", default=None, help="Comma-separated query types (default: train types for train, all 12 otherwise).")
@click.option("--per-type", type=int, default=None, help="Queries per type (default: the literature's, 2000 or 3000 on CN15k).")
@click.option("--split", type=click.Choice(["train", "valid", "test"]), default="test", show_default=True)
@click.option("--alpha", type=RegistryChoice("alpha-modes"), default="zero", show_default=True)
@click.option("--beta", type=RegistryChoice("beta-modes"), default="equal", show_default=True)
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
    from pipeline.sampling.run import sample_dataset

    names = [t.strip() for t in types.split(",") if t.strip()] if types else None
    res = sample_dataset(dataset, out_dir, split=split, types=names, per_type=per_type, alpha=alpha, beta=beta,
                         seed=seed, store_uri=store_uri, source=source, browse=not no_browse)
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
    from pipeline.sampling.levels import kg_alpha_table
    from pipeline.squk.importer import import_squk

    kg = load(dataset, source=source)
    res = import_squk(list(files), kg, kg_alpha_table(kg), out_dir)
    if as_json:
        echo_json(res)
        return
    print_table(res, ["file", "type", "split", "queries", "same_as_published", "other_shape", "out"])


# ----------------------------------------------------------------------------- answer, evaluate, reproduce


@cli.command("answer")
@click.argument("queries", type=click.Path(path_type=str), required=False)
@click.option("--method", "method_name", type=RegistryChoice("methods"), default=None,
              help="Answering method (`pipeline ls methods`; default: src, or the --model run's baseline).")
@click.option("--adjacency", type=click.Path(path_type=str), default=None, help="A neural adjacency export directory (SRC).")
@click.option("--model", "model_run", default=None, type=click.Path(path_type=str),
              help="A query-embedding baseline run (`pipeline train-qe`) instead of SRC.")
@click.option("--union", type=click.Choice(["dnf", "conorm"]), default=None,
              help="Baselines: answer disjunctions by DNF (max over branches, default) or LogicE's t-conorm.")
@click.option("--calibration", type=RegistryChoice("calibrations"), default="none", show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=str), default=None, help="Answers directory (default: beside QUERIES, answers/).")
@click.option("--valid-queries", type=click.Path(path_type=str), default=None, help="Valid query set (D chooses delta there, L selects there).")
@click.option("--train-queries", type=click.Path(path_type=str), default=None, help="Train query set (L is fitted there, alpha = 0).")
@click.option("--allow-split-mismatch", is_flag=True, help="Accept a --valid/--train query set of another split (recorded).")
@click.option("--run", "run_dir", type=click.Path(path_type=str), default=None, help="The backbone's run directory (default: the export's).")
@click.option("--l-epochs", type=int, default=20, show_default=True, help="Epochs of calibration L.")
@click.option("--device", default=None, help="cpu | cuda (default: cuda when present).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--explain", "explain_k", type=click.IntRange(0), default=0,
              help="SRC: write the witnesses of each query's top K answers beside the answers (and names in them).")
@click.option("--write-back", is_flag=True, help="Write the top answers into the graph store as (:Query)-[:ANSWER]->(:Entity).")
@click.option("--store", "store_uri", default=None, help="Store URI for --write-back (default: PIPELINE_STORE or embedded).")
@click.option("--from-store", "from_store", is_flag=True,
              help="Answer the (:Query) nodes of --set in the store instead of a QUERIES file (SRC).")
@click.option("--set", "set_name", default=None,
              help="--from-store: the set of (:Query) nodes (default: typed, the queries created with only a text).")
@click.option("--cycle-cap", type=click.IntRange(1), default=None,
              help="SRC: at most this many candidates per cycle variable of a query with cycles (its utilities are then lower bounds).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_executor_options
@_friendly
def answer_cmd(queries: str | None, method_name: str | None, adjacency: str | None, model_run: str | None, calibration: str,
               out_dir: str | None, valid_queries: str | None, train_queries: str | None, allow_split_mismatch: bool,
               run_dir: str | None, l_epochs: int, device: str | None, seed: int, write_back: bool,
               store_uri: str | None, as_json: bool, explain_k: int = 0, from_store: bool = False,
               set_name: str | None = None, executor_name: str = "local", address: str | None = None,
               workers: int | None = None, union: str | None = None, cycle_cap: int | None = None) -> None:
    """Answer a query set with a method: SRC on a neural adjacency export (default), or a query-embedding
    baseline run (--model); the same answers file (Parquet) either way. --from-store answers the (:Query)
    nodes of a set in the graph store and, with --write-back, writes the answers back to them."""
    from dataclasses import replace

    from pipeline.core.atomic import check_folder
    from pipeline.core.heap import keep_freed_heap
    from pipeline.executors import answer_executor
    from pipeline.methods import MethodOptions
    from pipeline.stages.answer import AnswerOptions, answer_queries

    check_folder(out_dir, "--out")  # refused before any fitting starts
    method = MethodOptions(name=method_name, adjacency=adjacency, model_run=model_run, calibration=calibration,
                           union=union, run_dir=run_dir, l_epochs=l_epochs, device=device, seed=seed,
                           cycle_cap=cycle_cap)
    how = AnswerOptions(out_dir=out_dir, valid_queries=valid_queries, train_queries=train_queries,
                        allow_split_mismatch=allow_split_mismatch, explain=explain_k, write_back=write_back,
                        store=store_uri, progress=not as_json)
    if from_store:
        _answer_from_store(queries, set_name, method, how, as_json)
        return
    if queries is None:
        raise PipelineError("give a QUERIES file, or --from-store to answer the (:Query) nodes of the graph store")
    if set_name is not None:
        raise PipelineError("--set names a set of (:Query) nodes in the store: use it with --from-store")
    with answer_executor(executor_name, address, workers) as executor:
        if executor.in_process:  # answered here: this process reuses the heap it frees, as workers do
            keep_freed_heap()
        report = answer_queries(queries, method, replace(how, executor=executor))
    valid = valid_queries
    if as_json:
        echo_json(report)
        return
    click.echo(f"{report['method']}: answers in {report['path']} ({report['seconds']:.1f} s)")
    if "delta" in report:
        click.echo(f"delta = {report['delta']:g} (chosen on the valid queries {valid})")
    print_table([{"type": t, "queries": s["queries"], "seconds": f"{s['seconds']:.3f}", "queries/s": f"{s['queries_per_s']:.1f}"}
                 for t, s in report["throughput"].items()])
    _report_written(report, explain_k)


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


@cli.command("browse")
@click.argument("query_id")
@click.option("--html", "html_path", required=True, type=click.Path(path_type=str), help="The page to write.")
@click.option("--method", default=None, help="Whose answers (the method label, e.g. 'ukge_logi SRC'); needed when several.")
@click.option("--dataset", default=None, help="The query's data set, when the id is in several.")
@click.option("--set", "set_name", default=None, help="The query's set, when the id is in several.")
@click.option("--store", "store_uri", default=None, help="Store URI (default: PIPELINE_STORE or embedded).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
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

    from pipeline.stages.evaluate import (
        evaluate_answers,
        plot_methods,
        save_report,
        text_table,
        update_results,
    )

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
        update_results(reports, docs_dir)
    if plot_file:
        by_method = {r["method"]: r["summary"] for r in reports}
        plot_methods(by_method, plot_file, title=", ".join(sorted({r["dataset"] for r in reports})))
    if as_json:
        echo_json(reports)
        return
    for r in reports:
        click.echo(f"{r['dataset']}  {r['method']}  ({sum(r['counts'].values())} queries: "
                   + ", ".join(f"{t} {n}" for t, n in r["counts"].items()) + ")")
        click.echo(text_table(r["summary"]))
        for name, by in (r.get("undefined") or {}).items():
            click.echo(f"{name} undefined on {by['all']} queries (one answer, or constant true or predicted utilities)")
        if r.get("random"):
            click.echo("random ranking of the same answers (chance level): "
                       + ", ".join(f"{m} {r['random'][m]['avg']:.1f}" for m in ("map", "ndcg")))
        if r.get("paper_protocol"):
            avg = {m: v.get("avg") for m, v in r["paper_protocol"].items()}
            click.echo("paper protocol (ids break ties; comparison only): "
                       + ", ".join(f"{m} {v:.1f}" for m, v in avg.items() if v == v))
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
@click.option("--alpha", type=RegistryChoice("alpha-modes"), default="hybrid", show_default=True, help="Alpha mode of the valid/test queries.")
@click.option("--beta", type=RegistryChoice("beta-modes"), default="random", show_default=True, help="Beta mode of all queries.")
@click.option("--threshold", type=float, default=0.1, show_default=True, help="Export threshold.")
@click.option("--l-epochs", type=int, default=20, show_default=True, help="Epochs of calibration L.")
@click.option("--calibrations", default="none,D,L,D+L", show_default=True, help="Comma-separated SRC variants.")
@click.option("--docs", "docs_dir", type=click.Path(path_type=str), default=None,
              help="Update DIR/results.json and DIR/results.md (e.g. docs).")
@click.option("--store", "store_uri", default=None, help="Store URI (default: PIPELINE_STORE or embedded).")
@click.option("--run", "runs", multiple=True, help="MODEL=RUN_DIR: use this trained run instead of training MODEL.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None)
@click.option("--config", "config_file", type=click.Path(path_type=str), default=None,
              help="Replay a reproduction: its reproduce.json (or a JSON of these settings); options given besides override it.")
@click.option("--baselines", default="", help="Comma-separated query-embedding baselines to train and answer beside SRC "
              "(logice_ne,cone_ne; `pipeline ls baselines`).")
@click.option("--qe", "qe_settings", multiple=True,
              help="A baseline setting KEY=VALUE (MODEL.KEY=VALUE for one model), e.g. train_per_type=2000, epochs=4, "
                   "cone_ne.lr=3e-3 (defaults in docs/baselines.md).")
@click.option("--study", type=click.Choice(["main", "soft-requirements"]), default="main", show_default=True,
              help="soft-requirements: SRC on test sets with alpha zero|normal x beta equal|random (needs --run).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_context
@_friendly
def reproduce_cmd(click_ctx: click.Context, config_file: str | None, dataset: str, out_dir: str | None, models: str, epochs: int | None, dim: int | None,
                  select_on: str | None, per_type: int,
                  train_per_type: int, alpha: str, beta: str, threshold: float, l_epochs: int, calibrations: str,
                  docs_dir: str | None, store_uri: str | None, runs: tuple[str, ...], seed: int, device: str | None,
                  study: str, as_json: bool, baselines: str = "", qe_settings: tuple[str, ...] = ()) -> None:
    """Ingest, sample, train, export, answer with SRC/D/L/D+L and evaluate DATASET; each stage is skipped
    when its output for the same inputs exists. --study soft-requirements runs the alpha/beta ablation."""
    from pipeline.core import config
    from pipeline.stages.evaluate import text_table
    from pipeline.stages.reproduce import ReproduceConfig, reproduce

    if study == "soft-requirements":
        from pipeline.studies.soft_requirements import run_study

        if len(runs) != 1 or "=" not in runs[0]:
            raise PipelineError("--study soft-requirements needs one trained backbone: --run MODEL=RUN_DIR")
        doc = run_study(dataset, out_dir or str(config.home() / "studies" / f"{dataset}-soft-requirements-s{seed}"),
                        runs[0].partition("=")[2], per_type=per_type, threshold=threshold, seed=seed,
                        store_uri=store_uri, docs=docs_dir, log=lambda m: click.echo(m, err=True),
                        progress=not as_json)
        if as_json:
            echo_json(doc)
        else:
            click.echo(doc["table"])
        return

    given = dict(dataset=dataset, models=tuple(m.strip() for m in models.split(",") if m.strip()), epochs=epochs,
                 dim=dim, per_type=per_type, train_per_type=train_per_type, alpha=alpha, beta=beta,
                 threshold=threshold, l_epochs=l_epochs,
                 calibrations=tuple(c.strip() for c in calibrations.split(",") if c.strip()), seed=seed,
                 device=device, select_on=select_on,
                 baselines=tuple(b.strip() for b in baselines.split(",") if b.strip()), qe=_qe_overrides(qe_settings))
    if config_file:
        from click.core import ParameterSource

        param = {"qe": "qe_settings"}  # settings whose option has another parameter name
        typed = {k for k in given if click_ctx.get_parameter_source(param.get(k, k)) == ParameterSource.COMMANDLINE}
        cfg = ReproduceConfig.from_file(config_file, dataset, {k: v for k, v in given.items() if k in typed})
    else:
        cfg = ReproduceConfig(**given)
    seed = cfg.seed
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


# ----------------------------------------------------------------------------- query-embedding baselines (issue 13)


def _qe_overrides(items: tuple[str, ...]) -> dict[str, Any]:
    """--qe KEY=VALUE / MODEL.KEY=VALUE items as ReproduceConfig.qe (values read as JSON when they parse)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"--qe {item!r}: expected KEY=VALUE or MODEL.KEY=VALUE")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        model, dot, name = key.strip().rpartition(".")
        (out.setdefault(model, {}) if dot else out)[name] = value
    return out


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
@_friendly
def train_qe_cmd(dataset: str, model_name: str, train_queries: tuple[str, ...], valid_queries: str, dim: int, hidden: int,
                 epochs: int, lr: float, gamma: float, batch_size: int, negatives: int, batch_negatives: int, max_answers: int,
                 loss: str, tnorm: str, eval_every: int, max_valid: int, seed: int, device: str | None, threads: int | None, out_dir: str,
                 as_json: bool) -> None:
    """Train a query-embedding baseline (LogicE+NE or ConE+NE) on query sets; resumable."""
    import torch

    from pipeline.baselines.training import QEConfig, train_qe

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

# ------------------------------------------------------------------------------- the LLM comparison (issue 16)
@cli.command("llm-items")
@click.argument("dataset")
@click.option("--queries", "queries_path", required=True, multiple=True, type=click.Path(path_type=str),
              help="A query set (Parquet); repeat to take items from several, in order.")
@click.option("--out", "out_path", required=True, type=click.Path(path_type=str), help="Items file (JSONL).")
@click.option("--margin", type=float, default=0.1, show_default=True,
              help="Least difference between the true utilities of two candidates.")
@click.option("--per-type", default="paper", show_default=True,
              help="Items per type: paper (1p 100, 2p 50, 2i 100, 2in 50, 2il/3in/ip/im 15, 2m 10), all, N or TYPE=N,...")
@click.option("--adjacency", type=click.Path(path_type=str), default=None,
              help="A neural adjacency export: add SRC's pick (highest predicted utility) to every item.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds candidate draws and the answer position.")
@click.option("--source", default=None, help="Local folder holding the data set's files.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@_friendly
def llm_items_cmd(dataset: str, queries_path: tuple[str, ...], out_path: str, margin: float, per_type: str, adjacency: str | None,
                  seed: int, source: str | None, as_json: bool) -> None:
    """Multiple-choice items (prompt, four named candidates, correct letter) from a query set of DATASET."""
    from pipeline.llm.stage import build_items_file

    res = build_items_file(dataset, list(queries_path), out_path, margin, per_type, seed, adjacency, source)
    if as_json:
        echo_json(res)
        return
    print_table([{"type": t, "items": n} for t, n in res["kept"].items()])
    click.echo(f"{res['file']}: {res['items']} items; dropped: "
               + (", ".join(f"{n} {why}" for why, n in res["dropped"].items()) or "none"))


@cli.command("llm-eval")
@click.argument("items_path", metavar="ITEMS", type=click.Path(path_type=str))
@click.option("--endpoint", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", "model_name", default=None, help="Model name sent to the endpoint.")
@click.option("--concurrency", type=int, default=4, show_default=True, help="Requests in flight.")
@click.option("--responses", type=click.Path(path_type=str), default=None,
              help="Responses JSONL (default beside ITEMS); a re-run resumes from it.")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="Environment variable holding the API key (none sent when unset).")
@click.option("--timeout", type=float, default=60.0, show_default=True, help="Seconds per request.")
@click.option("--retries", type=int, default=4, show_default=True, help="Retries on 429/5xx/timeouts.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_friendly
def llm_eval_cmd(items_path: str, endpoint: str | None, model_name: str | None, concurrency: int,
                 responses: str | None, api_key_env: str, timeout: float, retries: int, as_json: bool) -> None:
    """Accuracy per query type (95% Wilson interval) of a model on ITEMS, beside SRC's when ITEMS has it."""
    from pipeline.llm.eval import markdown
    from pipeline.llm.stage import evaluate_items_file

    if (endpoint is None) != (model_name is None):
        raise PipelineError("give --endpoint and --model together (or neither, for SRC alone)")
    doc = evaluate_items_file(items_path, endpoint, model_name, concurrency, responses, progress=not as_json,
                              api_key_env=api_key_env, timeout=timeout, retries=retries)
    if as_json:
        echo_json(doc)
        return
    if not doc["tables"]:
        click.echo("nothing to score: no --endpoint given and the items carry no SRC pick (llm-items --adjacency)")
        return
    click.echo(markdown(doc["tables"]))
    if endpoint is not None:
        click.echo(f"responses: {doc['responses']}; no clear letter: {len(doc['unclear'])}; "
                   f"failed requests: {len(doc['failed'])} (both counted wrong)")


# ------------------------------------------------------------------------- synthetic KGs (issue 17)
@cli.command("synth")
@click.argument("name")
@click.option("--entities", type=int, required=True, help="Number of entities N (each gets at least one fact).")
@click.option("--relations", type=int, required=True, help="Number of relations R.")
@click.option("--facts", type=int, required=True, help="Number of distinct (h, r, t) facts F.")
@click.option("--like", type=click.Choice(["ppi5k", "cn15k"]), default="ppi5k", show_default=True,
              help="Draw confidences like this data set's train facts.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generator and of the split.")
@click.option("--split", default="0.8,0.1,0.1", show_default=True, help="train,valid,test fractions.")
@click.option("--out", type=click.Path(path_type=str), default=None, help="TSV file (default PIPELINE_HOME/synth/NAME.tsv).")
@click.option("--store", "store_uri", default=None, help="embedded (default) | falkordb://h:p | bolt://h:p | neo4j://h:p")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@_friendly
def synth_cmd(name: str, entities: int, relations: int, facts: int, like: str, seed: int, split: str,
              out: str | None, store_uri: str | None, as_json: bool) -> None:
    """Generate a synthetic uncertain KG (power-law degrees, confidences like PPI5k's or CN15k's) and record
    it as the user data set NAME through `pipeline ingest NAME --from FILE`."""
    from pipeline.stages.synth import synth_dataset

    rep = synth_dataset(name, entities, relations, facts, seed=seed, like=like, out=out, split=split,
                        store_uri=store_uri, progress=not as_json)
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
