r"""The Python API: ``import pipeline as pl`` gives the stages of the command line as functions that return
the stages' own typed values with pandas frames (a :class:`~pipeline.formats.queryset.QuerySet`, a
:class:`~pipeline.models.runs.Run`, :class:`~pipeline.formats.answers.Answers`, a
:class:`~pipeline.stages.ask.Ranking`...). Each calls the same stage function as its command, so the numbers
are the command's; its keyword options are the stage's declared options (:mod:`pipeline.stages.options`:
``help(pl.answer)`` lists them), checked the same way; errors are :class:`PipelineError` subclasses whose
messages name the keyword (``per_type=0``) where the command names the flag; long work shows the command's
progress bars (``quiet=True`` hides them).

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
from pipeline.api_types import Dataset, Export
from pipeline.core.errors import PathError, PipelineError
from pipeline.core.options import api_function, check_call, declared, split_options
from pipeline.formats.answers import Answers
from pipeline.formats.queryset import QuerySet
from pipeline.methods.options import LOptions, MethodOptions
from pipeline.models.runs import Run
from pipeline.stages.ask import Ranking
from pipeline.stages.options import AnswerOptions, ExportOptions, IngestOptions, SampleOptions, TrainOptions
from pipeline.stages.reproduce import Experiment, ReproduceConfig
from pipeline.stages.witness_records import Explanation, WitnessAtom  # noqa: F401 (re-exported: pl.Explanation, ...)

__all__ = list(_package.__all__)  # the public names, listed once in pipeline/__init__.py

F = TypeVar("F", bound=Callable[..., Any])


def _one_line(fn: F) -> F:
    """An OSError about a path the caller gave becomes a :class:`PathError` (a PipelineError and still an
    OSError) with the CLI's line, as every command reports it; a misspelled keyword is a PipelineError with
    the closest ones (:func:`~pipeline.core.options.check_call`), not a bare TypeError."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from pipeline.core.config import check_environment

        check_call(wrapper, args, kwargs)
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
@_one_line
@api_function(IngestOptions)
def ingest(name: str, source: str | Path | pd.DataFrame | None = None, *, from_store: str | None = None,
           **options: Any) -> Dataset:
    r"""Load a data set into the graph store, like ``pipeline ingest``; returns it as a :class:`Dataset`.

    A benchmark by name (``source``: a local folder of its files, as ``--source``), or your own uncertain KG
    from ``source``: a pandas DataFrame (columns head, relation, tail, confidence, by name in any case;
    optionally split: train|valid|test per row), a file (TSV, CSV or Parquet with those columns) or a folder
    of train/valid/test files (as ``--from``); or ``from_store``, a graph store URI (as ``--from-store``). A
    DataFrame goes through the same validation (errors name its row and column), record and store load as a
    file. Re-ingesting unchanged input changes nothing. Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> toy = pl.ingest("toy", source=tsv, quiet=True)
    >>> toy.name, len(toy.entities), list(toy.relations["name"])
    ('toy', 4, ['knows', 'likes'])
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"head": ["ann", "bob"], "relation": ["knows", "knows"], "tail": ["bob", "cid"],
    ...                       "confidence": [0.9, 0.6], "split": ["train", "train"]})
    >>> len(pl.ingest("toy_frame", frame, quiet=True).entities)
    3
    """
    from loaders import BENCHMARKS
    from pipeline.stages.user_ingest import ingest_benchmark, ingest_user

    if not isinstance(name, str) or not name:
        raise PipelineError(f"ingest: name must be a data set name (a string), not {name!r}")
    (o,) = split_options(options, IngestOptions, what="ingest")
    if name in BENCHMARKS and from_store is None:
        if source is not None and not isinstance(source, (str, Path)):  # a frame's text is no folder name
            raise PipelineError(f"ingest {name}: a benchmark is read from its own files (source= is a folder "
                                f"holding them, not a {type(source).__name__}); give your own KG another name")
        extra = set(options) - {"batch_size", "store", "progress", "quiet"}
        if extra:
            raise PipelineError(f"ingest {name}: {', '.join(sorted(extra))} apply to your own KG, not a benchmark")
        report, where = ingest_benchmark(name, None if source is None else str(source), o.store, o.batch_size, o.output)
        o.output.summary(f"{name}: {report.facts} facts {'already in' if report.skipped else 'loaded into'} {where}")
        return Dataset(name, o.store)
    if source is None and from_store is None:
        from loaders import get_spec

        get_spec(name)  # an unknown name: one line with the close ones
        raise PipelineError(f"ingest {name}: give source=FILE_OR_FOLDER (your own KG) or from_store=URI")
    if isinstance(source, pd.DataFrame):
        rep = ingest_user(name, from_frame=source, options=o)
    else:
        rep = ingest_user(name, from_path=None if source is None else str(source), from_store=from_store, options=o)
    sr = rep["store_report"]
    done = "unchanged" if sr["skipped"] else "replaced" if sr["replaced"] else "loaded"
    o.output.summary(f"{name}: {rep['entities']} entities, {rep['relations']} relations, rows "
                     + " / ".join(f"{k} {v}" for k, v in (rep["rows"] or {}).items())
                     + f"; {'unchanged' if rep['unchanged'] else 'recorded'}, store: {done}")
    return Dataset(name, o.store)


@_one_line
def dataset(name: str, *, store: str | None = None) -> Dataset:
    r"""A data set already ingested (or a benchmark, whose files the loaders find): names, facts, stats.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tsv, quiet=True)
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
    >>> _ = pl.ingest("toy", source=tsv, quiet=True)
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

    if isinstance(calibration, (str, Path)):
        calibration = (calibration,)
    return ask(text, _name(dataset), graph=graph, adjacency=None if adjacency is None else _path(adjacency),
               top=top, cycle_cap=cycle_cap, explain=explain,  # checked there: an integer, not 1.5 taken as 1
               calibration=tuple(str(c) for c in calibration or ()))


# ----------------------------------------------------------------------------------- train and export
@_one_line
@api_function(TrainOptions)
def train(dataset: Dataset | str, **options: Any) -> Run:
    r"""Train an uncertain-KG embedding, like ``pipeline train``: on the train facts, selected on valid,
    with the test MSE/MAE in ``metrics`` and the link-prediction figures (unKR's protocol) in
    ``link_prediction``. Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", quiet=True)
    >>> run = pl.train("toy", model="ukge_logi", out=tmp / "run", epochs=2, dim=8, device="cpu", quiet=True)
    >>> run.path.name, list(run.metrics.columns)
    ('run', ['n', 'MSE', 'MAE'])
    """
    from pipeline.stages.train import train_dataset

    (o,) = split_options(options, TrainOptions, what="train")
    done = train_dataset(_name(dataset), o)
    out = o.output
    lines = done.summary_lines(o)
    if line := done.link_prediction_line():
        lines.append(line)
    out.summary("\n".join(lines))  # one print: one output of a notebook cell
    for w in done.warnings():
        out.warn(w)
    return done.run


@_one_line
@api_function(ExportOptions)
def export(run: Run | str | Path, **options: Any) -> Export:
    r"""Write a trained run's neural adjacency, like ``pipeline export``: every (h, r, t) predicted at or
    above ``threshold``, or only each (head, relation)'s ``top_k`` best tails among them. Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", quiet=True)
    >>> run = pl.train("toy", model="ukge_logi", out=tmp / "run", epochs=2, dim=8, device="cpu", quiet=True)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", quiet=True)
    >>> len(adj.facts) == adj.n_facts <= 4 * 2, list(adj.facts.columns)
    (True, ['head', 'relation', 'tail', 'confidence'])
    """
    from pipeline.stages.export import export_adjacency, export_summary

    (o,) = split_options(options, ExportOptions, what="export")
    man = export_adjacency(_path(run), o)
    line, warning = export_summary(man)
    o.output.summary(line)
    if warning:
        o.output.warn(warning)
    return Export(Path(man["path"]), man)


# ------------------------------------------------------------------------ sample, answer, evaluate
@_one_line
@api_function(SampleOptions)
def sample(dataset: Dataset | str, **options: Any) -> QuerySet:
    r"""Sample soft queries with exact ground truth by walks over the store, like ``pipeline sample``
    (valid/test keep only the queries the split's graph answers differently). The store defaults to the
    :class:`Dataset`'s. Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", quiet=True)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", quiet=True)
    >>> qs.path.name, qs.meta["split"], set(qs.frame["type"])
    ('toy_train_zero_equal.parquet', 'train', {'1p'})
    """
    from dataclasses import replace

    from pipeline.formats.queryset import read_query_set
    from pipeline.stages.sample import sample_dataset

    (o,) = split_options(options, SampleOptions, what="sample")
    if o.store is None and isinstance(dataset, Dataset):
        o = replace(o, store=dataset.store)
    res = sample_dataset(_name(dataset), o)
    kept = ", ".join(f"{r['type']} {r['kept']}" for r in res["types"] if r["kept"])
    o.output.summary(f"sampled {res['queries']} queries ({kept}) into {res['file']} in {res['seconds']:.1f} s")
    qs = read_query_set(res["file"])
    qs.summary = res
    return qs


@_one_line
@api_function(MethodOptions, AnswerOptions)
def answer(queries: QuerySet | str | Path, **options: Any) -> Answers:
    r"""Answer a query set, like ``pipeline answer``: SRC over ``adjacency`` (an :class:`Export` or its
    folder) with a ``calibration`` (none, D, L or D+L; D chooses delta on ``valid_queries``, L is fitted on
    ``train_queries``), or a query-embedding baseline run (``model``, from ``pipeline train-qe``). The
    answers file goes to ``out`` (default: ``answers/`` beside the queries); the frame returned adds each
    entity's ``name``. Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", quiet=True)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", quiet=True)
    >>> run = pl.train("toy", model="ukge_logi", out=tmp / "run", epochs=2, dim=8, device="cpu", quiet=True)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", quiet=True)
    >>> ans = pl.answer(qs, adjacency=adj, out=tmp / "ans", quiet=True)
    >>> ans.label, sorted(set(ans.frame["query_id"])) == sorted(qs.frame["id"]), "name" in ans.frame
    ('ukge_logi SRC', True, True)
    """
    from dataclasses import replace

    from loaders import load
    from pipeline.formats import answers as col
    from pipeline.formats.answers import read_answers
    from pipeline.stages.answer import answer_queries

    method, how = split_options(options, MethodOptions, AnswerOptions, what="answer")
    paths = {k: _path(getattr(method, k)) for k in ("adjacency", "model", "run") if getattr(method, k) is not None}
    sets = {k: _path(getattr(how, k)) for k in ("valid_queries", "train_queries") if getattr(how, k) is not None}
    report = dict(answer_queries(None if queries is None else _path(queries, "queries"), replace(method, **paths),
                                 replace(how, **sets)))
    ans = read_answers(report["path"])
    frame = ans.frame
    if col.ENTITY_NAME in frame:
        frame["name"] = frame[col.ENTITY_NAME]
    else:
        names = load(ans.meta["dataset"]).entities["name"].to_numpy()
        frame["name"] = names[frame[col.ENTITY].to_numpy()]
    ans.report = report
    how.output.summary(f"{report['method']}: {len(set(frame['query_id']))} queries answered in {report['seconds']:.1f} s "
                       f"into {report['path']}" + (f" (delta {report['delta']:g})" if "delta" in report else ""))
    return ans


@_one_line
def evaluate(answers: Answers | str | Path) -> pd.DataFrame:
    r"""The metrics x100 of one answers file, like ``pipeline evaluate``'s table: index tau, rho, MAP,
    NDCG, then ``MAP chance`` and ``NDCG chance`` (a random ranking of the same answers: what a method that
    knows nothing scores, tie-aware); columns the query types in the paper's order, then avg (the numbers
    of ``pipeline evaluate --json``'s ``summary`` and ``random``; NaN where a metric is undefined on every
    query of a type). A type with queries where every entity is an answer (any ranking scores MAP 100
    there) is named in a warning line and in ``.attrs["every_entity"]``. Writes nothing.

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tmp / "toy.tsv", quiet=True)
    >>> qs = pl.sample("toy", split="train", alpha="zero", beta="equal", per_type=2, seed=0, types="1p",
    ...                out=tmp / "q", quiet=True)
    >>> run = pl.train("toy", model="ukge_logi", out=tmp / "run", epochs=2, dim=8, device="cpu", quiet=True)
    >>> adj = pl.export(run, threshold=0.01, top_k=1, out=tmp / "adj", quiet=True)
    >>> table = pl.evaluate(pl.answer(qs, adjacency=adj, out=tmp / "ans", quiet=True))
    >>> list(table.index), list(table.columns)
    (['tau', 'rho', 'MAP', 'NDCG', 'MAP chance', 'NDCG chance'], ['1p', 'avg'])
    """
    from pipeline.formats.answers import find_answer_files
    from pipeline.stages.evaluate import evaluate_file, metrics_frame

    path = Path(_path(answers, "answers"))
    files = find_answer_files(path)  # a missing path: the command's line
    if len(files) != 1:
        raise PipelineError(f"{path}: {len(files)} answers files; evaluate one at a time")
    report = evaluate_file(files[0])
    frame = metrics_frame(report)
    frame.attrs["every_entity"] = report.get("every_entity") or {}
    return frame


# ------------------------------------------------------------------------------------- one experiment
@_one_line
@api_function(ReproduceConfig, LOptions)
def run(dataset: Dataset | str, *, out: str | Path | None = None, store: str | None = None,
        runs: dict[str, str | Path] | None = None, docs: str | Path | None = None, progress: bool = True,
        quiet: bool = False, **options: Any) -> Experiment:
    r"""One experiment in one call, like ``pipeline reproduce``: ingest (a benchmark; your own KG after
    ``pl.ingest``), sample the train/valid/test query sets, train each backbone, export it, answer the test
    set with SRC and each calibration (and the baselines), evaluate; returns an :class:`Experiment` (the
    table, each artifact's path, each stage's seconds). Resumable: the same call again skips every stage
    whose inputs are unchanged (``out``: the work folder, default PIPELINE_HOME/reproduce/DATASET-sSEED;
    ``runs``: {backbone: run directory} already trained; ``docs``: a folder whose results data, ``results*.json``, gets the tables and this run; ``tools/pages.py``
    renders the results pages from it).
    Options:

    {options}

    >>> import pathlib, tempfile, pipeline as pl
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (tmp / "toy.tsv").write_text("head\trelation\ttail\tconfidence\n" + "".join(
    ...     f"p{i}\tknows\tp{(i + 1) % 12}\t0.9\np{i}\thelps\tp{(i + 1) % 12}\t0.6\np{i}\thelps\tp{(i + 3) % 12}\t0.5\n"
    ...     for i in range(12)))
    >>> kg = pl.ingest("toy_run", source=tmp / "toy.tsv", quiet=True)
    >>> exp = pl.run(kg, out=tmp / "exp", epochs=2, dim=8, per_type=2, train_per_type=2, calibrations="none", threshold=0.95,
    ...              device="cpu", quiet=True)
    >>> list(exp.table.columns), list(exp.table.index)
    (['tau', 'rho', 'MAP', 'NDCG', 'MAP chance', 'NDCG chance'], ['ukge_logi SRC'])
    >>> again = pl.run(kg, out=tmp / "exp", epochs=2, dim=8, per_type=2, train_per_type=2, calibrations="none", threshold=0.95,
    ...                device="cpu", quiet=True)
    >>> bool(again.stages["skipped"].all()), again.table.equals(exp.table)
    (True, True)
    """
    from pipeline.core import config
    from pipeline.core.progress import output
    from pipeline.stages.reproduce import reproduce

    # an unknown keyword: one line, close matches; calibration L's keywords are LOptions' (as pl.answer's)
    (l_opts,) = split_options(options, LOptions, what="run", known=ReproduceConfig)
    l_names = {d.name for d in declared(LOptions)}
    rest = {k: v for k, v in options.items() if k not in l_names}
    cfg = ReproduceConfig(_name(dataset), **rest, l_epochs=l_opts.l_epochs, l_settings=l_opts.l_settings())
    if store is None and isinstance(dataset, Dataset):
        store = dataset.store
    work = Path(out) if out is not None else config.home() / "reproduce" / f"{cfg.dataset}-s{cfg.seed}"
    shown = output(progress, quiet)
    summary = reproduce(cfg, work, docs, store, log=shown.summary, progress=shown,
                        runs={m: str(p) for m, p in (runs or {}).items()})
    exp = Experiment.of(summary)
    shown.summary(f"{cfg.dataset}: {len(exp.table)} methods evaluated in {exp.seconds:.1f} s; work folder {exp.out}")
    return exp


# ------------------------------------------------------------------------------------------- the store
@_one_line
def cypher(statement: str, params: dict[str, Any] | None = None, *, store: str | None = None) -> pd.DataFrame:
    r"""Run one Cypher statement on the project's store (authenticated), like ``pipeline cypher``: its rows
    as a DataFrame (nodes and relationships as their property maps).

    >>> import pathlib, tempfile, pipeline as pl
    >>> tsv = pathlib.Path(tempfile.mkdtemp(), "toy.tsv")
    >>> _ = tsv.write_text("head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\n"
    ...                    "bob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\ncid\tknows\tdan\t0.7\n")
    >>> _ = pl.ingest("toy", source=tsv, quiet=True)
    >>> pl.cypher("MATCH (e:Entity {dataset: $d}) RETURN e.name AS name ORDER BY name", {"d": "toy"})
      name
    0  ann
    1  bob
    2  cid
    3  dan
    """
    from pipeline.store import query_store

    return pd.DataFrame(query_store(statement, params, store))
