"""Calibration L's search: fit L under several settings on one backbone, score every check on
the valid queries (the selection score, and per type), keep the best check as `pipeline answer` does
(the identity included) and answer the test set with it.

    PIPELINE_DATA=../shared/data nice -n 5 python benchmarks/l_search.py \\
        --queries RUN/queries --export RUN/exports/EXPORT --run RUN_DIR --out /tmp/l-search \\
        --setting default: --setting lr5e-4:l_lr=5e-4 --setting authors:l_variant=authors

A setting is NAME:KEY=VALUE,KEY=VALUE with the options of ``pipeline answer --l-*`` (LOptions fields;
``l_shapes=1p/2i`` for a list). Writes OUT/NAME.json (the history: every check's valid score, per type,
and the loss; the test summaries of SRC and of the kept L under both protocols) and prints the tables
that docs/studies/calibration-l.md shows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def parse_setting(text: str) -> tuple[str, dict[str, Any]]:
    name, _, rest = text.partition(":")
    opts: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, _, raw = item.partition("=")
        if key == "l_shapes":
            opts[key] = tuple(raw.split("/"))
            continue
        try:
            opts[key] = json.loads(raw)
        except ValueError:
            opts[key] = raw
    return name, opts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--export", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--setting", action="append", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--delta", type=float, default=0.0, help="answer with alphas lowered by this delta (D)")
    ap.add_argument("--grid", action="store_true",
                    help="D+L: every check scored at its best delta of D's grid (the answering stage's D+L selection)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.engine import as_adjacency, search_batch
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.options import LOptions
    from pipeline.methods.src.affine import feature_tables, fit_affine, save_affine
    from pipeline.methods.src.calibrations import DELTA_GRID
    from pipeline.methods.src.method import SRC
    from pipeline.methods.src.recipe import l_config
    from pipeline.models import load_run
    from pipeline.stages.answer import run_answer
    from pipeline.stages.evaluate import evaluate_file
    from pipeline.stages.selection import ValidScorer, selection_of

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    q = Path(args.queries)
    sets = {s: read_query_set(next(q.glob(f"*_{s}_*.parquet"))) for s in ("train", "valid", "test")}
    dataset = sets["test"].meta["dataset"]
    kg = load(dataset)
    src = SRC.load(args.export, dataset, device="cpu", kg=kg)
    model = load_run(args.run)
    feature_tables(model)
    scorer = ValidScorer(sets["valid"])
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # imports torch._dynamo once, outside the timings

    def answer(method: Any, folder: Path, delta: float | None = None) -> dict[str, Any]:
        rep = run_answer(sets["test"], method.with_delta(args.delta if delta is None else delta), folder, progress=False)
        ev = evaluate_file(rep["path"])
        return {"summary": ev["summary"], "paper_protocol": ev["paper_protocol"]}

    base = answer(src, out / "answers-SRC")
    for text in args.setting:
        name, given = parse_setting(text)
        cfg = l_config(LOptions(**given), args.seed)
        truth = as_adjacency(observed_graph(kg, cfg.targets))
        per_type: list[dict[str, Any]] = []

        deltas = DELTA_GRID if args.grid else (args.delta,)

        def valid(index: Any, per_type: list = per_type, deltas: tuple = deltas) -> float:
            trial = src.with_adjacency(index)
            got = scorer.summaries([trial.with_delta(d) for d in deltas])  # every delta in one pass
            scores = [selection_of(x) for x in got]
            best = max(range(len(deltas)), key=lambda i: (scores[i], -deltas[i]))
            per_type.append({**got[best], "delta": deltas[best]})
            return scores[best]

        t0, c0 = time.perf_counter(), time.process_time()
        calib, hist = fit_affine(model, src.adjacency, sets["train"].queries(), truth, search_batch, valid, cfg,
                                 progress=False, threshold=src.manifest["threshold"])
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        for check, summary in zip(hist["epochs"].values(), per_type, strict=True):
            check["delta"] = summary.pop("delta")
            check["per_type"] = {m: summary[m] for m in summary}
        folder = out / f"L-{name}"
        save_affine(calib, folder, {"key": name, "inputs": {"setting": given}, "history": hist})
        kept = src.apply_saved(l_dir=folder, run_dir=args.run)
        delta = hist["epochs"][str(hist["best"])]["delta"]
        doc = {"setting": given, "config": cfg.record(), "seconds": seconds, "cpu_seconds": cpu, "history": hist,
               "test": {"SRC": base, "SRC(L)": answer(kept, out / f"answers-{name}", delta), "delta": delta,
                        **({"SRC(D)": answer(src, out / "answers-SRC-D", hist["epochs"]["0"]["delta"])} if args.grid else {})}}
        (out / f"{name}.json").write_text(json.dumps(doc, indent=1))
        ep = hist["epochs"]
        line = " ".join(f"{k}:{e['valid']:.2f}" for k, e in ep.items())
        print(f"{name}: {seconds:.0f} s ({cpu:.0f} s CPU), kept check {hist['best']} ({hist['best_valid']:.2f}); valid {line}", flush=True)


if __name__ == "__main__":
    main()
