"""Seconds of fitting SRC's calibrations (L, D+L, D) as `pipeline answer` builds them, with the answers
of the test set written, so two code bases can be timed and compared on the same files:

    PIPELINE_DATA=../shared/data nice -n 5 python benchmarks/bench_calibration.py \\
        --queries RUN/queries --export RUN/exports/EXPORT --run RUN_DIR --calibrations L,D+L \\
        --l-epochs 20 --threads 1 --out /tmp/bench-cal [--split-valid-pass]

Each calibration fits afresh (the backbone's run is copied without its saved fits). Prints seconds per
calibration, the kept L check and delta, and with --split-valid-pass the seconds of one valid selection
pass (the identity, every delta of D). Run it with PYTHONPATH pointing at another checkout for "before".
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", required=True, help="folder of the train, valid and test query sets")
    ap.add_argument("--export", required=True)
    ap.add_argument("--run", required=True, help="the export's backbone run")
    ap.add_argument("--calibrations", default="L,D+L")
    ap.add_argument("--l-epochs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True, help="answers files go here (one folder per calibration)")
    ap.add_argument("--split-valid-pass", action="store_true")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from loaders import load
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.base import BuildInputs
    from pipeline.methods.options import MethodOptions
    from pipeline.methods.src.method import SRC
    from pipeline.stages.answer import run_answer, valid_score

    q = Path(args.queries)
    sets = {s: read_query_set(next(q.glob(f"*_{s}_*.parquet"))) for s in ("train", "valid", "test")}
    dataset = sets["test"].meta["dataset"]
    kg = load(dataset)
    torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # its first construction imports torch._dynamo (~4 s)
    if args.split_valid_pass:
        src = SRC.load(args.export, dataset, device="cpu", kg=kg)
        score = valid_score(sets["valid"])
        score(src)  # warm: the engine's memo and pair work
        t0 = time.perf_counter()
        score(src)
        one = time.perf_counter() - t0
        grid = [src.with_delta(d) for d in (0.0, 0.05, 0.1, 0.15, 0.2)]
        t0 = time.perf_counter()
        many = getattr(score, "many", None)
        many(grid) if many else [score(m) for m in grid]
        five = time.perf_counter() - t0
        print(json.dumps({"valid pass": round(one, 2), "valid pass, 5 deltas": round(five, 2)}))
    for calibration in args.calibrations.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            shutil.copytree(args.run, run, ignore=shutil.ignore_patterns("calibration"))
            opts = MethodOptions(method="src", adjacency=args.export, calibration=calibration, run=run, device="cpu",
                                 seed=0, l_epochs=args.l_epochs, kg=kg)
            inputs = BuildInputs(dataset=dataset, valid=sets["valid"], train=sets["train"],
                                 score=valid_score(sets["valid"]), progress=False)
            t0 = time.perf_counter()
            method = SRC.from_options(opts, inputs)
            seconds = time.perf_counter() - t0
            out = Path(args.out) / calibration
            rep = run_answer(sets["test"], method, out, {"valid": sets["valid"], "train": sets["train"]}, progress=False)
            kept, checks = None, None
            if method.info.get("l_dir"):
                hist = json.loads((Path(method.info["l_dir"]) / "L.json").read_text())["history"]
                ep = hist["epochs"]
                kept = max(ep, key=lambda k: (ep[k]["valid"], -int(k)))
                checks = {k: [e["valid"], e["loss"]] for k, e in ep.items()}  # every check's valid score and loss
            print(json.dumps({"calibration": calibration, "seconds": round(seconds, 1), "delta": rep.get("delta"),
                              "kept L check": kept, "answers": rep["path"], "checks": checks}))


if __name__ == "__main__":
    main()
