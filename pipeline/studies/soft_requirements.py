"""The soft-requirements ablation (paper: Table "The mean NDCG of varying alpha and beta").

Four settings: alpha zero (Z) or normal (N) x beta equal (E) or random (R). For each, a test query set is
sampled (same seed, so the settings differ only in their requirements); SRC answers all four over ONE
backbone export (it needs no retraining) and the table shows the mean NDCG over query types x100.

Query-embedding baselines (ConE+NE, LogicE+NE) are trained per setting and tested on all four settings: a
4x4 block. Their rows enter through one folder per row: every answers file (pipeline.stages.answer format) found
under ``OUT/baselines/<row name>/<setting>/`` is evaluated and shown as row <row name>, column <setting>
(e.g. ``OUT/baselines/ConE+NE trained on Z+E/N+R/answers.parquet``). The train/valid query sets a baseline
needs per setting come from ``pipeline sample DATASET --split train|valid --alpha zero|normal --beta
equal|random``.

The paper ran it on O*NET20k (not reachable from our machines); the same command runs there unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.core import jsontext
from pipeline.core.provenance import stable_key
from pipeline.sampling import SAMPLING_VERSION

SETTINGS = {
    "Z+E": ("zero", "equal"),
    "Z+R": ("zero", "random"),
    "N+E": ("normal", "equal"),
    "N+R": ("normal", "random"),
}

# The paper's O*NET20k table (mean NDCG x100), for the comparison beside ours.
PAPER_ONET20K = {
    "SRC": {"Z+E": 34.3, "Z+R": 37.2, "N+E": 46.7, "N+R": 45.8},
    "ConE+NE trained on Z+E": {"Z+E": 39.3, "Z+R": 35.6, "N+E": 31.9, "N+R": 31.5},
}


def with_average(row: dict[str, float]) -> dict[str, float]:
    """The row plus 'avg' over the four settings (only when all four are present)."""
    vals = [row[s] for s in SETTINGS if s in row]
    return {**row, **({"avg": round(sum(vals) / len(vals), 4)} if len(vals) == len(SETTINGS) else {})}


def markdown_table(rows: dict[str, dict[str, float]], metric: str = "NDCG") -> str:
    """Rows = methods, columns = the four settings and their average (x100, one decimal; '-' = not run)."""
    cols = [*SETTINGS, "avg"]
    lines = [f"| {metric} x100 | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, row in rows.items():
        full = with_average(row)
        lines.append(f"| {name} | " + " | ".join(f"{full[c]:.1f}" if c in full else "-" for c in cols) + " |")
    return "\n".join(lines)


def plot(rows: dict[str, dict[str, float]], out: str | Path, title: str) -> Path:
    """Grouped bars: one group per setting, one bar per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(rows)
    x = np.arange(len(SETTINGS))
    width = 0.8 / max(1, len(names))
    fig, ax = plt.subplots(figsize=(9.5, 3.5))
    for i, name in enumerate(names):
        vals = [rows[name].get(s, np.nan) for s in SETTINGS]
        ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=name)
    ax.set_xticks(x, [f"alpha {a}\nbeta {b}" for a, b in SETTINGS.values()])
    ax.set_ylabel("mean NDCG x100")
    ax.set_title(title)
    # beside the axes: with several baseline rows a legend inside covers the bars
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    from pipeline.stages.evaluate import save_figure

    return save_figure(fig, out)


def mean_ndcg(answers: str | Path) -> dict[str, Any]:
    """What the study keeps of one answers file or folder (one file): ``ndcg`` (the mean over types x100),
    ``per_type`` ({type: NDCG}), ``counts``, and beside them the averages of every metric (``averages``),
    the same answers under the paper protocol (``paper_protocol``), a random ranking's MAP and NDCG
    (``chance``) and the share of answer pairs tied on both sides among each query's first 100 answers
    (``doubly_tied``, percent)."""
    from pipeline.stages.evaluate import evaluate_answers

    reports = evaluate_answers(answers)
    if len(reports) != 1:
        from pipeline.core.errors import ArtifactError

        raise ArtifactError(f"{answers}: expected one answers file, found {len(reports)}")
    r = reports[0]
    s = r["summary"]["ndcg"]
    avg = lambda summary: {m: by["avg"] for m, by in (summary or {}).items() if "avg" in by}  # noqa: E731
    return {
        "ndcg": s["avg"],
        "per_type": {t: v for t, v in s.items() if t != "avg"},
        "counts": r["counts"],
        "averages": avg(r["summary"]),
        "paper_protocol": avg(r.get("paper_protocol")),
        "chance": {m: v for m, v in avg(r.get("random")).items() if m in ("map", "ndcg")},
        "doubly_tied": (r.get("doubly_tied") or {}).get("share"),
    }


def baseline_rows(folder: Path) -> dict[str, dict[str, float]]:
    """Rows found under folder/<row name>/<setting>/ (answers files), see the module docstring."""
    rows: dict[str, dict[str, float]] = {}
    if not folder.is_dir():
        return rows
    for row_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        for setting in SETTINGS:
            d = row_dir / setting
            if d.is_dir() and any(d.glob("*.parquet")):
                rows.setdefault(row_dir.name, {})[setting] = mean_ndcg(d)["ndcg"]
    return rows


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """What the soft-requirements study varies besides the data set and the backbone: queries per type and
    which types, the export threshold, the seed, the store (URI), where docs go (None: nowhere), progress."""

    per_type: int = 50
    types: tuple[str, ...] | list[str] | None = None
    threshold: float = 0.1
    seed: int = 0
    store: str | None = None
    docs: str | Path | None = None
    progress: bool = True


def run_study(
    dataset: str,
    out: str | Path,
    run_dir: str | Path,
    settings: StudySettings | None = None,
    *,
    log: Callable[[str], None] = print,
    kg: Any = None,
    **given: Any,
) -> dict[str, Any]:
    """Sample the four test sets, export the backbone of run_dir, answer each set with SRC, tabulate.
    settings: a :class:`StudySettings`, or its fields as keywords (``given``).

    Stages are recorded in OUT/stages.json and skipped when their inputs are unchanged (see
    pipeline.stages.reproduce.Stages), so an interrupted study resumes. Writes OUT/soft_requirements.{json,md,png}
    and, with docs, docs/soft_requirements_<dataset>.png and the data set's record in docs/results_ablation.json
    (:func:`ablation_record`)."""
    st = settings if settings is not None else StudySettings(**given)
    per_type, types, threshold, seed = st.per_type, (list(st.types) if st.types else None), st.threshold, st.seed
    store_uri, docs, progress = st.store, st.docs, st.progress

    from loaders import load
    from pipeline.core.atomic import check_docs_folder
    from pipeline.models import load_run
    from pipeline.stages.reproduce import Stages

    check_docs_folder(docs, "docs")  # before any work
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_dir = Path(run_dir)
    t0 = time.perf_counter()
    kg = kg if kg is not None else load(dataset)
    stages = Stages(out)
    data_key = json.dumps(kg.checksums, sort_keys=True)

    store_holder: dict[str, Any] = {}

    def store():
        if "s" not in store_holder:
            from pipeline.store import open_store

            store_holder["s"] = open_store(store_uri)
        return store_holder["s"]

    sets: dict[str, str] = {}
    try:

        def do_ingest() -> dict[str, Any]:
            from pipeline.store.ingest import ingest

            return {"report": str(ingest(kg, store(), progress=progress))}

        stages.run("ingest", stable_key(data=data_key, store=store_uri, sampling=SAMPLING_VERSION), do_ingest, log)
        for name, (alpha, beta) in SETTINGS.items():

            def do_sample(alpha=alpha, beta=beta) -> dict[str, Any]:
                from pipeline.stages.options import SampleOptions
                from pipeline.stages.sample import sample_to_dir

                rep = sample_to_dir(kg, store(), SampleOptions(out=out / "queries", split="test", types=types, per_type=per_type, alpha=alpha, beta=beta, seed=seed, browse=False, progress=progress))
                return {"file": rep["file"], "_paths": [rep["file"]]}

            k = stable_key(data=data_key, alpha=alpha, beta=beta, per_type=per_type, types=types, seed=seed, sampling=SAMPLING_VERSION)
            sets[name] = stages.run(f"sample test {name}", k, do_sample, log)["file"]
    finally:
        if "s" in store_holder:
            store_holder["s"].close()

    model = load_run(run_dir, dataset=kg.name)
    model_hash = model.content_hash()

    def do_export() -> dict[str, Any]:
        from pipeline.stages.export import export_adjacency

        # the ledger's key (model hash, threshold) decides when the folder's export is stale
        man = export_adjacency(run_dir, threshold=threshold, out=out / "exports" / run_dir.name, progress=progress,
                               overwrite=True)
        return {"path": man["path"], "_paths": [man["path"]]}

    export = stages.run("export", stable_key(model_hash=model_hash, threshold=threshold), do_export, log)

    src: dict[str, dict[str, Any]] = {}
    for name, path in sets.items():

        def do_answer(path=path, name=name) -> dict[str, Any]:
            from pipeline.methods.options import MethodOptions
            from pipeline.stages.answer import answer_queries
            from pipeline.stages.options import AnswerOptions

            method = MethodOptions(method="src", adjacency=export["path"], seed=seed, kg=kg)
            rep = answer_queries(path, method, AnswerOptions(out=out / "answers" / name, progress=progress))
            return {"path": rep["path"], "_paths": [rep["path"]]}

        from pipeline.stages.reproduce import _file_checksum

        k = stable_key(model_hash=model_hash, threshold=threshold, queries=_file_checksum(path))
        answers = stages.run(f"answer {name}", k, do_answer, log)["path"]
        src[name] = mean_ndcg(answers)

    rows = {"SRC": {s: r["ndcg"] for s, r in src.items()}, **baseline_rows(out / "baselines")}
    table = markdown_table(rows)
    backbone = model.name
    command = (f"pipeline reproduce {kg.name} --study soft-requirements --run {backbone}=RUN --per-type {per_type}"
               f" --threshold {threshold:g} --seed {seed}")
    doc = {
        "command": command,
        "dataset": kg.name,
        "backbone_run": str(run_dir),
        "backbone": backbone,
        "threshold": threshold,
        "per_type": per_type,
        "seed": seed,
        "rows": {n: with_average(r) for n, r in rows.items()},
        "src_per_type": {s: r["per_type"] for s, r in src.items()},
        # every metric of SRC per setting, the paper protocol, chance and ties beside (the results page's rows)
        "src": {s: {k: r[k] for k in ("averages", "paper_protocol", "chance", "doubly_tied")} for s, r in src.items()},
        "counts": {s: r["counts"] for s, r in src.items()},
        "query_sets": sets,
        "seconds": round(time.perf_counter() - t0, 1),
        # all stages as they last ran (this invocation may have skipped them)
        "stage_seconds": round(sum(v.get("seconds", 0.0) for v in stages.doc.values()), 1),
        "backbone_results": _run_summary(run_dir),
    }
    (out / "soft_requirements.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "soft_requirements.md").write_text(table + "\n")
    plot(rows, out / "soft_requirements.png", f"{kg.name}: mean NDCG by soft requirements")
    if docs is not None:
        from pipeline.stages.docs_data import record_ablation

        plot(
            rows,
            Path(docs) / f"soft_requirements_{kg.name}.png",
            f"{kg.name}: mean NDCG by soft requirements",
        )
        from pipeline.stages.docs_data import recorded

        log(recorded([record_ablation(docs, kg.name, ablation_record(doc))]))
    doc["table"] = table
    return doc


def _run_summary(run_dir: Path) -> dict[str, Any]:
    """Epochs and test MSE of the backbone's run (results.json), for the note; {} when absent."""
    try:
        res = jsontext.loads((run_dir / "results.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {
        "epochs": res.get("epochs_run"),
        "selection": res.get("selection"),
        "test_mse": (res.get("test") or {}).get("mse"),
    }


def ablation_record(doc: dict[str, Any]) -> dict[str, Any]:
    """What ``docs/results_ablation.json`` keeps of a study (:mod:`pipeline.stages.docs_data`): command,
    machine and date; the backbone and the study's settings; per setting SRC's averages, paper protocol,
    chance, doubly tied share and NDCG per type; the baseline rows (mean NDCG per test setting)."""
    from pipeline.stages.docs_data import provenance

    b = doc["backbone_results"]
    backbone = doc["backbone"] + (
        f" ({b['epochs']} epochs, selection {b['selection']}, test MSE {b['test_mse']:.4f})"
        if b and b.get("test_mse") is not None else "")
    return {
        **provenance(doc["command"]),
        "backbone": backbone,
        "threshold": doc["threshold"],
        "per_type": doc["per_type"],
        "seconds": doc["stage_seconds"],
        "settings": {s: {**v["averages"], "paper_protocol": v["paper_protocol"], "chance": v["chance"],
                         "doubly_tied": v["doubly_tied"], "ndcg_per_type": doc["src_per_type"][s]}
                     for s, v in doc["src"].items()},
        "baselines": {n: r for n, r in doc["rows"].items() if n != "SRC"},
    }
