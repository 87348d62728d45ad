"""Evaluation tables of answered query sets: metrics per query, per type and averaged, x100, like the paper.

Per query: the ground-truth answers a_1..a_n (best first) and their predicted ranks among all entities,
read from an answers file (:mod:`pipeline.formats.answers`), go through every metric of :data:`pipeline.core.metrics.METRICS`.
Per type: the mean over the queries where the metric is defined. ``avg``: the mean over the types (every
type weighs the same, as in the paper's tables). Summaries are ``{metric: {type or "avg": value x100}}``;
``docs/results.json`` is ``{dataset: {method: summary}}`` (:func:`update_results`); tools/pages.py renders
``docs/results.md`` from it.
"""

from __future__ import annotations

import dataclasses
import math
import re
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core import atomic
from pipeline.core.errors import PipelineError
from pipeline.core.metrics import METRICS, PAPER_DRAWS, Ranked, chance, metric_columns
from pipeline.core.progress import output
from pipeline.core.provenance import provenance
from pipeline.formats import answers as col
from pipeline.formats.answers import find_answer_files, read_answers
from pipeline.softquery.types import QUERY_TYPES, ordered_types

# The design's 12 types in the paper's column order (types not listed here follow, sorted).
TYPE_ORDER = tuple(QUERY_TYPES)

# The paper's averages x100 (the targets), for the comparison beside our tables; a metric the
# project has no source for is left out (PPI5k SRC / SRC(L): tau and MAP as the calibration-L issue quotes them).
PAPER: dict[str, dict[str, dict[str, float]]] = {
    "cn15k": {
        "SRC(D+L)": {"tau": 12.4, "rho": 16.2, "map": 13.7, "ndcg": 23.2},
        "LogicE+NE": {"tau": 4.8, "rho": 5.8, "map": 7.0, "ndcg": 11.2},
        "ConE+NE": {"tau": 8.1, "rho": 10.0, "map": 7.7, "ndcg": 13.2},
    },
    "ppi5k": {
        "SRC(D+L)": {"tau": 58.2, "rho": 68.7, "map": 64.1, "ndcg": 70.1},
        "SRC(L)": {"tau": 57.7, "map": 69.8, "ndcg": 71.6},
        "SRC": {"tau": 56.5, "map": 68.4},
        "LogicE+NE": {"tau": 14.8, "rho": 20.7, "map": 8.0, "ndcg": 16.4},
        "ConE+NE": {"tau": 30.7, "rho": 40.8, "map": 44.1, "ndcg": 49.2},
    },
}

Summary = dict[str, dict[str, float]]  # {metric: {type or "avg": value x100}}

# docs/results.json's key for the tables' backbones ({dataset: summary}), beside the data sets' method tables
BACKBONES = "backbones"


def query_rankings(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[Ranked]]:
    """(query ids, types, one :class:`Ranked` per query) of an answers frame (columns query_id, type,
    utility, rank, rank_first, ties, truth_utility, truth_rank; see pipeline.formats.answers), queries
    sorted by id; a query without ground-truth answers gets an empty Ranked."""
    queries = frame[[col.QUERY_ID, col.TYPE]].drop_duplicates(col.QUERY_ID).sort_values(col.QUERY_ID)
    truth = frame[frame[col.TRUTH_RANK] > 0].sort_values([col.QUERY_ID, col.TRUTH_RANK])
    ids = truth[col.QUERY_ID].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, dtype=np.int64)
    cols = {
        c: np.split(truth[c].to_numpy(dt), starts[1:]) if len(ids) else []
        for c, dt in ((col.TRUTH_UTILITY, np.float64), (col.UTILITY, np.float64), (col.RANK_FIRST, np.int64),
                      (col.TIES, np.int64), (col.RANK, np.int64))
    }
    paper = _paper_ranks(frame)
    by_query = {
        qid: Ranked(cols[col.TRUTH_UTILITY][i], cols[col.UTILITY][i], cols[col.RANK_FIRST][i], cols[col.TIES][i],
                    cols[col.RANK][i], None if paper is None else paper.get(qid, np.zeros(0, dtype=np.int64)))
        for i, qid in enumerate(ids[starts])
    } if len(ids) else {}
    empty = Ranked(*(np.zeros(0),) * 2, *(np.zeros(0, dtype=np.int64),) * 3)
    per = [by_query.get(qid, empty) for qid in queries[col.QUERY_ID]]
    return queries[col.QUERY_ID].to_numpy(), queries[col.TYPE].to_numpy(), per


def _paper_ranks(frame: pd.DataFrame) -> dict[object, np.ndarray] | None:
    """Per query, the predicted ranks (ties by id) of the list the paper protocol reads, in its order; None
    where the answers file has no paper_rank column (its query set predates that list)."""
    if col.PAPER_RANK not in frame.columns:
        return None
    rows = frame[frame[col.PAPER_RANK] > 0].sort_values([col.QUERY_ID, col.PAPER_RANK])
    ids = rows[col.QUERY_ID].to_numpy()
    if not len(ids):
        return {}
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ranks = np.split(rows[col.RANK].to_numpy(np.int64), starts[1:])
    return dict(zip(ids[starts], ranks, strict=True))


def paper_truth_source(frame: pd.DataFrame) -> str:
    """How the paper protocol read this answers file's truth, in words for the reports."""
    if col.PAPER_RANK in frame.columns:
        return "the query file's own order (the SQUK generator's, or the published file's)"
    return f"an estimate: each tie group in {PAPER_DRAWS} random orders, averaged (the query set predates the generator's order)"


def single_as_zero(per_query: pd.DataFrame) -> Summary:
    """The paper protocol's tau and rho read as the authors' fine-tuning code (QG_soft_train.py) reads them:
    a single-answer query counted as 0 instead of left out (their solver, solve_soft_EFO1.py, leaves it
    out: :func:`summarise` with prefix ``paper_``)."""
    frame = per_query.copy()
    single = frame["paper_n"] == 1
    frame.loc[single, ["paper_tau", "paper_rho"]] = 0.0
    return {m: v for m, v in summarise(frame, prefix="paper_").items() if m in ("tau", "rho")}


def query_key(query_id: object) -> int:
    """The key that seeds one query's truth tie order under the paper protocol: its id, hashed (the same
    query gets the same order in every answers file and run)."""
    return zlib.crc32(str(query_id).encode())


def query_metrics(
    frame: pd.DataFrame, paper: bool = False, n_entities: int | None = None, tie_order: str = "shuffled"
) -> pd.DataFrame:
    """One row per query: query_id, type, n_answers and every metric (natural units, NaN if undefined);
    with paper, also the paper protocol's metrics (``paper_<name>``; tie_order: how it reads the truth's
    ties, :data:`pipeline.core.metrics.PAPER_TIE_ORDERS`) and the doubly tied pairs (``tied_pairs``,
    ``pairs``), see :func:`pipeline.core.metrics.metric_columns`; with n_entities, also each metric of a
    random ranking of that many entities (``random_<name>``, :func:`pipeline.core.metrics.chance`)."""
    qids, types, per = query_rankings(frame)
    cols = metric_columns(per, paper=paper, keys=[query_key(q) for q in qids], tie_order=tie_order)
    # a query the method answers with nothing (no entity predicted above 0): its true answers sit in the tie
    # of all entities, scored as the metrics define (the chance level); counted so the reports can say so
    best = frame.groupby(col.QUERY_ID)[col.UTILITY].max()
    answered = (best.reindex(qids).to_numpy(np.float64) > 0) if len(qids) else np.zeros(0, dtype=bool)
    if n_entities:
        rnd = metric_columns([chance(q, n_entities) for q in per])
        cols.update({f"random_{k}": v for k, v in rnd.items()})
    if paper and any(q.paper_ranks is not None for q in per):
        # the readings used before the generator's order was known, kept beside it as labelled extras: how
        # much the truth's tie order moves the paper protocol (random orders averaged; our id order reversed)
        plain = [dataclasses.replace(q, paper_ranks=None) for q in per]
        keys = [query_key(q) for q in qids]
        for prefix, order in (("paper_random_", "shuffled"), ("paper_ids_", "reversed")):
            other = metric_columns(plain, paper=True, keys=keys, tie_order=order)
            cols.update({prefix + m: other[f"paper_{m}"] for m in METRICS.names()})
    return pd.DataFrame(
        {
            "query_id": qids,
            "type": types,
            "n_answers": np.fromiter((q.n for q in per), dtype=np.int64, count=len(per)),
            "answered": answered,
            **cols,
        },
        columns=["query_id", "type", "n_answers", "answered", *cols],
    )


def summarise(per_query: pd.DataFrame, prefix: str = "") -> Summary:
    """{metric: {type: mean x100, ..., "avg": mean over types}}; types with no defined value are left out.
    prefix: read the columns ``prefix + name`` (``paper_`` for the paper protocol)."""
    out: Summary = {}
    types = ordered_types(set(per_query["type"]))
    for name in METRICS:
        by_type = {}
        for t in types:
            vals = per_query.loc[per_query["type"] == t, prefix + name].dropna()
            if len(vals):
                by_type[t] = round(float(vals.mean()) * 100.0, 4)
        by_type["avg"] = round(float(np.mean(list(by_type.values()))), 4) if by_type else math.nan
        out[name] = by_type
    return out


def undefined_counts(per_query: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{metric: {type: number of queries with answers where the metric is undefined, "all": total}} for the
    metrics that can be (tau, rho: one answer, or constant true or predicted utilities)."""
    kept = per_query[per_query["n_answers"] > 0]
    out: dict[str, dict[str, int]] = {}
    for name in METRICS:
        missing = kept[kept[name].isna()].groupby("type").size().to_dict()
        if missing:
            out[name] = {t: int(missing[t]) for t in ordered_types(set(missing))} | {"all": int(sum(missing.values()))}
    return out


def unanswered_counts(per_query: pd.DataFrame) -> dict[str, int]:
    """{type: queries with ground-truth answers that the method answers with nothing (no entity predicted
    above 0), ..., "all": their total, "of": the queries evaluated}; {} when every query has an answer.
    Their metrics are kept as defined (all entities tied: the chance level), this only makes them visible."""
    kept = per_query[per_query["n_answers"] > 0]
    none = kept[~kept["answered"].astype(bool)].groupby("type").size().to_dict()
    if not none:
        return {}
    return {t: int(none[t]) for t in ordered_types(set(none))} | {"all": int(sum(none.values())), "of": len(kept)}


def unanswered_line(report: dict[str, Any]) -> str | None:
    """One line saying how many queries have no answer over the predicted facts (None: every one has)."""
    by = report.get("unanswered") or {}
    if not by:
        return None
    per_type = ", ".join(f"{t} {n}" for t, n in by.items() if t not in ("all", "of"))
    return (f"{report['method']}: {by['all']} of {by['of']} queries have no answer over the predicted facts "
            f"({per_type}); the metrics rank their true answers among all entities tied (the chance level)")


def every_entity_counts(per_query: pd.DataFrame, n_entities: int | None) -> dict[str, list[int]]:
    """{type: [queries where every entity is a ground-truth answer, queries of the type]} for the types that
    have such a query. There every ranking, a random one included, scores MAP and NDCG 100: the numbers say
    nothing about the method (alpha 0 on a small dense graph does it)."""
    if not n_entities:
        return {}
    kept = per_query[per_query["n_answers"] > 0]
    every = kept[kept["n_answers"] >= n_entities].groupby("type").size().to_dict()
    totals = kept.groupby("type").size().to_dict()
    return {t: [int(every[t]), int(totals[t])] for t in ordered_types(set(every))}


def every_entity_line(report: dict[str, Any]) -> str | None:
    """One line naming the types where every entity is an answer of some query (None: no such type)."""
    by = report.get("every_entity") or {}
    if not by:
        return None
    parts = ", ".join(f"{t} {k} of {n}" for t, (k, n) in by.items())
    return (f"{report['method']}: every entity is an answer in some queries ({parts}): any ranking scores MAP "
            "and NDCG 100 there; sample with a higher alpha (or on a larger graph) for metrics that mean something")


def with_chance(report: dict[str, Any]) -> Summary:
    """The report's summary with the chance level beside MAP and NDCG: rows ``MAP chance`` and ``NDCG chance``
    (a random ranking of the same answers: what a method that knows nothing scores), when known."""
    rnd = report.get("random") or {}
    out = dict(report["summary"])
    for m in ("map", "ndcg"):
        if m in rnd:
            out[f"{METRICS[m].label} chance"] = rnd[m]
    return out


# the metrics' rows in a metrics frame, before the chance rows
METRIC_ROWS = ("tau", "rho", "map", "ndcg")


def metrics_frame(report: dict[str, Any]) -> pd.DataFrame:
    """One report's metrics x100 as ``pl.evaluate`` shows them: index tau, rho, MAP, NDCG, then ``MAP chance``
    and ``NDCG chance`` (:func:`with_chance`, when the answers file knows its entity count); columns the query
    types in the paper's order, then avg; NaN where a metric is undefined on every query of a type. The one
    table of ``pl.evaluate`` and of ``pl.run``'s ``Experiment`` (its ``per_type``, and ``table``'s rows)."""
    summary = with_chance(report)
    types = ordered_types({t for by in summary.values() for t in by if t != "avg"})
    rows = [*METRIC_ROWS, *(m for m in summary if m not in METRIC_ROWS)]
    frame = pd.DataFrame(
        [[summary.get(m, {}).get(t, float("nan")) for t in [*types, "avg"]] for m in rows],
        index=[METRICS[m].label if m in METRICS else m for m in rows],
        columns=[*types, "avg"],
    )
    frame.index.name, frame.columns.name = "metric", "type"
    return frame


def tied_share(per_query: pd.DataFrame) -> dict[str, float]:
    """The pairs of answers tied in both true and predicted utility, summed over the queries: among each
    query's first 100 answers (the truth the paper's protocol reads, where such pairs counted as agreement)
    {"tied_pairs", "pairs", "share"}, and among all its answers {"share_all"} (shares in percent)."""
    tied, pairs = float(per_query["tied_pairs"].sum()), float(per_query["pairs"].sum())
    tied_all, pairs_all = float(per_query["tied_pairs_all"].sum()), float(per_query["pairs_all"].sum())
    return {
        "tied_pairs": int(tied), "pairs": int(pairs), "share": round(100.0 * tied / pairs, 4) if pairs else 0.0,
        "share_all": round(100.0 * tied_all / pairs_all, 4) if pairs_all else 0.0,
    }


def query_counts(per_query: pd.DataFrame) -> dict[str, int]:
    """Number of evaluated queries per type (queries with at least one ground-truth answer)."""
    kept = per_query[per_query["n_answers"] > 0]
    counts = kept.groupby("type").size().to_dict()
    return {t: int(counts[t]) for t in ordered_types(set(counts))}


# ------------------------------------------------------------------------------------------------ tables


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1f}"


def table_rows(summary: Summary) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the paper-style table: metrics as rows, types then avg as columns."""
    types = ordered_types({t for by in summary.values() for t in by if t != "avg"})
    header = ["metric", *types, "avg"]
    rows = [
        [
            METRICS[m].label if m in METRICS else m,
            *[_fmt(summary[m].get(t)) for t in types],
            _fmt(summary[m].get("avg")),
        ]
        for m in [*(k for k in METRICS if k in summary), *sorted(set(summary) - set(METRICS))]
    ]
    return header, rows


def markdown_table(summary: Summary) -> str:
    header, rows = table_rows(summary)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def text_table(summary: Summary) -> str:
    header, rows = table_rows(summary)
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        # the metric name left-aligned, the numbers right-aligned
        return "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([fmt(header), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)])


# ------------------------------------------------------------------------------------------------ reports


def evaluate_file(path: str | Path) -> dict[str, Any]:
    """The report of one answers file: {dataset, method, file, query_set, counts, summary (x100, tie-aware),
    undefined (queries per type where tau/rho are undefined), paper_protocol (x100, the paper's evaluation
    code: ids break ties), doubly_tied (pairs of answers tied on both sides), random (x100, a uniformly
    random ranking of the same answers: the chance level of each type), every_entity (types with queries
    where every entity is an answer: :func:`every_entity_counts`)}."""
    ans = read_answers(path)
    n_entities = ans.meta.get("n_entities")
    per_query = query_metrics(ans.frame, paper=True, n_entities=int(n_entities) if n_entities else None)
    report = {
        "dataset": ans.meta["dataset"],
        "method": ans.label,
        "file": str(path),
        "query_set": ans.meta.get("query_set"),
        "counts": query_counts(per_query),
        "summary": summarise(per_query),
        "unanswered": unanswered_counts(per_query),
        "undefined": undefined_counts(per_query),
        "paper_protocol": summarise(per_query, prefix="paper_"),
        "paper_single_as_zero": single_as_zero(per_query),
        "paper_truth": paper_truth_source(ans.frame),
        **({"paper_protocol_other_orders": {
            "random ties (32 orders, averaged)": summarise(per_query, prefix="paper_random_"),
            "our id order reversed": summarise(per_query, prefix="paper_ids_"),
        }} if "paper_random_tau" in per_query.columns else {}),
        "doubly_tied": tied_share(per_query),
        **({"random": summarise(per_query, prefix="random_")} if n_entities else {}),
        "every_entity": every_entity_counts(per_query, int(n_entities) if n_entities else None),
    }
    for line in (unanswered_line(report), every_entity_line(report)):
        if line is not None:
            output().warn(line)
    return report


def evaluate_answers(
    path: str | Path, errors: list[str] | None = None
) -> list[dict[str, Any]]:
    """Evaluate an answers file or every answers file of a directory, one report per file.

    With ``errors`` (a list), a file that cannot be evaluated adds its one-line error there and the others
    go on; without it the first bad file raises."""
    reports = []
    for f in find_answer_files(path):
        try:
            reports.append(evaluate_file(f))
        except PipelineError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    return reports


def save_report(report: dict[str, Any], stem: str | Path) -> tuple[Path, Path]:
    """Write one report as ``<stem>.metrics.json`` and ``<stem>.metrics.md``; returns both paths."""
    stem = Path(stem)
    js = stem.with_name(stem.name + ".metrics.json")
    md = stem.with_name(stem.name + ".metrics.md")
    atomic.write_json(js, {**report, "provenance": provenance(inputs={"answers": report["file"]})})
    atomic.write_text(md,
        f"# {report['dataset']}: {report['method']}\n\nQueries per type: "
        + ", ".join(f"{t} {n}" for t, n in report["counts"].items())
        + "\n\n"
        + markdown_table(with_chance(report))
        + "\n\n"
        + protocol_notes(report)
    )
    return js, md


def protocol_notes(report: dict[str, Any]) -> str:
    """Markdown: where tau/rho are undefined, the doubly tied pairs, and the paper protocol's table."""
    lines = []
    for line in (unanswered_line(report), every_entity_line(report)):
        if line is not None:
            lines.append(line + ".")
    und = report.get("undefined") or {}
    for name, by in und.items():
        lines.append(
            f"{METRICS[name].label} undefined (one answer, or constant true or predicted utilities) on {by['all']} "
            "queries: " + ", ".join(f"{t} {n}" for t, n in by.items() if t != "all") + "."
        )
    tied = report.get("doubly_tied")
    if tied:
        lines.append(
            f"Answer pairs tied in both true and predicted utility: {tied['tied_pairs']:,} of {tied['pairs']:,} "
            f"({tied['share']:.1f}%) among each query's first 100 answers; {tied.get('share_all', 0):.1f}% among all."
        )
    if report.get("random"):
        lines.append(
            "\nA random ranking of the same answers (constant predictions; the chance level of each type):\n\n"
            + markdown_table({m: v for m, v in report["random"].items() if m in ("map", "ndcg")})
        )
    if report.get("paper_protocol"):
        lines.append(
            "\nPaper protocol (the authors' released evaluation, for comparison only: the truth's first 100 "
            f"answers in {report.get('paper_truth') or 'stored order'}, predicted ties by entity id, "
            "single-answer queries left out of tau and rho):\n\n"
            + markdown_table(report["paper_protocol"])
        )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------- docs/results.*


def update_results(
    reports: list[dict[str, Any]], docs: str | Path, backbones: dict[str, dict[str, Any]] | None = None
) -> list[Path]:
    """Merge reports into the data of the results pages (:mod:`pipeline.stages.docs_data`): ``results.json``
    ({dataset: {method: summary}}, and under ``"backbones"`` {dataset: the main table's backbone,
    :func:`pipeline.models.evaluation.backbone_summary`}: each data set's entry replaced only by a
    reproduction of that data set), ``results_protocol.json`` (the paper protocol, undefined counts, doubly
    tied pairs, chance) and ``results_counts.json``. A method evaluated again replaces its own entry; the
    others stay. ``python tools/pages.py`` renders docs/results.md from them. The paths written."""
    from pipeline.stages import docs_data

    atomic.check_docs_folder(docs, "docs")  # (the doors check it before any work; this is the last word)
    docs = Path(docs).expanduser()

    def results(doc: dict[str, Any]) -> None:
        for dataset, entry in (backbones or {}).items():
            doc.setdefault(BACKBONES, {})[dataset] = entry
        for r in reports:
            doc.setdefault(r["dataset"], {})[r["method"]] = r["summary"]

    def counts(doc: dict[str, Any]) -> None:
        for r in reports:
            doc.setdefault(r["dataset"], {})[r["method"]] = r["counts"]

    def protocol(doc: dict[str, Any]) -> None:
        for r in reports:
            doc.setdefault(r["dataset"], {})[r["method"]] = {
                **{k: r.get(k) for k in ("paper_protocol", "undefined", "doubly_tied", "random")},
                **{k: r[k] for k in ("paper_single_as_zero", "paper_truth", "paper_protocol_other_orders") if k in r},
            }

    return [docs_data.merge(docs, docs_data.RESULTS, results), docs_data.merge(docs, docs_data.COUNTS, counts),
            docs_data.merge(docs, docs_data.PROTOCOL, protocol)]


def _variant_key(variant: str) -> tuple[int, int, str]:
    """SRC's variants by their labels' own grammar, ``SRC`` or ``SRC(C1+C2...)``: fewer corrections first, then
    by name (SRC, SRC(D), SRC(L), SRC(D+L)); any other method after them. The tables need no registry for
    it, so this module imports no method (nor torch)."""
    m = re.fullmatch(r"SRC(?:\((.+)\))?", variant)
    if m is None:
        return (1, 0, variant)
    parts = m.group(1).split("+") if m.group(1) else []
    return (0, len(parts), "+".join(parts))


def method_order(methods: Iterable[str]) -> list[str]:
    """Method names ("BACKBONE VARIANT") by backbone, then SRC, SRC(D), SRC(L), SRC(D+L); others last."""

    def key(name: str) -> tuple[str, tuple[int, int, str]]:
        backbone, _, variant = name.rpartition(" ")
        return (backbone, _variant_key(variant))

    return sorted(methods, key=key)


# ------------------------------------------------------------------------------------------------ plots


def plot_methods(results: dict[str, Summary], out: str | Path, title: str = "") -> Path:
    """Grouped bars per query type (one group per type, one bar per method), one panel per metric.
    ArtifactError, before drawing, when ``out`` cannot be written (under a file, in a folder without
    write permission, a folder itself)."""
    atomic.check_file(out, "--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = method_order(results)
    types = ordered_types({t for s in results.values() for by in s.values() for t in by if t != "avg"}) + [
        "avg"
    ]
    fig, axes = plt.subplots(
        len(METRICS), 1, figsize=(max(8, 0.9 * len(types) * max(1, len(methods)) / 2), 3 * len(METRICS))
    )
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(types))
    for ax, name in zip(np.atleast_1d(axes), METRICS, strict=True):
        for i, method in enumerate(methods):
            vals = [results[method].get(name, {}).get(t, np.nan) for t in types]
            ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=method)
        ax.set_xticks(x, types)
        ax.set_ylabel(f"{METRICS[name].label} x100")
        ax.axhline(0, color="black", linewidth=0.5)
    # above the first panel, outside the bars (inside, it hid the first types' bars)
    np.atleast_1d(axes)[0].legend(
        fontsize="small", ncol=min(len(methods), 6), loc="lower center", bbox_to_anchor=(0.5, 1.02), frameon=False
    )
    if title:
        fig.suptitle(title)
    return save_figure(fig, out)


def save_figure(fig: Any, out: str | Path) -> Path:
    """Lay out, write (PNG at 100 dpi, atomically) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(out)
    atomic.write_with(out, lambda tmp: fig.savefig(tmp, dpi=100, format=out.suffix.lstrip(".") or "png"))
    plt.close(fig)
    return out
