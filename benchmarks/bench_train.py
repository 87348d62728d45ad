"""Train backbones and print a table of confidence-prediction errors and seconds per epoch.

    PIPELINE_DATA=../shared/data nice -n 10 python benchmarks/bench_train.py \
        --runs ppi5k:ukge_logi ppi5k:ukge_rect:psl cn15k:beurre --epochs 5 --out /tmp/runs
    python benchmarks/bench_train.py --summarize /tmp/runs/*     # table of existing run directories

Each spec is DATASET:MODEL[:psl]. Published figures (test MSE on positives) are printed beside ours.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# test MSE on positives reported by the soft-query literature's reproductions (issue 4)
PUBLISHED_MSE = {
    ("cn15k", "beurre", False): 0.117,
    ("cn15k", "ukge_rect", True): 0.200,
    ("cn15k", "ukge_logi", False): 0.246,
    ("ppi5k", "ukge_logi", False): 0.0036,
    ("ppi5k", "ukge_rect", False): 0.0037,
}


def row(run_dir: Path) -> dict:
    from pipeline.models import read_run

    run = read_run(run_dir)
    res, cfg = run.results, run.config
    name = cfg["model"] + ("+psl" if cfg["psl"] else "")
    neg = res.get("test_negatives", {})
    fmt = lambda x: "" if x is None else f"{x:.4f}"  # noqa: E731
    return {
        "dataset": cfg["dataset"],
        "model": name,
        "lr": cfg["lr"],
        "epochs": res.get("epochs_run"),
        "best": res.get("best_epoch"),
        "s/epoch": f"{res['seconds_per_epoch']:.1f}" if res.get("seconds_per_epoch") else "",
        "device": res.get("device"),
        "valid MSE": fmt(res.get("valid", {}).get("mse")),
        "valid neg MSE": fmt(res.get("valid_negatives", {}).get("mse")),
        "test MSE": fmt(res.get("test", {}).get("mse")),
        "test MAE": fmt(res.get("test", {}).get("mae")),
        "test neg MSE": fmt(neg.get("mse")),
        "published MSE": fmt(PUBLISHED_MSE.get((cfg["dataset"], cfg["model"], bool(cfg["psl"])))),
    }


def print_rows(rows: list[dict]) -> None:
    if not rows:
        return
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="*", default=[], help="DATASET:MODEL[:psl] specs to train")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    ap.add_argument("--lr", type=float, default=None, help="override the model's reference learning rate")
    ap.add_argument("--tag", default="", help="suffix of the run directory names (e.g. for a non-default lr)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/pipeline-bench-runs"))
    ap.add_argument("--resume", action="store_true", help="continue existing run directories")
    ap.add_argument(
        "--summarize", nargs="*", type=Path, default=[], help="existing run directories to tabulate"
    )
    args = ap.parse_args(argv)

    from loaders import load
    from pipeline.models import default_config, train

    dirs = list(args.summarize)
    cache = {}
    for spec in args.runs:
        parts = spec.split(":")
        dataset, model, psl = parts[0], parts[1], len(parts) > 2 and parts[2] == "psl"
        kg = cache.setdefault(dataset, load(dataset))
        cfg = default_config(
            dataset, model, psl=psl, epochs=args.epochs, seed=args.seed, device=args.device, lr=args.lr
        )
        out = args.out / f"{dataset}-{model}{'-psl' if psl else ''}-s{args.seed}{args.tag}"
        resume = args.resume and (out / "checkpoint.pt").exists()
        train(kg, cfg, out, resume=resume, overwrite=not resume)  # a benchmark retrains in place
        dirs.append(out)
        print_rows([row(out)])
        sys.stdout.flush()
    print()
    print_rows([row(d) for d in dirs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
