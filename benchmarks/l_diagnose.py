"""What calibration L learns: fit L for a few steps with no valid selection (the last state
kept) and report how it moves the stored confidences, by what the fact is in the data set: a train fact,
a valid or test fact the backbone generalised to (true, unseen by L's targets), or a fact of no split.

    PIPELINE_DATA=../shared/data python benchmarks/l_diagnose.py --queries Q --export E --run R \\
        --setting l_lr=1e-5,l_epochs=1 [--setting l_variant=heldout,l_epochs=1]

Prints, per setting and category: facts, mean confidence before, mean change, the share lowered and the
share dropped to 0; and the same for the score form's identity (the export recomputed from the backbone).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def categories(kg, fwd_src, fwd_dst, rel) -> np.ndarray:  # noqa: ANN001
    """0 train, 1 valid (not train), 2 test (neither), 3 none, per stored fact (rows by head order)."""
    n = kg.n_entities
    key = (rel.astype(np.int64) * n + fwd_src.astype(np.int64)) * n + fwd_dst.astype(np.int64)
    out = np.full(len(key), 3, dtype=np.int8)
    for code, split in ((2, "test"), (1, "val"), (0, "train")):  # train wins over valid wins over test
        f = kg.split_facts(split)[["h", "r", "t"]].to_numpy().astype(np.int64)
        k = (f[:, 1] * n + f[:, 0]) * n + f[:, 2]
        out[np.isin(key, k)] = code
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for a in ("--queries", "--export", "--run"):
        ap.add_argument(a, required=True)
    ap.add_argument("--setting", action="append", default=[])
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from l_search import parse_setting  # the sibling script (benchmarks/ is the script's folder on sys.path)

    from loaders import load
    from pipeline.core.kg import observed_graph
    from pipeline.engine import as_adjacency, search_batch
    from pipeline.engine.adjacency import fact_relations
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.options import LOptions
    from pipeline.methods.src.affine import calibrated_adjacency, feature_tables, fit_affine, make_calibration
    from pipeline.methods.src.method import SRC
    from pipeline.methods.src.recipe import LConfig, l_config
    from pipeline.models import load_run

    q = Path(args.queries)
    train = read_query_set(next(q.glob("*_train_*.parquet")))
    dataset = train.meta["dataset"]
    kg = load(dataset)
    src = SRC.load(args.export, dataset, device="cpu", kg=kg)
    adj = src.adjacency
    model = load_run(args.run)
    tables = feature_tables(model)
    rel = fact_relations(adj.fwd.ptr, adj.n_entities).numpy()
    cat = categories(kg, adj.fwd.src.numpy(), adj.fwd.dst.numpy(), rel)
    before = adj.fwd.conf.numpy().astype(np.float64)
    names = ("train", "valid", "test", "none")

    def report(label: str, after: np.ndarray) -> None:
        print(f"{label}")
        print("| facts | n | mean conf | mean change | lowered | to 0 |")
        print("|---|---:|---:|---:|---:|---:|")
        for c, name in enumerate(names):
            m = cat == c
            if not m.any():
                continue
            d = after[m] - before[m]
            print(f"| {name} | {int(m.sum()):,} | {before[m].mean():.3f} | {d.mean():+.4f} | "
                  f"{(d < 0).mean():.0%} | {(after[m] == 0).mean():.1%} |")

    with torch.no_grad():
        ident = make_calibration(LConfig(form="score"), model, tables, src.manifest["threshold"])
        report("score form at the identity (the export recomputed)",
               calibrated_adjacency(adj, ident, tables).fwd.conf.numpy().astype(np.float64))
    for text in args.setting:
        _, given = parse_setting("x:" + text)
        cfg = l_config(LOptions(**given), 0)
        truth = as_adjacency(observed_graph(kg, cfg.targets))
        calib, _ = fit_affine(model, adj, train.queries(), truth, search_batch, None, cfg, progress=False,
                              threshold=src.manifest["threshold"])
        with torch.no_grad():
            after = calibrated_adjacency(adj, calib, tables).fwd.conf.numpy().astype(np.float64)
        report(text, after)


if __name__ == "__main__":
    main()
