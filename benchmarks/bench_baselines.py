"""Training and answering speed of the query-embedding baselines: LogicE+NE and ConE+NE.

    PIPELINE_DATA=../shared/data python benchmarks/bench_baselines.py \
        --train-queries q/train_big/ppi5k_train_hybrid_random.parquet \
        --train-queries q/train_small/ppi5k_train_hybrid_random.parquet \
        --test-queries q/ppi5k_test_hybrid_random.parquet [--models logice_ne,cone_ne] [--steps 40] \
        [--dim 128] [--hidden 256] [--batch-size 256] [--negatives 64] [--max-answers 32] [--threads 1] \
        [--batch-negatives 64] [--device cpu] [--per-type 50] [--seed 0]

Training: a fresh model (seeded) takes --steps optimiser steps of the trainer's own loop
(``pipeline.stages.train_qe``: shuffled same-plan batches, answer subsampling, uniform and in-batch
negatives, the listwise loss, Adam) after 3 warm-up steps; steps/s is measured, s/epoch is the number of steps of one epoch over
the train sets divided by it (an extrapolation from a short run, not a full epoch). Answering: the same
model scores every entity for the first --per-type test queries of each type, batched by type as
``pipeline answer`` does (the time of the model's scoring only; answering speed does not depend on the
weights, so no trained run is needed). Prints markdown tables and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from loaders import get_spec
from pipeline.baselines.models import get_qe_model_class
from pipeline.core.config import select_device
from pipeline.core.optim import adam
from pipeline.formats.queryset import read_query_set
from pipeline.methods.qe import QueryEmbedding
from pipeline.softquery.types import ordered_types
from pipeline.stages.answer import answer_query_set
from pipeline.stages.train_qe import (
    draw_negatives,
    epoch_batches,
    step_loss,
    subsample_answers,
    train_tensors,
)


def train_speed(
    model, data, batch_size: int, negatives: int, in_batch: int, max_answers: int, steps: int, seed: int
) -> dict:
    """{steps_per_s, steps_per_epoch, s_per_epoch} of the trainer's step on this model (3 warm-up steps)."""
    dev = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    sizes = {p: int(d.answers.shape[0]) for p, d in data.items()}
    batches = epoch_batches(sizes, batch_size, gen)
    opt = adam(model.parameters(), lr=1e-3)  # as train_qe steps
    model.train()
    warm = 3
    t0 = 0.0
    for i, (plan, idx) in enumerate((batches * (1 + (steps + warm) // len(batches)))[: steps + warm]):
        if i == warm:
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
        full = data[plan].take(idx.to(dev))
        batch = subsample_answers(full, max_answers, gen)
        neg = draw_negatives(full, model.n_entities, negatives, in_batch, gen)
        loss = step_loss(model, plan, batch, neg, "listwise", answers=full)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seconds = time.perf_counter() - t0
    per_s = steps / seconds
    return {"steps_per_s": per_s, "steps_per_epoch": len(batches), "s_per_epoch": len(batches) / per_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-queries", action="append", required=True)
    ap.add_argument("--test-queries", required=True)
    ap.add_argument("--models", default="logice_ne,cone_ne")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--negatives", type=int, default=64)
    ap.add_argument(
        "--batch-negatives", type=int, default=64, help="in-batch negatives per query (the defaults')"
    )
    ap.add_argument("--max-answers", type=int, default=32)
    ap.add_argument("--per-type", type=int, default=50, help="test queries per type answered (0 = all)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (1 on a shared CPU)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = select_device(args.device)

    train_sets = [read_query_set(p) for p in args.train_queries]
    test = read_query_set(args.test_queries)
    if args.per_type:
        test.frame = test.frame.groupby("type", sort=False).head(args.per_type).reset_index(drop=True)
    dataset = test.meta["dataset"]
    spec = get_spec(dataset)
    data = {p: d.to(dev) for p, d in train_tensors(train_sets).items()}
    n_train = sum(int(d.answers.shape[0]) for d in data.values())

    training, answering = {}, {}
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        torch.manual_seed(args.seed)
        model = get_qe_model_class(name)(
            spec.n_entities, spec.n_relations, dim=args.dim, hidden=args.hidden
        ).to(dev)
        training[name] = train_speed(
            model,
            data,
            args.batch_size,
            args.negatives,
            args.batch_negatives,
            args.max_answers,
            args.steps,
            args.seed,
        )
        method = QueryEmbedding(model, {"dataset": dataset, "model": name}, "")
        _, stats = answer_query_set(test, method, progress=False)
        answering[name] = {t: s["queries_per_s"] for t, s in stats.items()}

    print(
        f"\n{dataset}: {n_train:,} train queries ({len(data)} plans), d = {args.dim}, hidden {args.hidden}, "
        f"batch {args.batch_size}, {args.negatives} + {args.batch_negatives} in-batch negatives, "
        f"{args.max_answers} answers per query; device {dev}; "
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads; {args.steps} timed steps; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    )
    print("| model | steps/s | steps/epoch | s/epoch (extrapolated) |")
    print("|---|---:|---:|---:|")
    for name, t in training.items():
        print(f"| {name} | {t['steps_per_s']:.2f} | {t['steps_per_epoch']} | {t['s_per_epoch']:.0f} |")
    types = ordered_types(set(test.frame["type"]))
    counts = test.frame["type"].value_counts().to_dict()
    print("\n| answering, queries/s | " + " | ".join(f"{t} ({counts[t]})" for t in types) + " |")
    print("|---|" + "---:|" * len(types))
    for name, tp in answering.items():
        print(f"| {name} | " + " | ".join(f"{tp.get(t, 0.0):.1f}" for t in types) + " |")
    print(json.dumps({"device": str(dev), "training": training, "answering": answering}))


if __name__ == "__main__":
    main()
