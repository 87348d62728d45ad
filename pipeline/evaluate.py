"""Evaluation tables of answered query sets: metrics per query, per type and averaged, x100, like the paper.

Per query: the ground-truth answers a_1..a_n (best first) and their predicted ranks among all entities,
read from an answers file (:mod:`pipeline.formats.answers`), go through every metric of :data:`pipeline.metrics.METRICS`.
Per type: the mean over the queries where the metric is defined. ``avg``: the mean over the types (every
type weighs the same, as in the paper's tables). Summaries are ``{metric: {type or "avg": value x100}}``;
``docs/results.json`` is ``{dataset: {method: summary}}`` and ``docs/results.md`` its tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline import atomic
from pipeline.calibration import CALIBRATIONS
from pipeline.errors import PipelineError
from pipeline.formats.answers import find_answer_files, read_answers
from pipeline.metrics import METRICS, metric_columns
from pipeline.provenance import provenance
from pipeline.query.types import QUERY_TYPES

# The design's 12 types in the paper's column order (types not listed here follow, sorted).
TYPE_ORDER = tuple(QUERY_TYPES)

# The paper's averages x100 (the targets), for the comparison beside our tables.
PAPER: dict[str, dict[str, dict[str, float]]] = {
    "cn15k": {
        "SRC(D+L)": {"tau": 12.4, "rho": 16.2, "map": 13.7, "ndcg": 23.2},
        "LogicE+NE": {"tau": 4.8, "rho": 5.8, "map": 7.0, "ndcg": 11.2},
        "ConE+NE": {"tau": 8.1, "rho": 10.0, "map": 7.7, "ndcg": 13.2},
    },
    "ppi5k": {
        "SRC(D+L)": {"tau": 58.2, "rho": 68.7, "map": 64.1, "ndcg": 70.1},
        "SRC(L)": {"map": 69.8, "ndcg": 71.6},
        "LogicE+NE": {"tau": 14.8, "rho": 20.7, "map": 8.0, "ndcg": 16.4},
        "ConE+NE": {"tau": 30.7, "rho": 40.8, "map": 44.1, "ndcg": 49.2},
    },
}

Summary = dict[str, dict[str, float]]  # {metric: {type or "avg": value x100}}


def query_metrics(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per query: query_id, type, n_answers and every metric (natural units, NaN if undefined).

    frame: answers rows (columns query_id, type, entity, rank, truth_rank; see pipeline.formats.answers)."""
    queries = frame[["query_id", "type"]].drop_duplicates("query_id").sort_values("query_id")
    truth = frame[frame["truth_rank"] > 0].sort_values(["query_id", "truth_rank"])
    # One sorted pass: the ranks of each query's true answers, in their true order.
    ids = truth["query_id"].to_numpy()
    ranks = truth["rank"].to_numpy(np.int64)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, dtype=np.int64)
    by_query = dict(zip(ids[starts], np.split(ranks, starts[1:]), strict=True)) if len(ids) else {}
    empty = np.zeros(0, dtype=np.int64)
    per = [by_query.get(qid, empty) for qid in queries["query_id"]]
    cols = metric_columns(per)  # all queries at once (grouped by their number of answers)
    return pd.DataFrame(
        {
            "query_id": queries["query_id"].to_numpy(),
            "type": queries["type"].to_numpy(),
            "n_answers": np.fromiter((len(r) for r in per), dtype=np.int64, count=len(per)),
            **cols,
        },
        columns=["query_id", "type", "n_answers", *METRICS],
    )


def ordered_types(types: list[str] | set[str]) -> list[str]:
    """Types in the paper's column order, unknown ones after them sorted."""
    known = [t for t in TYPE_ORDER if t in types]
    return known + sorted(set(types) - set(TYPE_ORDER))


def summarise(per_query: pd.DataFrame) -> Summary:
    """{metric: {type: mean x100, ..., "avg": mean over types}}; types with no defined value are left out."""
    out: Summary = {}
    types = ordered_types(set(per_query["type"]))
    for name in METRICS:
        by_type = {}
        for t in types:
            vals = per_query.loc[per_query["type"] == t, name].dropna()
            if len(vals):
                by_type[t] = round(float(vals.mean()) * 100.0, 4)
        by_type["avg"] = round(float(np.mean(list(by_type.values()))), 4) if by_type else math.nan
        out[name] = by_type
    return out


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
    """The report of one answers file: {dataset, method, file, query_set, counts, summary (x100)}."""
    ans = read_answers(path)
    per_query = query_metrics(ans.frame)
    return {
        "dataset": ans.meta["dataset"],
        "method": ans.method,
        "file": str(path),
        "query_set": ans.meta.get("query_set"),
        "counts": query_counts(per_query),
        "summary": summarise(per_query),
    }


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
        + markdown_table(report["summary"])
        + "\n"
    )
    return js, md


# --------------------------------------------------------------------------------------- docs/results.*

RESULTS_SECTION = "Query answering"
COUNTS_SECTION = "Query counts"


def update_results(reports: list[dict[str, Any]], docs: str | Path) -> tuple[Path, Path]:
    """Merge reports into ``docs/results.json`` ({dataset: {method: summary}}) and regenerate the sections
    of ``docs/results.md`` this module owns; every other section (e.g. "Confidence prediction") is kept."""
    docs = Path(docs)
    docs.mkdir(parents=True, exist_ok=True)
    js_path, md_path = docs / "results.json", docs / "results.md"
    results: dict[str, Any] = json.loads(js_path.read_text()) if js_path.exists() else {}
    counts_path = docs / "results_counts.json"
    counts: dict[str, Any] = json.loads(counts_path.read_text()) if counts_path.exists() else {}
    for r in reports:
        results.setdefault(r["dataset"], {})[r["method"]] = r["summary"]
        counts.setdefault(r["dataset"], {})[r["method"]] = r["counts"]
    atomic.write_json(js_path, results)
    atomic.write_json(counts_path, counts)

    body = [
        "Metrics x100 per query type and averaged over types (design section 1); paper figures are averages.\n"
    ]
    for dataset in sorted(results):
        body.append(f"### {dataset}\n")
        for method in method_order(results[dataset]):
            body.append(f"**{method}**\n\n{markdown_table(results[dataset][method])}\n")
        paper = PAPER.get(dataset, {})
        if paper:
            body.append(comparison_table(dataset, results[dataset]) + "\n")
    count_lines = ["Evaluated queries (with at least one ground-truth answer) per type.\n"]
    for dataset in sorted(counts):
        for method in method_order(counts[dataset]):
            c = counts[dataset][method]
            count_lines.append(f"- {dataset} {method}: " + ", ".join(f"{t} {c[t]}" for t in ordered_types(c)))
    sections = _read_sections(md_path)
    sections[RESULTS_SECTION] = "\n".join(body)
    sections[COUNTS_SECTION] = "\n".join(count_lines) + "\n"
    _write_sections(md_path, sections)
    return js_path, md_path


def set_section(docs: str | Path, name: str, text: str) -> Path:
    """Replace (or add) the ``## name`` section of ``docs/results.md``, keeping every other section."""
    md_path = Path(docs) / "results.md"
    md_path.parent.mkdir(parents=True, exist_ok=True)
    sections = _read_sections(md_path)
    sections[name] = text
    _write_sections(md_path, sections)
    return md_path


_VARIANT_ORDER = {c.label: i for i, c in enumerate(CALIBRATIONS.values())}  # SRC, SRC(D), SRC(L), SRC(D+L)


def method_order(methods: Iterable[str]) -> list[str]:
    """Method names ("BACKBONE VARIANT") by backbone, then SRC, SRC(D), SRC(L), SRC(D+L); others last."""

    def key(name: str) -> tuple[str, int, str]:
        backbone, _, variant = name.rpartition(" ")
        return (backbone, _VARIANT_ORDER.get(variant, len(_VARIANT_ORDER)), variant)

    return sorted(methods, key=key)


def comparison_table(dataset: str, methods: dict[str, Summary]) -> str:
    """Averages of our methods beside the paper's figures (x100)."""
    names = list(METRICS)
    lines = [
        f"Averages beside the paper ({dataset}):\n",
        "| method | " + " | ".join(METRICS[m].label for m in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for method in method_order(methods):
        lines.append(
            f"| {method} | " + " | ".join(_fmt(methods[method].get(m, {}).get("avg")) for m in names) + " |"
        )
    for method, figs in PAPER.get(dataset, {}).items():
        lines.append(f"| paper {method} | " + " | ".join(_fmt(figs.get(m)) for m in names) + " |")
    return "\n".join(lines)


def _read_sections(path: Path) -> dict[str, str]:
    """``## heading`` -> its text, in file order; text before the first heading is kept under ''."""
    sections: dict[str, str] = {}
    if not path.exists():
        return {"": "# Results\n"}
    current, buf = "", []
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            sections[current] = "\n".join(buf).strip("\n") + "\n"
            current, buf = line[3:].strip(), []
        else:
            buf.append(line)
    sections[current] = "\n".join(buf).strip("\n") + "\n"
    return sections


def _write_sections(path: Path, sections: dict[str, str]) -> None:
    out = [sections.get("", "# Results\n").rstrip("\n") + "\n"]
    out += [f"## {name}\n\n{text.strip(chr(10))}\n" for name, text in sections.items() if name]
    atomic.write_text(path, "\n".join(out))


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
