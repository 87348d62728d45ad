r"""The Python API: ``import pipeline as pl`` gives the stages of the command line as functions that return
typed values with pandas frames (:mod:`pipeline.api_types`). Each calls the same stage function as its
command, so the numbers are the command's; errors are :class:`PipelineError` subclasses with the command's
one-line messages; long work shows the command's progress bars (``progress=False`` hides them).

Every example below makes its own tiny KG (a TSV of named facts) and runs as a doctest
(tests/test_api.py); the graph store is ``PIPELINE_STORE``, else the embedded server, logged in by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

import pipeline as _package
from pipeline.api_types import Answers, Atom, Dataset, Explanation, Export, QuerySet, Ranking, Run
from pipeline.core.errors import PathError, PipelineError, close_matches

__all__ = list(_package.__all__)  # the public names, listed once in pipeline/__init__.py

F = TypeVar("F", bound=Callable[..., Any])


def _one_line(fn: F) -> F:
    """An OSError about a path the caller gave becomes a :class:`PathError` (a PipelineError and still an
    OSError) with the CLI's line, as every command reports it."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from pipeline.core.config import check_environment

        try:
            check_environment()
            return fn(*args, **kwargs)
        except PipelineError:
            raise
        except OSError as exc:
            err = PathError.of(exc)
            if err is None:
                raise
            raise err from exc

    return wrapper  # type: ignore[return-value]


# The metrics' rows of pl.evaluate, in the paper's order (registry names -> the tables' labels).
METRIC_ROWS = ("tau", "rho", "map", "ndcg")


def _check_options(given: dict[str, Any], known: Sequence[str], what: str) -> None:
    """An option the stage does not have is one line with the close ones (not a TypeError)."""
    for name in given:
        if name not in known:
            hint = close_matches(name, list(known))
            raise PipelineError(f"{what}: unknown option {name!r}"
                                + (f" (did you mean {', '.join(hint)}?)" if hint else "")
                                + f"; known: {', '.join(sorted(known))}")


def _name(ds: Dataset | str) -> str:
    if isinstance(ds, Dataset):
        return ds.name
    if not isinstance(ds, str):
        raise PipelineError(f"dataset: expected a Dataset or a data set name, got {type(ds).__name__}")
    return ds


def _path(x: Any, what: str = "path") -> str:
    """An Export/Run/QuerySet/Answers or a path, as the path string the stages take (``what``: the
    argument's name, for the error)."""
    if hasattr(x, "path"):
        return str(x.path)
    if not isinstance(x, (str, Path)):
        raise PipelineError(f"{what}: expected a path or a result of the API, got {type(x).__name__}")
    return str(x)


# ------------------------------------------------------------------------------------------ data sets
USER_OPTIONS = ("split", "seed", "columns", "batch_size", "progress", "from_store", "confidence_property",
                "rel_types", "name_property")


@_one_line
def ingest(name: str, source: str | Path | None = None, *, store: str | None = None, **options: Any) -> Dataset:
    r"""Load a data set into the graph store, like ``pipeline ingest``; returns it as a :class:`Dataset`.

    A benchmark by name (``source``: a local folder of its files, as ``--source``), or your own uncertain KG
    from ``source``, a file (TSV, CSV or Parquet with head, relation, tail, confidence) or a folder of
    train/valid/test files (as ``--from``). options: split ("0.8,0.1,0.1"), seed, columns
    ("s,p,o,w"), batch_size, progress; from_store=URI with confidence_property, rel_types, name_property
    for a KG already in a graph store. Re-ingesting unchanged input changes nothing.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> toy = pl.ingest("toy", source=tsv, progress=False)
    >>> toy.name, len(toy.entities), list(toy.relations["name"])
    ('toy', 4, ['knows', 'likes'])
    """
    from loaders import BENCHMARKS
    from pipeline.stages.user_ingest import ingest_benchmark, ingest_user

    if not isinstance(name, str):
        raise PipelineError(f"name: expected a data set name, got {type(name).__name__}")
    _check_options(options, USER_OPTIONS, "ingest")
    progress = bool(options.pop("progress", True))
    from_store = options.pop("from_store", None)
    if name in BENCHMARKS and from_store is None:
        extra = set(options) - {"batch_size"}
        if extra:
            raise PipelineError(f"ingest {name}: {', '.join(sorted(extra))} apply to your own KG, not a benchmark")
        ingest_benchmark(name, None if source is None else str(source), store, options.get("batch_size", 10_000),
                         progress)
        return Dataset(name, store)
    if source is None and from_store is None:
        from loaders import get_spec

        get_spec(name)  # an unknown name: one line with the close ones
        raise PipelineError(f"ingest {name}: give source=FILE_OR_FOLDER (your own KG) or from_store=URI")
    ingest_user(name, None if source is None else str(source), from_store, store, progress=progress, **options)
    return Dataset(name, store)


@_one_line
def dataset(name: str, *, store: str | None = None) -> Dataset:
    r"""A data set already ingested (or a benchmark, whose files the loaders find): names, facts, stats.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tsv, progress=False)
    >>> toy = pl.dataset("toy")
    >>> toy.facts.sort_values("confidence").iloc[-1][["head", "relation", "tail"]].tolist()
    ['ann', 'knows', 'bob']
    >>> toy.stats()[["relation", "test"]].to_dict("list")
    {'relation': ['knows', 'likes'], 'test': [3, 1]}
    """
    from loaders import REGISTRY

    return Dataset(REGISTRY.canonical(name), store)


# ----------------------------------------------------------------------------------------------- query
@_one_line
def query(
    text: str,
    *,
    dataset: Dataset | str,
    graph: str | None = None,
    adjacency: Export | str | Path | None = None,
    calibration: str | Path | Sequence[str | Path] | None = None,
    top: int | None = None,
    explain: int = 0,
    cycle_cap: int | None = None,
) -> Ranking:
    r"""Answer one soft query exactly, like ``pipeline query``: on an observed graph (``graph`` train, valid
    or test) or a neural adjacency export (``adjacency``: an :class:`Export` or its folder, with the saved
    ``calibration`` files of ``pipeline answer`` if any). top: how many answers (None: all); explain: the
    witnesses of the top K answers.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tsv, progress=False)
    >>> r = pl.query("knows(ann, ?x, 0.5) & knows(?x, ?y, 0.5)", dataset="toy", graph="test", explain=1)
    >>> r.frame
       rank  eid name  utility
    0     1    2  cid      1.5
    >>> e = r.explanations[0]
    >>> e.witness, [(a.relation, a.tail, a.value) for a in e.atoms]
    ({'?x': 'bob'}, [('knows', 'bob', 0.9), ('knows', 'cid', 0.6)])
    >>> print(e.text.splitlines()[0])
    #1 cid  utility 1.5
    """
    from pipeline.stages.ask import ask
    from pipeline.stages.witness_records import witness_lines

    if isinstance(calibration, (str, Path)):
        calibration = (calibration,)
    ans = ask(text, _name(dataset), graph=graph, adjacency=None if adjacency is None else _path(adjacency, "adjacency"),
              top=top, cycle_cap=cycle_cap, explain=int(explain) if explain else False,
              calibration=tuple(str(c) for c in calibration or ()))
    frame = pd.DataFrame(ans.rows, columns=["eid", "name", "utility"])
    frame.insert(0, "rank", range(1, len(frame) + 1))
    explanations = []
    for i, rec in enumerate(ans.witnesses or []):
        atoms = [Atom(a["relation"], a["head"], a["tail"], a["confidence"], a["source"], a["alpha"], a["beta"],
                      a["value"], bool(a.get("negated")), a.get("forbids")) for a in rec["atoms"]]
        explanations.append(Explanation(i + 1, rec["eid"], rec["name"], rec["utility"],
                                        {v: w["name"] for v, w in rec["witness"].items()}, atoms,
                                        "\n".join(witness_lines(i + 1, rec)), rec))
    return Ranking(frame, explanations, ans.query, ans.source, ans.n_answers, ans.approximate, ans.empty_reason)


# ----------------------------------------------------------------------------------- train and export
TRAIN_OPTIONS = ("psl", "epochs", "dim", "lr", "batch_size", "negatives", "patience", "select_on", "seed",
                 "device", "resume", "overwrite", "source", "config", "progress")


@_one_line
def train(dataset: Dataset | str, *, model: str = "ukge_logi", out: str | Path, **options: Any) -> Run:
    r"""Train an uncertain-KG embedding, like ``pipeline train``: on the train facts, selected on valid,
    with the test MSE/MAE in ``metrics``. options: epochs, dim, lr, batch_size, negatives, patience,
    select_on, seed, device, psl, resume, overwrite, config (a saved config.json), progress.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", progress=False)
    >>> run = pl.train("toy", out=tmp / "run", epochs=2, dim=8, device="cpu", progress=False)
    >>> run.path.name, list(run.metrics.columns)
    ('run', ['n', 'MSE', 'MAE'])
    """
    from pipeline.models.registry import BACKBONES
    from pipeline.models.stage import train_dataset

    _check_options(options, TRAIN_OPTIONS, "train")
    progress = bool(options.pop("progress", True))
    done = train_dataset(_name(dataset), BACKBONES.canonical(model), out, config_file=options.pop("config", None),
                         source=options.pop("source", None), resume=bool(options.pop("resume", False)),
                         overwrite=bool(options.pop("overwrite", False)), progress=progress, **options)
    res = done.results
    metrics = pd.DataFrame(
        [{"split": k, "n": v["n"], "MSE": v["mse"], "MAE": v["mae"]} for k, v in res.items()
         if isinstance(v, dict) and "mse" in v],
        columns=["split", "n", "MSE", "MAE"],
    ).set_index("split")
    return Run(done.path, metrics, res)


@_one_line
def export(
    run: Run | str | Path,
    *,
    threshold: float | None = None,
    top_k: int | None = None,
    out: str | Path | None,
    device: str | None = None,
    allow_dense: bool = False,
    progress: bool = True,
) -> Export:
    r"""Write a trained run's neural adjacency, like ``pipeline export``: every (h, r, t) predicted at or
    above ``threshold`` (default 0.1), or only each (head, relation)'s ``top_k`` best tails among them. An
    export keeping more than a third of all pairs is refused unless ``allow_dense``.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", progress=False)
    >>> run = pl.train("toy", out=tmp / "run", epochs=2, dim=8, device="cpu", progress=False)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", progress=False)
    >>> len(adj.facts) == adj.n_facts <= 4 * 2, list(adj.facts.columns)
    (True, ['head', 'relation', 'tail', 'confidence'])
    """
    from pipeline.stages.export import MAX_FRACTION, export_adjacency

    man = export_adjacency(_path(run, "run"), 0.1 if threshold is None else threshold, out, device=device,
                           progress=progress, top_k=top_k, max_fraction=1.0 if allow_dense else MAX_FRACTION)
    return Export(Path(man["path"]), man)


# ------------------------------------------------------------------------ sample, answer, evaluate
@_one_line
def sample(
    dataset: Dataset | str,
    *,
    split: str,
    alpha: str,
    beta: str,
    per_type: int | None,
    seed: int,
    out: str | Path,
    types: Sequence[str] | str | None = None,
    store: str | None = None,
    browse: bool = True,
    progress: bool = True,
) -> QuerySet:
    r"""Sample soft queries with exact ground truth by walks over the store, like ``pipeline sample``
    (valid/test keep only the queries the split's graph answers differently). types: names or "1p,2p"
    (None: the split's defaults); store: default the :class:`Dataset`'s; browse: also write (:Query) nodes
    into the store.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", progress=False)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", progress=False)
    >>> qs.path.name, qs.meta["split"], set(qs.frame["type"])
    ('toy_train_zero_equal.parquet', 'train', {'1p'})
    """
    from pipeline.formats.queryset import read_query_set
    from pipeline.sampling.requirements import ALPHA_MODES, BETA_MODES
    from pipeline.sampling.run import sample_dataset

    if isinstance(types, str):
        types = [t.strip() for t in types.split(",") if t.strip()]
    if store is None and isinstance(dataset, Dataset):
        store = dataset.store
    res = sample_dataset(_name(dataset), out, split=split, types=list(types) if types else None, per_type=per_type,
                         alpha=ALPHA_MODES.canonical(alpha), beta=BETA_MODES.canonical(beta), seed=seed,
                         store_uri=store, browse=browse, progress=progress)
    qs = read_query_set(res["file"])
    return QuerySet(Path(res["file"]), qs.frame, qs.meta, res)


ANSWER_OPTIONS = ("method", "train", "allow_split_mismatch", "run", "l_epochs", "device", "seed", "explain",
                  "union", "progress", "write_back", "store", "workers")


@_one_line
def answer(
    queries: QuerySet | str | Path,
    *,
    adjacency: Export | str | Path | None = None,
    model: str | Path | None = None,
    calibration: str = "none",
    valid: QuerySet | str | Path | None = None,
    out: str | Path | None = None,
    **options: Any,
) -> Answers:
    r"""Answer a query set, like ``pipeline answer``: SRC over ``adjacency`` (an :class:`Export` or its
    folder) with a ``calibration`` (none, D, L or D+L; D chooses delta on the ``valid`` set, L is fitted on
    options["train"]), or a query-embedding baseline run (``model``, from ``pipeline train-qe``). The
    answers file goes to ``out`` (default: ``answers/`` beside the queries). options: method, train,
    allow_split_mismatch, run, l_epochs, device, seed, explain (witnesses of the top K), union, progress,
    workers (processes sharing the loaded export; default every core, 1 = this process, like ``--workers``);
    write_back=True writes the top answers (and witnesses) into the store (``store``), like ``--write-back``.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", progress=False)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", progress=False)
    >>> run = pl.train("toy", out=tmp / "run", epochs=2, dim=8, device="cpu", progress=False)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", progress=False)
    >>> ans = pl.answer(qs, adjacency=adj, out=tmp / "ans", progress=False)
    >>> ans.label, sorted(set(ans.frame["query_id"])) == sorted(qs.frame["id"]), "name" in ans.frame
    ('ukge_logi SRC', True, True)
    """
    from loaders import load
    from pipeline.formats import answers as col
    from pipeline.formats.answers import read_answers
    from pipeline.methods import METHODS, MethodOptions
    from pipeline.methods.calibration import CALIBRATIONS
    from pipeline.stages.answer import AnswerOptions, answer_queries

    _check_options(options, ANSWER_OPTIONS, "answer")
    method_name = options.get("method")
    train_set = options.get("train")
    method = MethodOptions(
        name=None if method_name is None else METHODS.canonical(method_name),
        adjacency=None if adjacency is None else _path(adjacency, "adjacency"),
        model_run=None if model is None else str(model),
        calibration=CALIBRATIONS.canonical(calibration),
        union=options.get("union"),
        run_dir=options.get("run"),
        l_epochs=int(options.get("l_epochs", 20)),
        device=options.get("device"),
        seed=int(options.get("seed", 0)),
    )
    how = AnswerOptions(
        out_dir=None if out is None else str(out),
        valid_queries=None if valid is None else _path(valid, "valid"),
        train_queries=None if train_set is None else _path(train_set, "train"),
        allow_split_mismatch=bool(options.get("allow_split_mismatch", False)),
        explain=int(options.get("explain", 0)),
        write_back=bool(options.get("write_back")),
        store=options.get("store"),
        progress=bool(options.get("progress", True)),
    )
    from dataclasses import replace

    from pipeline.executors import answer_executor

    workers = options.get("workers")
    with answer_executor(workers=None if workers is None else int(workers)) as executor:
        report = dict(answer_queries(_path(queries, "queries"), method, replace(how, executor=executor)))
    read = read_answers(report["path"])
    frame = read.frame.copy()
    if col.ENTITY_NAME in frame:
        frame["name"] = frame[col.ENTITY_NAME]
    else:
        names = load(read.meta["dataset"]).entities["name"].to_numpy()
        frame["name"] = names[frame[col.ENTITY].to_numpy()]
    return Answers(Path(report["path"]), read.label, frame, report)


@_one_line
def evaluate(answers: Answers | str | Path) -> pd.DataFrame:
    r"""The metrics x100 of one answers file, like ``pipeline evaluate``'s table: index tau, rho, MAP,
    NDCG; columns the query types in the paper's order, then avg (the numbers of ``pipeline evaluate
    --json``'s ``summary``; NaN where a metric is undefined on every query of a type). Writes nothing.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", progress=False)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", progress=False)
    >>> run = pl.train("toy", out=tmp / "run", epochs=2, dim=8, device="cpu", progress=False)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", progress=False)
    >>> table = pl.evaluate(pl.answer(qs, adjacency=adj, out=tmp / "ans", progress=False))
    >>> list(table.index), list(table.columns)
    (['tau', 'rho', 'MAP', 'NDCG'], ['1p', 'avg'])
    """
    from pipeline.core.metrics import METRICS
    from pipeline.formats.answers import find_answer_files
    from pipeline.stages.evaluate import evaluate_file, ordered_types

    path = Path(_path(answers, "answers"))
    files = find_answer_files(path)  # a missing path: the command's line
    if len(files) != 1:
        raise PipelineError(f"{path}: {len(files)} answers files; evaluate one at a time")
    summary = evaluate_file(files[0])["summary"]
    types = ordered_types({t for by in summary.values() for t in by if t != "avg"})
    rows = [m for m in METRIC_ROWS if m in summary] + [m for m in summary if m not in METRIC_ROWS]
    frame = pd.DataFrame(
        [[summary[m].get(t, float("nan")) for t in [*types, "avg"]] for m in rows],
        index=[METRICS[m].label if m in METRICS else m for m in rows],
        columns=[*types, "avg"],
    )
    frame.index.name, frame.columns.name = "metric", "type"
    return frame


# ------------------------------------------------------------------------------------------- the store
@_one_line
def cypher(statement: str, params: dict[str, Any] | None = None, *, store: str | None = None) -> pd.DataFrame:
    r"""Run one Cypher statement on the project's store (authenticated), like ``pipeline cypher``: its rows
    as a DataFrame (nodes and relationships as their property maps).

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tsv, progress=False)
    >>> pl.cypher("MATCH (e:Entity {dataset: $d}) RETURN e.name AS name ORDER BY name", {"d": "toy"})
      name
    0  ann
    1  bob
    2  cid
    3  dan
    """
    from pipeline.store import query_store

    return pd.DataFrame(query_store(statement, params, store))
