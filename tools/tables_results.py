"""The tables of docs/results.md and of the Studies pages, rendered from the results data (tools/pages.py).

Each renderer takes the docs folder and reads the JSON files that the measuring commands wrote
(:mod:`pipeline.stages.docs_data` lists them and their writers); nothing here measures or rounds twice: a
value is shown with one decimal (x100 metrics), four (MSE) or as recorded. A file or entry that is missing
renders as a line that says which command writes it, never as an error: a fresh clone renders.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the worktree's package, not another checkout's installed one
    sys.path.insert(0, str(ROOT))

from pipeline.llm.eval import PAPER_ACCURACY  # noqa: E402
from pipeline.methods.src.calibrations import CALIBRATIONS  # noqa: E402
from pipeline.softquery.types import ordered_types  # noqa: E402
from pipeline.stages import docs_data  # noqa: E402
from pipeline.stages.evaluate import BACKBONES, PAPER, method_order  # noqa: E402
from pipeline.studies.soft_requirements import PAPER_ONET20K, SETTINGS, with_average  # noqa: E402

METRICS = ("tau", "rho", "map", "ndcg")
LABEL = {"tau": "tau", "rho": "rho", "map": "MAP", "ndcg": "NDCG"}
NAMES = {"ppi5k": "PPI5k", "cn15k": "CN15k", "onet20k": "O*NET20k"}
BASELINES = ("LogicE+NE", "ConE+NE")


# ------------------------------------------------------------------------------------------------ helpers


def _read(docs: Path, name: str) -> dict[str, Any]:
    return docs_data.read(docs / name)


def _num(v: Any, digits: int = 1) -> str:
    """A recorded number with ``digits`` decimals; '-' for a missing or undefined one."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}"


def _four(values: Mapping[str, Any] | None) -> str:
    """tau / rho / MAP / NDCG of a {metric: value} mapping, '-' where one is missing."""
    values = values or {}
    return " / ".join(_num(values.get(m)) for m in METRICS)


def _name(dataset: str) -> str:
    return NAMES.get(dataset, dataset)


def _table(head: list[str], rows: Iterable[list[str]], right_from: int = 1) -> list[str]:
    """A Markdown table: the columns from ``right_from`` on right-aligned (numbers)."""
    align = ["---" if i < right_from else "---:" for i in range(len(head))]
    return ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|",
            *("| " + " | ".join(r) + " |" for r in rows)]


def _missing(what: str, writer: str) -> str:
    return f"*No {what} recorded yet: `{writer}` writes it.*"


def _variant(method: str) -> str:
    """The calibration variant of a method label ('ukge_logi SRC(D+L)' -> 'SRC(D+L)'; a baseline: itself)."""
    return method.rpartition(" ")[2] if " " in method else method


def _main_methods(methods: Iterable[str]) -> list[str]:
    """SRC's rows first (by backbone, then SRC, SRC(D), SRC(L), SRC(D+L)), the baselines after them."""
    methods = list(methods)
    src = [m for m in method_order(methods) if _variant(m).startswith("SRC")]
    return src + [m for m in method_order(methods) if m not in src]


def _chance(protocol: Mapping[str, Any]) -> dict[str, Any] | None:
    """The chance level of a data set's test set (the same for every method on it): a random ranking."""
    return next((p["random"] for p in protocol.values() if p and p.get("random")), None)


def _ranges(indices: list[int]) -> str:
    """1-based row numbers as ranges: [0, 1, 2, 5] -> '1-3, 6'."""
    out, start = [], None
    for i, n in enumerate(indices):
        if start is None:
            start = n
        if i + 1 == len(indices) or indices[i + 1] != n + 1:
            out.append(f"{start + 1}" if start == n else f"{start + 1}-{n + 1}")
            start = None
    return ", ".join(out)


def _by_calibration(names: Iterable[str]) -> list[str]:
    """Stage or L names ('answer ukge_logi D+L', 'ukge_logi L') by backbone, then none, D, L, D+L (the JSON
    files keep keys sorted as text)."""
    order = list(CALIBRATIONS)

    def key(name: str) -> tuple[str, int, str]:
        head, _, last = name.rpartition(" ")
        return (head, order.index(last) if last in order else len(order), last)

    return sorted(names, key=key)


def _chosen(record: Mapping[str, Any] | None, method: str) -> str:
    """What calibration chose for a method's row, from its reproduction: D's delta, whether L kept its
    identity (or which check); '' for SRC itself and the baselines."""
    backbone, _, variant = method.rpartition(" ")
    if record is None or not variant.startswith("SRC(") or not backbone:
        return ""
    calibration = variant[4:-1]
    said = []
    text = record.get("calibration", {}).get(f"answer {backbone} {calibration}", "")
    if "D" in calibration.split("+") and (m := re.search(r"delta = ([0-9.]+)", text)):
        said.append(f"delta {m.group(1)}")
    if (checks := record.get("l_checks", {}).get(f"{backbone} {calibration}")) is not None:
        said.append("L: identity kept" if not checks.get("kept") else f"L: check {checks['kept']} kept")
    return f" ({'; '.join(said)})" if said else ""


def _made(record: Mapping[str, Any]) -> str:
    """'`command`; machine; date' of a record."""
    return f"`{record.get('command', '?')}`; {record.get('machine', '?')}; {record.get('date', '?')}"


def _records_of(docs: Path, dataset: str, methods: Iterable[str]) -> list[dict[str, Any]]:
    """The reproductions of ``dataset`` that made any of ``methods``, in the order recorded."""
    wanted = set(methods)
    return [r for r in _read(docs, docs_data.REPRODUCTIONS).get(dataset, []) if wanted & set(r.get("methods", ()))]


# ------------------------------------------------------------------------------------- the main table


def main_table(docs: Path) -> str:
    """Every data set's methods: tie-aware averages, the same answers under the paper protocol, and the
    paper's same row; the chance level under each data set; then the runs that made them."""
    results, protocol = _read(docs, docs_data.RESULTS), _read(docs, docs_data.PROTOCOL)
    datasets = [d for d in results if d != BACKBONES]
    if not datasets:
        return _missing("results", "pipeline reproduce DATASET --docs docs")
    head = ["data set", "method", "tau", "rho", "MAP", "NDCG", "paper protocol: tau / rho / MAP / NDCG",
            "the paper's row: tau / rho / MAP / NDCG"]
    rows = []
    for dataset in _order_datasets(datasets):
        paper, prot = PAPER.get(dataset, {}), protocol.get(dataset, {})
        for method in _main_methods(results[dataset]):
            summ = results[dataset][method]
            same = paper.get(_variant(method))
            made = _records_of(docs, dataset, [method])
            label = method + _chosen(made[-1] if made else None, method)
            rows.append([_name(dataset), label, *(_num(summ.get(m, {}).get("avg")) for m in METRICS),
                         _four({m: v.get("avg") for m, v in ((prot.get(method) or {}).get("paper_protocol") or {}).items()})
                         if prot.get(method) else "-", _four(same) if same else "-"])
        if rnd := _chance(prot):
            rows.append([_name(dataset), "chance (a random ranking)", "-", "-", _num(rnd.get("map", {}).get("avg")),
                         _num(rnd.get("ndcg", {}).get("avg")), "-", "-"])
    lines = _table(head, rows, right_from=2)
    lines += ["", "Made by:", ""]
    for dataset in _order_datasets(datasets):
        for record in _records_of(docs, dataset, results[dataset]):
            lines.append(f"- {_name(dataset)}, {_methods_text(set(record['methods']) & set(results[dataset]))}: "
                         f"{_made(record)}.")
    return "\n".join(lines)


def _methods_text(methods: Iterable[str]) -> str:
    """Method labels named once per backbone: 'ukge_logi SRC, SRC(D)' rather than the backbone twice."""
    by: dict[str, list[str]] = {}
    for m in _main_methods(methods):
        backbone, _, variant = m.rpartition(" ")
        by.setdefault(backbone, []).append(variant)
    return "; ".join(f"{b} {', '.join(v)}" if b else ", ".join(v) for b, v in by.items())


def _order_datasets(datasets: Iterable[str]) -> list[str]:
    """PPI5k, CN15k, then any other data set by name (the paper's order)."""
    datasets = list(datasets)
    known = [d for d in ("ppi5k", "cn15k") if d in datasets]
    return known + sorted(d for d in datasets if d not in known)


def headline(docs: Path) -> str:
    """Each data set's fully calibrated SRC row (the last SRC variant of its first backbone): tie-aware, the
    same answers under the paper protocol, and the paper's row, which comes from that protocol."""
    results, protocol = _read(docs, docs_data.RESULTS), _read(docs, docs_data.PROTOCOL)
    rows = []
    for dataset in _order_datasets(d for d in results if d != BACKBONES):
        src = [m for m in _main_methods(results[dataset]) if _variant(m).startswith("SRC")]
        if not src:
            continue
        backbone = src[0].rpartition(" ")[0]
        method = [m for m in src if m.rpartition(" ")[0] == backbone][-1]
        made = _records_of(docs, dataset, [method])
        pp = ((protocol.get(dataset, {}).get(method) or {}).get("paper_protocol")) or {}
        rows.append([f"{_name(dataset)} {method}{_chosen(made[-1] if made else None, method)}",
                     *(_num(results[dataset][method].get(m, {}).get("avg")) for m in METRICS)])
        rows.append(["the same answers under the paper's protocol", *(_num(pp.get(m, {}).get("avg")) for m in METRICS)])
        if same := PAPER.get(dataset, {}).get(_variant(method)):
            rows.append([f"paper {_variant(method)} (its protocol)", *(_num(same.get(m)) for m in METRICS)])
    if not rows:
        return _missing("results", "pipeline reproduce DATASET --docs docs")
    return "\n".join(_table(["test, averages x100", "tau", "rho", "MAP", "NDCG"], rows))


def per_type(dataset: str) -> Callable[[Path], str]:
    """The renderer of one data set's per-type view: every method's four metrics per query type, tie-aware,
    and the chance level of MAP and NDCG."""

    def render(docs: Path) -> str:
        results, protocol = _read(docs, docs_data.RESULTS), _read(docs, docs_data.PROTOCOL)
        methods = results.get(dataset)
        if not methods:
            return _missing(f"{_name(dataset)} results", f"pipeline reproduce {dataset} --docs docs")
        types = ordered_types({t for s in methods.values() for by in s.values() for t in by if t != "avg"})
        rows = []
        for method in _main_methods(methods):
            for i, m in enumerate(METRICS):
                by = methods[method].get(m, {})
                rows.append([method if i == 0 else "", LABEL[m], *(_num(by.get(t)) for t in [*types, "avg"])])
        if rnd := _chance(protocol.get(dataset, {})):
            for i, m in enumerate(("map", "ndcg")):
                by = rnd.get(m, {})
                rows.append(["chance" if i == 0 else "", LABEL[m], *(_num(by.get(t)) for t in [*types, "avg"])])
        return "\n".join(_table(["method", "metric", *types, "avg"], rows, right_from=2))

    return render


# ------------------------------------------------------------------------------------------ backbones


def backbones(docs: Path) -> str:
    """The main tables' backbones: how each was trained and kept, its valid MSE beside predicting the mean
    train confidence (a backbone that does not beat it predicts no confidence), its test MSE."""
    found = _read(docs, docs_data.RESULTS).get(BACKBONES, {})
    if not found:
        return _missing("backbones", "pipeline reproduce DATASET --docs docs")
    rows = []
    for dataset in _order_datasets(found):
        b = found[dataset]
        trained = f"{b['model']}, {b.get('epochs_run', '?')} epochs, kept {b.get('best_epoch', '?')} ({b.get('selection', '?')})"
        beats = b.get("valid_mse") is not None and b.get("mean_valid_mse") is not None and b["valid_mse"] < b["mean_valid_mse"]
        negatives = "published" if b.get("test_negatives") == "published" else "sampled"
        rows.append([_name(dataset), trained, _num(b.get("valid_mse"), 4), _num(b.get("mean_valid_mse"), 4),
                     "yes" if beats else "no", _num(b.get("test_mse"), 4), _num(b.get("test_mae"), 4),
                     f"{_num(b.get('test_neg_mse'), 4)} ({negatives})"])
    return "\n".join(_table(["data set", "backbone", "valid MSE", "predicting the mean", "predicts confidences",
                             "test MSE", "test MAE", "test MSE of negatives"], rows, right_from=2))


def confidence(docs: Path) -> str:
    """Every recorded training (``pipeline train --docs``): errors on valid and test, beside the published
    test MSE; then which command, machine and date made which rows."""
    doc = _read(docs, docs_data.BACKBONE_RUNS)
    runs = doc.get("runs", [])
    if not runs:
        return _missing("trained backbones", "pipeline train DATASET --model MODEL --docs docs")
    published = {(p["dataset"], p["model"]): p["test_mse"] for p in (doc.get("published") or {}).get("rows", [])}
    rows = []
    for i, r in enumerate(runs, 1):
        rows.append([str(i), r["dataset"], r["model"], f"{r['lr']:g}", str(r["epochs"]), str(r.get("best", "-")),
                     _num(r.get("seconds_per_epoch")), str(r.get("device") or "-"), _num(r.get("valid_mse"), 4),
                     _num(r.get("valid_neg_mse"), 4), _num(r.get("test_mse"), 4), _num(r.get("test_mae"), 4),
                     _num(r.get("test_neg_mse"), 4), _num(published.get((r["dataset"], r["model"])), 4)])
    lines = _table(["run", "data set", "model", "lr", "epochs", "kept", "s/epoch", "device", "valid MSE",
                    "valid neg MSE", "test MSE", "test MAE", "test neg MSE", "published test MSE"], rows, right_from=3)
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.get("command", "?"), r.get("machine", "?"), r.get("date", "?")), []).append(i)
    lines += ["", *(f"- Run{'s' if len(ix) > 1 else ''} {_ranges(ix)}: `{c}`; {m}; {d}." for (c, m, d), ix in groups.items())]
    if doc.get("published"):
        lines.append(f"- Published: {doc['published'].get('source', '')}.")
    return "\n".join(lines)


LINK = ("mrr", "hits@1", "hits@3", "hits@10")


def link_prediction(docs: Path) -> str:
    """Link prediction as the unKR benchmark computes it (test tails among all entities, filtered): unKR's
    published rows, best MRR first, then this project's backbones (the main tables' ones and every recorded
    training that carries the figures), per data set, with the MSE/MAE on the test positives and ours on
    the negatives; then the published rows' source and the protocol's caveats."""
    results, runs_doc = _read(docs, docs_data.RESULTS), _read(docs, docs_data.BACKBONE_RUNS)
    published = runs_doc.get("published_link_prediction") or {}
    ours: list[tuple[str, str, Mapping[str, Any]]] = [
        (dataset, "ours: main table", b) for dataset, b in results.get(BACKBONES, {}).items()
        if b.get("test_mrr") is not None]
    ours += [(r["dataset"], f"ours: training {i}", r)
             for i, r in enumerate(runs_doc.get("runs", []), 1) if r.get("test_mrr") is not None]
    if not published.get("rows") and not ours:
        return _missing("link-prediction figures", "pipeline reproduce DATASET --docs docs")
    head = ["data set", "source", "model", "MRR", "hits@1", "hits@3", "hits@10", "MR", "test MSE", "test MAE",
            "test MSE of negatives"]
    rows = []
    for dataset in _order_datasets({r["dataset"] for r in published.get("rows", [])} | {d for d, _, _ in ours}):
        mine = [p for p in published.get("rows", []) if p["dataset"] == dataset]
        for p in sorted(mine, key=lambda p: -(p.get("filtered") or {}).get("mrr", -1.0)):
            f = p.get("filtered") or {}
            rows.append([_name(dataset), "unKR", p["model"], *(_num(f.get(k), 3) for k in LINK),
                         _num(f.get("mr"), 1), _num(p.get("mse"), 4), _num(p.get("mae"), 4), "-"])
        for _, label, b in (o for o in ours if o[0] == dataset):
            model = b["model"] + (f", {b['epochs_run']} epochs" if b.get("epochs_run") else
                                  f", {b['epochs']} epochs" if b.get("epochs") else "")
            rows.append([_name(dataset), label, model, *(_num(b.get(f"test_{k}"), 3) for k in LINK),
                         _num(b.get("test_mr"), 1), _num(b.get("test_mse_rows", b.get("test_mse")), 4),
                         _num(b.get("test_mae_rows", b.get("test_mae")), 4), _num(b.get("test_neg_mse"), 4)])
    lines = _table(head, rows, right_from=3)
    lines += ["", "- ours: main table = the backbone of the main tables above; ours: training N = run N of the "
              "confidence-prediction table below."]
    if published.get("source"):
        lines += [f"- unKR: its published rows, {published['source']}."]
    lines += [f"- {c}" for c in published.get("caveats", [])]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ baselines


def baselines(docs: Path) -> str:
    """The query-embedding baselines of every data set, beside the paper's rows: the tie-aware rows where
    they were measured so, else the rows kept from before the metrics became tie-aware (said in a column)."""
    results, protocol = _read(docs, docs_data.RESULTS), _read(docs, docs_data.PROTOCOL)
    old = _read(docs, "results_v1_id_ties.json").get("results", {})
    rows, made = [], []
    for dataset in _order_datasets({*results, *old} - {BACKBONES}):
        found = [(m, results[dataset][m], "tie-aware") for m in BASELINES if m in results.get(dataset, {})]
        found += [(m, old[dataset][m], "before tie-aware") for m in BASELINES
                  if m not in results.get(dataset, {}) and m in old.get(dataset, {})]
        for method, summ, rules in sorted(found, key=lambda x: BASELINES.index(x[0])):
            prot = (protocol.get(dataset, {}).get(method) or {}).get("paper_protocol") if rules == "tie-aware" else None
            same = PAPER.get(dataset, {}).get(method)
            rows.append([_name(dataset), method, rules, *(_num(summ.get(m, {}).get("avg")) for m in METRICS),
                         _four({m: v.get("avg") for m, v in prot.items()}) if prot else "-",
                         _four(same) if same else "-"])
        for record in _records_of(docs, dataset, [m for m, _, _ in found]):
            made.append(f"- {_name(dataset)}: {_made(record)}.")
    if not rows:
        return _missing("baselines", "pipeline reproduce DATASET --baselines logice_ne,cone_ne --docs docs")
    return "\n".join([*_table(["data set", "method", "metrics", "tau", "rho", "MAP", "NDCG",
                               "paper protocol: tau / rho / MAP / NDCG", "the paper's row: tau / rho / MAP / NDCG"],
                              rows, right_from=3), "", *made])


# ------------------------------------------------------------------------------------------- ablation


def ablation(dataset: str) -> Callable[[Path], str]:
    """The renderer of one data set's soft-requirements ablation: mean NDCG by setting (SRC tie-aware, under
    the paper protocol, chance, baseline rows, the paper's O*NET20k rows), then every metric per setting,
    then SRC's NDCG per type; the command, machine and date."""

    def render(docs: Path) -> str:
        rec = _read(docs, docs_data.ABLATION).get(dataset)
        if not rec:
            return _missing(f"{_name(dataset)} ablation",
                            f"pipeline reproduce {dataset} --study soft-requirements --run MODEL=RUN --docs docs")
        st = {k: rec["settings"][k] for k in docs_data.ordered(rec["settings"], SETTINGS)}
        ndcg = {
            "SRC (tie-aware)": {s: v["ndcg"] for s, v in st.items()},
            "SRC, paper protocol": {s: v["paper_protocol"].get("ndcg") for s, v in st.items() if v.get("paper_protocol")},
            "chance (a random ranking)": {s: v["chance"].get("ndcg") for s, v in st.items() if v.get("chance")},
            **{name: row for name, row in (rec.get("baselines") or {}).items()},
            **{f"{name}, O*NET20k (paper)": row for name, row in PAPER_ONET20K.items()},
        }
        cols = [*SETTINGS, "avg"]
        rows = [[name, *(_num(with_average({k: v for k, v in row.items() if k in SETTINGS}).get(c)) for c in cols)]
                for name, row in ndcg.items()]
        lines = _table(["mean NDCG x100", *cols], rows)
        rows = [[s, *(_num(v.get(m)) for m in METRICS), _four(v.get("paper_protocol")),
                 f"{_num((v.get('chance') or {}).get('map'))} / {_num((v.get('chance') or {}).get('ndcg'))}",
                 f"{_num(v.get('doubly_tied'))}%"] for s, v in st.items()]
        lines += ["", *_table(["SRC, x100", "tau", "rho", "MAP", "NDCG", "paper protocol: tau / rho / MAP / NDCG",
                               "chance: MAP / NDCG", "doubly tied pairs"], rows)]
        types = ordered_types({t for v in st.values() for t in v.get("ndcg_per_type", {})})
        rows = [[s, *(_num(v.get("ndcg_per_type", {}).get(t)) for t in types)] for s, v in st.items()]
        lines += ["", *_table(["SRC NDCG x100", *types], rows), "",
                  f"Made by `{rec.get('command', '?')}` over {rec.get('backbone', '?')}, exported at T = "
                  f"{rec.get('threshold', '?')}: {rec.get('per_type', '?')} test queries per type and setting, "
                  f"{_num(rec.get('seconds'), 0)} s over all stages; {rec.get('machine', '?')}; {rec.get('date', '?')}."]
        return "\n".join(lines)

    return render


# ------------------------------------------------------------------------------------------------ LLM


def llm(docs: Path) -> str:
    """Accuracy on the multiple-choice items, per type with its 95% Wilson interval, for SRC and every model
    asked; chance (one of four); the paper's overall figures; the command, machine and date of each row."""
    found = _read(docs, docs_data.LLM)
    if not found:
        return _missing("LLM comparison", "pipeline llm-eval ITEMS --docs docs")
    lines = []
    for dataset in _order_datasets(found):
        rec = found[dataset]
        tables = rec.get("tables", {})
        keys = [k for t in tables.values() for k in t["accuracy"]]
        types = [*ordered_types({k for k in keys if k != "all"}), "all"]
        first = next(iter(tables.values()))["accuracy"]
        head = ["method", *(f"{t} (n={first.get(t, {}).get('n', 0)})" for t in types)]
        rows = [[name, *(f"{_num(a[t]['accuracy'])} [{_num(a[t]['low'])}, {_num(a[t]['high'])}]" if t in a else "-"
                         for t in types)] for name, a in ((n, t["accuracy"]) for n, t in tables.items())]
        rows.append(["chance (one of four)", *("25.0" for _ in types)])
        lines += [f"{_name(dataset)}, {rec.get('items', '?')} items (`{rec.get('items_file', '?')}`):", "",
                  *_table(head, rows), ""]
        lines += [f"- {name}: {_made(t)}." for name, t in tables.items()]
        lines.append("")
    lines += ["The paper's table (its own 370 manually annotated CN15k items; only the overall accuracy is published):",
              "", *_table(["", *PAPER_ACCURACY], [["accuracy", *(_num(v) for v in PAPER_ACCURACY.values())]])]
    return "\n".join(lines)


# -------------------------------------------------------------------------------- reproductions (studies)


def _main_record(docs: Path, dataset: str) -> dict[str, Any] | None:
    """The data set's latest reproduction that ran stages of SRC (it has answer stages)."""
    records = [r for r in _read(docs, docs_data.REPRODUCTIONS).get(dataset, []) if r.get("throughput") or r.get("l_checks")]
    return records[-1] if records else None


def l_table(histories: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Markdown: the valid selection score of the identity and of every check of each L (its train loss; under
    D+L the delta that scored best), one row per check, the kept check in bold (records of
    :func:`pipeline.stages.reproduce.l_checks`)."""
    if not histories:
        return []
    names = _by_calibration(histories)
    rows = []
    for i in range(max(len(h["checks"]) for h in histories.values())):
        cells, label = [], "identity" if i == 0 else str(i)
        for n in names:
            checks = histories[n]["checks"]
            if i >= len(checks):
                cells += ["", ""]
                continue
            c = checks[i]
            if i and c.get("step") is not None:
                label = f"{i} (step {c['step']})"
            mark = "**" if i == histories[n].get("kept", 0) else ""
            at = f" (delta {c['delta']:g})" if c.get("delta") is not None else ""
            cells += [f"{mark}{c['valid']:.2f}{mark}{at}", "" if c.get("loss") is None else f"{c['loss']:.4f}"]
        rows.append([label, *cells])
    head = ["check", *(f"{n}: {what}" for n in names for what in ("valid", "loss"))]
    return _table(head, rows)


def l_checks(dataset: str) -> Callable[[Path], str]:
    """The renderer of the checks of every L of a data set's latest reproduction, with its command."""

    def render(docs: Path) -> str:
        rec = _main_record(docs, dataset)
        if not rec or not rec.get("l_checks"):
            return _missing(f"{_name(dataset)} reproduction", f"pipeline reproduce {dataset} --docs docs")
        return "\n".join([*l_table(rec["l_checks"]), "", f"Made by {_made(rec)}."])

    return render


def reproduction(dataset: str) -> Callable[[Path], str]:
    """The renderer of a data set's latest reproduction: each stage's seconds, what calibration chose, and the
    answering throughput per type (queries/s, engine time only)."""

    def render(docs: Path) -> str:
        rec = _main_record(docs, dataset)
        if not rec:
            return _missing(f"{_name(dataset)} reproduction", f"pipeline reproduce {dataset} --docs docs")
        stages = rec.get("stages", [])
        lines = [f"`{rec['command']}`; {rec['machine']}; {rec['date']}. Queries: {rec.get('queries', '?')}.", "",
                 *_table(["stage", "seconds (when it last ran)"],
                         [*([n, _num(s)] for n, s in stages), ["all stages", _num(sum(s for _, s in stages))]]),
                 "", f"This invocation: {_num(rec.get('seconds'))} s."]
        if chosen := rec.get("calibration"):
            lines += ["", *(f"- {n}: {chosen[n]}" for n in _by_calibration(chosen))]
        if tp := rec.get("throughput"):
            types = ordered_types({t for by in tp.values() for t in by})
            lines += ["", *_table(["answer stage (queries/s)", *types],
                                  [[n, *(_num(tp[n].get(t)) for t in types)] for n in _by_calibration(tp)])]
        return "\n".join(lines)

    return render


def truth_orders(docs: Path) -> str:
    """The paper protocol of the same answers under each reading of the truth's tie order: the SQUK
    generator's own (what the protocol reads), random orders averaged and our id order reversed (the readings
    used before), and single-answer queries counted as 0 (the authors' fine-tuning code)."""
    protocol = _read(docs, docs_data.PROTOCOL)
    head = ["data set", "method", "the generator's order", "random tie orders (32, averaged)",
            "our id order reversed", "tau / rho, single-answer queries as 0"]
    rows = []
    for dataset in _order_datasets(protocol):
        for method in _main_methods(protocol[dataset]):
            entry = protocol[dataset][method] or {}
            other = entry.get("paper_protocol_other_orders")
            if not other:
                continue
            avg = {k: {m: v.get("avg") for m, v in (summ or {}).items()} for k, summ in other.items()}
            zero = entry.get("paper_single_as_zero") or {}
            rows.append([_name(dataset), method,
                         _four({m: v.get("avg") for m, v in (entry.get("paper_protocol") or {}).items()}),
                         _four(avg.get("random ties (32 orders, averaged)")), _four(avg.get("our id order reversed")),
                         " / ".join(_num((zero.get(m) or {}).get("avg")) for m in ("tau", "rho"))])
    if not rows:
        return _missing("paper protocol under other truth orders", "pipeline reproduce DATASET --docs docs")
    return "\n".join(_table(head, rows, right_from=2))


TABLES: dict[str, Callable[[Path], str]] = {
    "results.truth_orders": truth_orders,
    "results.main": main_table,
    "results.headline": headline,
    **{f"results.per_type.{d}": per_type(d) for d in ("ppi5k", "cn15k")},
    "results.backbones": backbones,
    "results.link_prediction": link_prediction,
    "results.confidence": confidence,
    "results.baselines": baselines,
    **{f"results.ablation.{d}": ablation(d) for d in ("ppi5k", "cn15k")},
    "results.llm": llm,
    **{f"reproduce.l_checks.{d}": l_checks(d) for d in ("ppi5k", "cn15k")},
    **{f"reproduce.stages.{d}": reproduction(d) for d in ("ppi5k", "cn15k")},
}

__all__ = ["TABLES", "l_table"]
