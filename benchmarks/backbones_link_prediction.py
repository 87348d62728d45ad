"""The backbones' link prediction beside the published uncertain-KG embeddings of the unKR benchmark.

    PIPELINE_DATA=../shared/data nice -n 10 python benchmarks/backbones_link_prediction.py RUN_DIR [--label L]
    python benchmarks/backbones_link_prediction.py --table

With a run directory: its model's link prediction on the test split as unKR computes it
(:mod:`pipeline.models.link_prediction`: every test row's tail among all entities, filtered by the
train+valid+test facts), its MSE/MAE over every published test row (unKR's average) and on CN15k's
published negatives, written as one measured row of ``docs/backbones_link_prediction.json`` (data set ->
row label -> figures) with the command, the machine and the date. A run still training (no model.pt yet)
is measured on its checkpoint's last epoch, and its label says which epoch. ``--rows FILE`` ranks the
rows of another copy of the test file, written with names as unKR writes them (spaces and dots as
underscores): unKR's ``dataset/cn15k/test.tsv``, which holds 2,216 rows more than CN15k's test file here
(train and valid triples). Then, and with ``--table``
alone, the file's rows as one Markdown table per data set: unKR's published rows (their source in the
file), then the measured ones.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

DEFAULT_FILE = Path(__file__).resolve().parent.parent / "docs" / "backbones_link_prediction.json"
LINK = ("mrr", "mr", "hits@1", "hits@3", "hits@10", "wmrr", "wmr")


def machine(device: str) -> str:
    """The machine in words: CPU model and cores (or the GPU), the load while measuring, torch's version."""
    import torch

    cpu = platform.processor() or "cpu"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    where = torch.cuda.get_device_name(0) if device.startswith("cuda") else f"{os.cpu_count()} CPU cores ({cpu})"
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{where}{load}, torch {torch.__version__}, {torch.get_num_threads()} threads"


def model_of(run_dir: Path, device: str) -> tuple[Any, dict[str, Any], str]:
    """(model, run config, what was measured): the selected model of a finished run, else the last epoch
    of its checkpoint (a run still training)."""
    from pipeline.models import load_run, read_run
    from pipeline.models.config import TrainConfig
    from pipeline.models.runs import CHECKPOINT_FILE, MODEL_FILE, torch_load
    from pipeline.models.training import build_model

    run = read_run(run_dir)
    if (run_dir / MODEL_FILE).exists() and run.results:
        res = run.results
        return load_run(run_dir, device=device), run.config, (
            f"model.pt: epoch {res['best_epoch']} of {res['epochs_run']} run, selection {res['selection']}")
    cfg = TrainConfig.from_dict(run.config)
    ck = torch_load(run_dir / CHECKPOINT_FILE)
    from loaders import load

    kg = load(cfg.dataset)
    model = build_model(cfg, kg.n_entities, kg.n_relations)
    model.load_state_dict(ck["model"])
    return model.to(device).eval(), run.config, f"checkpoint.pt: epoch {ck['epoch']} of {cfg.epochs} (run still training)"


def named_rows(path: Path, kg: Any) -> Any:
    """The rows (h, r, t, conf) of a TSV file of names (head, relation, tail, confidence), matched to the
    data set's ids with spaces and dots read as underscores (unKR's spelling of CN15k's and PPI5k's names)."""
    import pandas as pd

    norm = lambda s: s.replace(" ", "_").replace(".", "_")  # noqa: E731
    ids = []
    for names in (kg.entity_names(), kg.relation_names()):
        table = {norm(n): i for i, n in enumerate(names)}
        if len(table) != len(names):
            sys.exit(f"{path}: the data set's names are not distinct once spaces and dots read as underscores")
        ids.append(table)
    ent, rel = ids
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        h, r, t, c = line.split("\t")
        try:
            out.append((ent[norm(h)], rel[norm(r)], ent[norm(t)], float(c)))
        except KeyError as exc:
            sys.exit(f"{path}:{i}: {exc.args[0]!r} is no name of {kg.name}")
    return pd.DataFrame(out, columns=["h", "r", "t", "conf"])


def measure(run_dir: Path, label: str | None, device: str, rows_file: Path | None = None) -> tuple[str, str, dict[str, Any]]:
    """(data set, row label, measured row) of one run."""
    import numpy as np

    from loaders import load
    from pipeline.models.evaluation import confidence_errors
    from pipeline.models.link_prediction import link_prediction

    model, cfg, what = model_of(run_dir, device)
    kg = load(cfg["dataset"])
    rows = named_rows(rows_file, kg) if rows_file is not None else None
    lp = link_prediction(model, kg, "test", rows=rows, progress=True)
    tail = lp["tail"]
    neg = confidence_errors(model, kg.test_negatives.assign(conf=0.0)) if len(kg.test_negatives) else None
    train_cmd = (f"pipeline train {cfg['dataset']} --model {cfg['model']}{' --psl' if cfg.get('psl') else ''} "
                 f"--epochs {cfg['epochs']} --select-on {cfg['select_on']} --seed {cfg['seed']}")
    row = {
        "kind": "measured",
        "model": cfg["model"] + ("+psl" if cfg.get("psl") else ""),
        "measured": what,
        "mse": lp["errors"]["mse"],
        "mae": lp["errors"]["mae"],
        **({"neg_mse": neg["mse"]} if neg else {}),
        "filtered": {k: tail["filtered"][k] for k in LINK},
        "raw": {k: tail["raw"][k] for k in LINK},
        "filtered_expected": {k: tail["filtered"][f"{k}_expected"] for k in ("mrr", "mr", "hits@1", "hits@3", "hits@10")},
        "tied": tail["filtered"]["tied"],
        "both_filtered": {k: lp["both"]["filtered"][k] for k in LINK},
        "high_confidence": {s: {k: lp["high_confidence"]["tail"][s][k] for k in LINK[:5]} for s in ("filtered", "raw")},
        "ranked_rows": lp["rows"],
        "ranked": f"the rows of {rows_file}" if rows_file is not None else "the test file's positive rows",
        "seconds": round(lp["seconds"], 1),
        "run": str(run_dir),
        "run_config": {k: cfg.get(k) for k in ("epochs", "select_on", "dim", "lr", "batch_size", "negatives", "seed")},
        "train_command": train_cmd,
        "command": "PIPELINE_DATA=../shared/data python benchmarks/backbones_link_prediction.py "
                   + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "machine": machine(device),
        "date": datetime.date.today().isoformat(),
    }
    row = json.loads(json.dumps(row, default=lambda x: float(x) if isinstance(x, np.floating) else str(x)))
    return cfg["dataset"], label or f"{row['model']} ({what.split(':')[1].strip().split(',')[0]})", row


def table(doc: dict[str, Any]) -> str:
    """One Markdown table per data set: tails, filtered (unKR's "All test data / Filter"), raw MRR, MSE/MAE."""
    out = []
    for dataset in (k for k in doc if not k.startswith("_")):
        out.append(f"**{dataset}** (test tails, filtered, unKR's protocol)\n")
        out.append("| row | MRR | hits@1 | hits@3 | hits@10 | MR | raw MRR | MSE | MAE | source |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        rows = sorted(doc[dataset].items(), key=lambda kv: (kv[1]["kind"] != "published", kv[0]))
        for label, row in rows:
            f, raw = row.get("filtered", {}), row.get("raw", {})
            cell = lambda d, k, fmt="{:.3f}": fmt.format(d[k]) if d.get(k) is not None else ""  # noqa: E731
            src = ("unKR result.md" if row["kind"] == "published" else f"measured {row['date']}")
            out.append(f"| {label} | {cell(f, 'mrr')} | {cell(f, 'hits@1')} | {cell(f, 'hits@3')} | "
                       f"{cell(f, 'hits@10')} | {cell(f, 'mr', '{:.1f}')} | {cell(raw, 'mrr')} | "
                       f"{cell(row, 'mse', '{:.4f}')} | {cell(row, 'mae', '{:.4f}')} | {src} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", nargs="?", type=Path, help="a run directory (finished or still training)")
    p.add_argument("--label", help="the row's label (default: model and epoch)")
    p.add_argument("--device", default=None, help="cpu, cuda (default: cuda when present)")
    p.add_argument("--rows", type=Path, help="rank this TSV file of names instead of the test split (unKR's test.tsv)")
    p.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the JSON data file")
    p.add_argument("--table", action="store_true", help="only print the file's table")
    args = p.parse_args()
    doc = json.loads(args.file.read_text()) if args.file.exists() else {}
    if args.run_dir is not None and not args.table:
        from pipeline.core.config import select_device

        dataset, label, row = measure(args.run_dir, args.label, select_device(args.device), args.rows)
        doc.setdefault(dataset, {})[label] = row
        args.file.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"{args.file}: {dataset} / {label}: filtered MRR {row['filtered']['mrr']:.4f} "
              f"({row['ranked_rows']} rows, {row['seconds']} s)", file=sys.stderr)
    print(table(doc))


if __name__ == "__main__":
    main()
