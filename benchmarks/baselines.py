"""The query-embedding baselines (LogicE+NE, ConE+NE): training steps per second and answering speed."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.harness import Goal, Result, Table, benchmark, progress


def train_speed(
    model, data, batch_size: int, negatives: int, in_batch: int, max_answers: int, steps: int, seed: int
) -> dict:
    """{steps_per_s, steps_per_epoch, s_per_epoch} of the trainer's step on this model (3 warm-up steps)."""
    import torch

    from pipeline.core.optim import adam
    from pipeline.stages.train_qe import draw_negatives, epoch_batches, step_loss, subsample_answers

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


@benchmark(
    "baselines",
    title="The query-embedding baselines",
    goals=[
        Goal(
            "steps_per_s",
            "training steps per second at batch 256, the slower model (one CPU thread or a GPU)",
            ">=",
            2,
            "steps/s",
        )
    ],
    quick={"steps": 3, "per_type": 5},
)
def baselines(
    *,
    train_queries: tuple[Path, ...],
    test_queries: Path,
    models: tuple[str, ...] = ("logice_ne", "cone_ne"),
    steps: int = 40,
    dim: int = 128,
    hidden: int = 256,
    batch_size: int = 256,
    negatives: int = 64,
    batch_negatives: int = 64,
    max_answers: int = 32,
    per_type: int = 50,
    device: str | None = None,
    threads: int | None = None,
    seed: int = 0,
) -> Result:
    """Training: a fresh model (seeded) takes ``--steps`` optimiser steps of the trainer's own loop (shuffled
    same-plan batches, answer subsampling, uniform and in-batch negatives, the listwise loss, Adam) after 3
    warm-up steps over the train sets ``--train-queries``; steps/s is measured, s/epoch extrapolated from it
    (the steps of one epoch / steps/s). Answering: the same model scores every entity for the first
    ``--per-type`` queries of each type of ``--test-queries``, batched by type as ``pipeline answer`` does
    (the model's scoring only; its speed does not depend on the weights, so no trained run is needed)."""
    import torch

    from loaders import get_spec
    from pipeline.baselines.models import get_qe_model_class
    from pipeline.core.config import select_device
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.qe import QueryEmbedding
    from pipeline.softquery.types import ordered_types
    from pipeline.stages.answer import answer_query_set
    from pipeline.stages.train_qe import train_tensors

    if threads:
        torch.set_num_threads(threads)
    dev = select_device(device)
    train_sets = [read_query_set(p) for p in train_queries]
    test = read_query_set(test_queries)
    if per_type:
        test.frame = test.frame.groupby("type", sort=False).head(per_type).reset_index(drop=True)
    dataset = test.meta["dataset"]
    spec = get_spec(dataset)
    data = {p: d.to(dev) for p, d in train_tensors(train_sets).items()}
    training, answering = {}, {}
    with progress(len(models), "baselines", "model") as bar:
        for name in models:
            torch.manual_seed(seed)
            model = get_qe_model_class(name)(spec.n_entities, spec.n_relations, dim=dim, hidden=hidden).to(
                dev
            )
            training[name] = train_speed(
                model, data, batch_size, negatives, batch_negatives, max_answers, steps, seed
            )
            method = QueryEmbedding(model, {"dataset": dataset, "model": name}, "")
            _, stats = answer_query_set(test, method, progress=False)
            answering[name] = {t: s["queries_per_s"] for t, s in stats.items()}
            bar.update(1)
    types = ordered_types(set(test.frame["type"]))
    n_train = sum(int(d.answers.shape[0]) for d in data.values())
    return Result(
        [
            Table(
                ["model", "steps/s", "steps/epoch", "s/epoch (extrapolated)"],
                [[m, t["steps_per_s"], t["steps_per_epoch"], t["s_per_epoch"]] for m, t in training.items()],
                formats={"steps/s": ".2f", "s/epoch (extrapolated)": ".0f"},
            ),
            Table(
                ["answering, queries/s", *types],
                [[m, *(a.get(t) for t in types)] for m, a in answering.items()],
            ),
        ],
        {"steps_per_s": min(t["steps_per_s"] for t in training.values()) if batch_size == 256 else None},
        [
            f"{dataset}: {n_train:,} train queries, d = {dim}, hidden {hidden}, batch {batch_size}, {negatives} + "
            f"{batch_negatives} in-batch negatives, {max_answers} answers per query; on {dev}, "
            f"{torch.get_num_threads()} thread(s); {steps} timed steps."
        ],
    )
