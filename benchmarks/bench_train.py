"""Train backbones and print a table of confidence-prediction errors and seconds per epoch; or time the
project's training loop beside a plain hand-written PyTorch loop of the same math.

    PIPELINE_DATA=../shared/data nice -n 10 python benchmarks/bench_train.py \
        --runs ppi5k:ukge_logi ppi5k:ukge_rect:psl cn15k:beurre --epochs 5 --out /tmp/runs
    python benchmarks/bench_train.py --summarize /tmp/runs/*     # table of existing run directories
    PIPELINE_DATA=../shared/data python benchmarks/bench_train.py --loop ppi5k --epochs 3 [--device cuda] \
        [--batch-size 1024] [--threads 2] [--json OUT.json]

Each spec is DATASET:MODEL[:psl]. Published figures (test MSE on positives) are printed beside ours.
--batch-size overrides the reference batch size; --draw-stream K (K > 0) trains with the seed's initial
weights but draws every epoch's batches from another generator stream: on the CPU, what a CUDA run of the
same seed is (other draws, the same distribution), so its test MSE shows whether that changes quality.

--loop DATASET: UKGE logi with the reference settings (dim 128, batch 1024, 10 negatives per fact and side,
L2 5e-4, Adam 1e-3), the same initial weights for both loops (after an untimed warm-up of 3 steps of each
on throwaway copies), one epoch of each in turn (project, plain,
project, ...; the box may be shared), under the deterministic kernels `pipeline train` runs with
(--kernels default: without them, to see what they cost). "project"
is `pipeline.models.training.run_epoch`; "plain" is :func:`plain_epoch`, written here from the math alone
(gather, product, sigmoid, squared error on each fact and its corruptions, L2 on the batch's rows, Adam;
both loops step the project's optimiser, pipeline.core.optim.adam: fused on CUDA),
with every draw on the device and no host read until the epoch ends: on a GPU the floor the project's loop
is held against. On CUDA each epoch ends with a synchronisation before its clock stops. --clock cpu times
the process' CPU time instead of the wall clock (with --threads 1: the work of one core, steadier on a
shared machine; meaningless on CUDA).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
from pathlib import Path

# test MSE on positives reported by the soft-query literature's reproductions
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


def plain_epoch(
    params: dict, opt, h, r, t, c, n_entities: int, batch_size: int, k: int, l2: float, gen
) -> float:
    """One epoch of UKGE logi written plainly: params {ent, rel, w, b} (leaf tensors), facts h, r, t (N,)
    int64 and c (N,) float32 on the device, ``gen`` a generator on the device. Returns the mean batch loss
    (read once, at the end)."""
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


def compare_loops(args) -> dict:
    """--loop: seconds per epoch of the project's loop and of the plain one, in turn (module docstring)."""
    import platform
    import time

    import torch

    from loaders import load
    from pipeline.core.config import select_device
    from pipeline.core.optim import adam
    from pipeline.models import default_config
    from pipeline.models.training import Facts, build_model, run_epoch

    if args.threads:
        torch.set_num_threads(args.threads)
    dev = select_device(args.device)
    kg = load(args.loop)
    train = kg.graph("train")
    cfg = default_config(
        args.loop, "ukge_logi", n_train=len(train), batch_size=args.batch_size, seed=args.seed, device=dev
    )
    facts = Facts.from_frame(train, dev)
    model = build_model(cfg, kg.n_entities, kg.n_relations).to(dev)
    project_opt = adam(model.parameters(), lr=cfg.lr)
    plain = {name: p.detach().clone().requires_grad_(True) for name, p in model.named_parameters()}
    plain_opt = adam(list(plain.values()), lr=cfg.lr)
    l2 = float(cfg.model_kwargs.get("l2", 5e-4))
    # cpu: this process' CPU time (all its threads), steadier than the wall clock on a shared machine
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.startswith("cuda") else (lambda: None)  # noqa: E731
    if dev.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if args.kernels == "deterministic":  # as `pipeline train` runs
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = False
    # warm-up, untimed: a few steps of each loop on throwaway copies (lazy imports, first allocations and,
    # on CUDA, kernel loads and the allocator's pool would otherwise land in the first loop timed)
    few = Facts(*(x[: 3 * cfg.batch_size] for x in (facts.h, facts.r, facts.t, facts.c)))
    spare = copy.deepcopy(model)
    run_epoch(spare, adam(spare.parameters(), lr=cfg.lr), few, None, cfg, 0, False)
    spare_plain = {k: v.detach().clone().requires_grad_(True) for k, v in plain.items()}
    plain_epoch(
        spare_plain, adam(list(spare_plain.values()), lr=cfg.lr), few.h, few.r, few.t, few.c,
        kg.n_entities, cfg.batch_size, cfg.negatives, l2, torch.Generator(device=dev).manual_seed(1),
    )
    del spare, spare_plain
    def one_epoch(loop: str, epoch: int) -> float:
        if loop == "project":
            return run_epoch(model, project_opt, facts, None, cfg, epoch, False)
        gen = torch.Generator(device=dev).manual_seed(cfg.seed * 1_000_003 + epoch + 1)
        return plain_epoch(
            plain, plain_opt, facts.h, facts.r, facts.t, facts.c, kg.n_entities, cfg.batch_size,
            cfg.negatives, l2, gen,
        )

    rows = []
    for epoch in range(args.epochs):
        for loop in ("project", "plain"):
            sync()
            t0 = clock()
            loss = one_epoch(loop, epoch)
            sync()
            rows.append({"loop": loop, "epoch": epoch + 1, "seconds": clock() - t0, "loss": loss})
            print(f"# {loop} epoch {epoch + 1}: {rows[-1]['seconds']:.2f} s, loss {loss:.6f}", file=sys.stderr)
    steps = -(-len(facts) // cfg.batch_size)
    print(
        f"\n{args.loop}: UKGE logi, {len(facts):,} train facts, batch {cfg.batch_size} ({steps} steps), dim {cfg.dim}, "
        f"{cfg.negatives} negatives per side; device {dev}"
        + (f" ({torch.cuda.get_device_name(dev)})" if dev.startswith("cuda") else "")
        + f"; {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {args.clock} clock, {args.kernels} kernels; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    )
    print("| loop | epochs | s/epoch min | median | max | steps/s (median) | last loss |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for loop in ("project", "plain"):
        secs = sorted(x["seconds"] for x in rows if x["loop"] == loop)
        med = secs[len(secs) // 2] if len(secs) % 2 else sum(secs[len(secs) // 2 - 1 : len(secs) // 2 + 1]) / 2
        last = [x["loss"] for x in rows if x["loop"] == loop][-1]
        summary[loop] = {"min": secs[0], "median": med, "max": secs[-1], "steps_per_s": steps / med}
        print(f"| {loop} | {len(secs)} | {secs[0]:.2f} | {med:.2f} | {secs[-1]:.2f} | {steps / med:.1f} | {last:.6f} |")
    ratio = summary["project"]["median"] / summary["plain"]["median"]
    print(f"\nproject / plain (medians): {ratio:.2f}")
    if args.profile:  # where a step's time goes: one more epoch of each loop under torch's profiler
        from torch.profiler import ProfilerActivity, profile

        cuda = dev.startswith("cuda")
        key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        for loop in ("project", "plain"):
            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                one_epoch(loop, args.epochs)
                sync()
            print(f"\n{loop}, one epoch under the profiler: the {args.profile} operators of most {key}")
            print(prof.key_averages().table(sort_by=key, row_limit=args.profile))
    doc = {"dataset": args.loop, "device": dev, "batch_size": cfg.batch_size, "steps": steps, "epochs": rows,
           "summary": summary, "ratio": ratio, "threads": torch.get_num_threads(), "clock": args.clock,
           "kernels": args.kernels}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc, indent=1))
    return doc


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
    ap.add_argument("--loop", default=None, help="DATASET: time the project's loop beside the plain one")
    ap.add_argument("--batch-size", type=int, default=None, help="batch size (default: the reference)")
    ap.add_argument(
        "--draw-stream", type=int, default=0,
        help="--runs: draw the batches from stream K > 0 instead of the seed's, with the seed's initial "
        "weights (what a CUDA run is to a CPU run: other draws, the same distribution)",
    )
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="--loop: wall clock, or this process' CPU time"
    )
    ap.add_argument(
        "--kernels", choices=("deterministic", "default"), default="deterministic",
        help="--loop: torch's deterministic kernels (as `pipeline train`) or its defaults (what they cost)",
    )
    ap.add_argument("--json", dest="json_out", default=None, help="--loop: also write the figures here")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="--loop: then one epoch of each loop under torch.profiler, its N costliest operators")
    args = ap.parse_args(argv)
    if args.loop:
        compare_loops(args)
        return 0

    from loaders import load
    from pipeline.models import default_config, train

    if args.draw_stream:
        import torch

        import pipeline.models.training as training

        def other_stream(seed: int, epoch: int, device="cpu") -> torch.Generator:
            return torch.Generator(device=device).manual_seed(seed * 1_000_003 + epoch + 1 + args.draw_stream * 7_777_777)

        training.epoch_generator = other_stream
    dirs = list(args.summarize)
    cache = {}
    for spec in args.runs:
        parts = spec.split(":")
        dataset, model, psl = parts[0], parts[1], len(parts) > 2 and parts[2] == "psl"
        kg = cache.setdefault(dataset, load(dataset))
        cfg = default_config(
            dataset, model, psl=psl, epochs=args.epochs, seed=args.seed, device=args.device, lr=args.lr,
            batch_size=args.batch_size, n_train=len(kg.graph("train")),
        )
        out = args.out / f"{dataset}-{model}{'-psl' if psl else ''}-s{args.seed}{args.tag}"
        if args.draw_stream:
            out = out.with_name(out.name + f"-d{args.draw_stream}")
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
