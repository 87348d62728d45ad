"""Training: seconds per epoch of the project's loop beside a plain hand-written loop of the same math."""

from __future__ import annotations

import copy
import os
import time

from benchmarks.harness import Goal, Result, Table, benchmark, progress, say


def plain_epoch(
    params: dict, opt, h, r, t, c, n_entities: int, batch_size: int, k: int, l2: float, gen
) -> float:
    """One epoch of UKGE logi written plainly from the math: params {ent, rel, w, b} (leaf tensors), facts
    h, r, t (N,) int64 and c (N,) float32 on the device, ``gen`` a generator on the device; every draw on
    the device, the loss read once at the end. Returns the mean batch loss."""
    import torch

    dev = h.device
    ent, rel, w, b = params["ent"], params["rel"], params["w"], params["b"]
    perm = torch.randperm(len(h), generator=gen, device=dev)
    total = torch.zeros((), dtype=torch.float64, device=dev)
    steps = 0
    for s in range(0, len(h), batch_size):
        idx = perm[s : s + batch_size]
        hb, rb, tb, cb = h[idx], r[idx], t[idx], c[idx]
        n = idx.shape[0]
        neg_h = torch.randint(n_entities, (n * k,), generator=gen, device=dev)
        neg_t = torch.randint(n_entities, (n * k,), generator=gen, device=dev)
        eh, er, et = ent[hb], rel[rb], ent[tb]
        pos = torch.sigmoid(w * (eh * er * et).sum(-1) + b)
        erk, ehk, etk = er.repeat_interleave(k, 0), eh.repeat_interleave(k, 0), et.repeat_interleave(k, 0)
        corrupt_head = torch.sigmoid(w * (ent[neg_h] * erk * etk).sum(-1) + b)
        corrupt_tail = torch.sigmoid(w * (ehk * erk * ent[neg_t]).sum(-1) + b)
        loss = (
            (pos - cb).pow(2).mean()
            + torch.cat([corrupt_head, corrupt_tail]).pow(2).mean()
            + l2 * (eh.pow(2).sum() + er.pow(2).sum() + et.pow(2).sum()) / (2 * n)
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.detach()
        steps += 1
    return float(total) / max(1, steps)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


@benchmark(
    "train-epoch",
    title="A training epoch: the project's loop against a plain loop",
    goals=[
        Goal("ratio", "the project's seconds per epoch against the plain loop's (medians)", "<=", 1.25, "x")
    ],
    quick={"epochs": 1, "max_facts": 20_000},
)
def train_epoch(
    *,
    dataset: str = "ppi5k",
    epochs: int = 3,
    device: str | None = None,
    batch_size: int | None = None,
    threads: int | None = None,
    clock: str = "wall",
    kernels: str = "deterministic",
    profile: int = 0,
    max_facts: int | None = None,
    seed: int = 0,
) -> Result:
    """UKGE logi with the reference settings (dim 128, batch 1024, 10 negatives per fact and side, L2 5e-4,
    Adam 1e-3), both loops from the same weights after an untimed warm-up of 3 steps of each on throwaway
    copies, one epoch of each in turn, under the deterministic kernels ``pipeline train`` runs with
    (``--kernels default``: without them, to see what they cost). "project" is
    ``pipeline.models.training.run_epoch``; "plain" is :func:`plain_epoch`, written from the math alone (both
    step the project's optimiser: fused Adam on CUDA): the floor the project's loop is held against. On CUDA
    each epoch ends with a synchronisation. ``--clock cpu`` times the process' CPU time (with ``--threads
    1``: one core's work, steadier on a shared machine; meaningless on CUDA). ``--profile N``: one more
    epoch of each loop under torch.profiler, its N costliest operators. ``--max-facts``: the first N train
    facts only (the quick size)."""
    import torch

    from loaders import load
    from pipeline.core.config import select_device
    from pipeline.core.optim import adam
    from pipeline.models import default_config
    from pipeline.models.training import Facts, build_model, run_epoch

    if threads:
        torch.set_num_threads(threads)
    dev = select_device(device)
    kg = load(dataset)
    train = kg.graph("train")
    cfg = default_config(
        dataset, "ukge_logi", n_train=len(train), batch_size=batch_size, seed=seed, device=dev
    )
    facts = Facts.from_frame(train, dev)
    if max_facts:
        facts = Facts(*(x[:max_facts] for x in (facts.h, facts.r, facts.t, facts.c)))
    model = build_model(cfg, kg.n_entities, kg.n_relations).to(dev)
    project_opt = adam(model.parameters(), lr=cfg.lr)
    plain = {name: p.detach().clone().requires_grad_(True) for name, p in model.named_parameters()}
    plain_opt = adam(list(plain.values()), lr=cfg.lr)
    l2 = float(cfg.model_kwargs.get("l2", 5e-4))
    timer = time.process_time if clock == "cpu" else time.perf_counter
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.startswith("cuda") else (lambda: None)  # noqa: E731
    if dev.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if kernels == "deterministic":  # as `pipeline train` runs
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
    # warm-up, untimed, on throwaway copies: lazy imports, first allocations and, on CUDA, kernel loads and
    # the allocator's pool would otherwise land in the first loop timed
    few = Facts(*(x[: 3 * cfg.batch_size] for x in (facts.h, facts.r, facts.t, facts.c)))
    spare = copy.deepcopy(model)
    run_epoch(spare, adam(spare.parameters(), lr=cfg.lr), few, None, cfg, 0, False)
    spare_plain = {k: v.detach().clone().requires_grad_(True) for k, v in plain.items()}
    plain_epoch(
        spare_plain,
        adam(list(spare_plain.values()), lr=cfg.lr),
        few.h,
        few.r,
        few.t,
        few.c,
        kg.n_entities,
        cfg.batch_size,
        cfg.negatives,
        l2,
        torch.Generator(device=dev).manual_seed(1),
    )
    del spare, spare_plain

    def one_epoch(loop: str, epoch: int) -> float:
        if loop == "project":
            return run_epoch(model, project_opt, facts, None, cfg, epoch, False)
        gen = torch.Generator(device=dev).manual_seed(cfg.seed * 1_000_003 + epoch + 1)
        return plain_epoch(
            plain,
            plain_opt,
            facts.h,
            facts.r,
            facts.t,
            facts.c,
            kg.n_entities,
            cfg.batch_size,
            cfg.negatives,
            l2,
            gen,
        )

    secs: dict[str, list[float]] = {"project": [], "plain": []}
    last: dict[str, float] = {}
    with progress(2 * epochs, "train-epoch", "epoch") as bar:
        for epoch in range(epochs):
            for loop in ("project", "plain"):
                sync()
                t0 = timer()
                last[loop] = one_epoch(loop, epoch)
                sync()
                secs[loop].append(timer() - t0)
                bar.update(1)
    steps = -(-len(facts) // cfg.batch_size)
    rows = [
        [loop, len(v), min(v), _median(v), max(v), steps / _median(v), last[loop]] for loop, v in secs.items()
    ]
    ratio = _median(secs["project"]) / _median(secs["plain"])
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as torch_profile

        cuda = dev.startswith("cuda")
        key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        for loop in ("project", "plain"):
            with torch_profile(
                activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            ) as prof:
                one_epoch(loop, epochs)
                sync()
            say(f"\n{loop}, one epoch under the profiler: the {profile} operators of most {key}")
            say(prof.key_averages().table(sort_by=key, row_limit=profile))
    where = f"{dev}" + (f" ({torch.cuda.get_device_name(dev)})" if dev.startswith("cuda") else "")
    return Result(
        [
            Table(
                ["loop", "epochs", "s/epoch min", "median", "max", "steps/s (median)", "last loss"],
                rows,
                formats={"s/epoch min": ".2f", "median": ".2f", "max": ".2f", "last loss": ".6f"},
            )
        ],
        {"ratio": ratio},
        [
            f"{dataset}: {len(facts):,} train facts, batch {cfg.batch_size} ({steps} steps), dim {cfg.dim}; on {where}, "
            f"{torch.get_num_threads()} thread(s), {clock} clock, {kernels} kernels; project / plain (medians) "
            f"{ratio:.2f}."
        ],
    )
