"""Calibration's costs: one training step of L on an export, and fitting L, D+L and D as ``pipeline answer``
builds them."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Goal, Result, Table, benchmark, progress


@benchmark(
    "l-step",
    title="One training step of calibration L",
    goals=[
        Goal(
            "cn15k_step_s",
            "CN15k: one step of a batch of 64 alpha-0 queries (best of the steps)",
            "<=",
            3,
            "s",
        )
    ],
    quick={"steps": 1},
)
def l_step(*, train: Path, adjacency: Path, steps: int = 3, threads: int = 1, seed: int = 0) -> Result:
    """Seconds of one step of L's fit (``fit_affine``'s step) on the export ``--adjacency``, for the first 64
    queries of the alpha-0 train set ``--train``: the batch's relations calibrated (``training_adjacency``
    with the fit's ConfBuffers), the forward pass and loss (``batch_loss``), the backward pass. L has seeded
    random weights (the cost of a trained one). ``--steps`` steps of the same batch; best of them, per phase."""
    import torch

    from benchmarks.answer import random_l
    from pipeline.engine import Adjacency, search_batch
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.src.affine import (
        ConfBuffers,
        query_relations,
        streamed_relations,
        training_adjacency,
    )
    from pipeline.methods.src.delta import zero_alphas
    from pipeline.methods.src.loss import batch_loss
    from pipeline.methods.src.recipe import LConfig

    torch.set_num_threads(threads)
    qset = read_query_set(train)
    dataset = qset.meta["dataset"]
    graph, manifest = load_adjacency(adjacency, dataset=dataset)
    adj = Adjacency.from_graph(graph)
    calib, tables = random_l(graph, seed)
    qs = [zero_alphas(q) for q in qset.queries()[:64]]
    cfg = LConfig()
    with torch.no_grad():
        truth = search_batch(qs, adj)
    buffers = ConfBuffers(adj)  # as fit_affine keeps them across its steps
    runs = []
    with progress(steps, "l-step", "step") as bar:
        for _ in range(steps):
            calib.zero_grad()
            gen = torch.Generator().manual_seed(seed)
            t0 = time.perf_counter()
            index = training_adjacency(
                adj, calib, tables, query_relations(qs), buffers, streamed_relations(qs)
            )
            t1 = time.perf_counter()
            loss = batch_loss(
                search_batch, qs, index, truth, cfg.negatives, gen, cfg.negative_weight, cfg.weights
            )
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            del index
            runs.append([t1 - t0, t2 - t1, t3 - t2, t3 - t0])
            bar.update(1)
    best = min(runs, key=lambda r: r[3])
    rows = [[dataset, manifest["threshold"], graph.nnz, len(qs), *best]]
    measured = {"cn15k_step_s": best[3]} if dataset == "cn15k" else {}
    return Result(
        [
            Table(
                ["data set", "T", "export facts", "batch", "index s", "forward s", "backward s", "total s"],
                rows,
                formats={c: ".2f" for c in ("index s", "forward s", "backward s", "total s")},
            )
        ],
        measured,
        [f"All steps (total s): {', '.join(f'{r[3]:.2f}' for r in runs)}."],
    )


@benchmark(
    "calibration",
    title="Fitting the calibrations",
    goals=[
        Goal("ppi5k_l_s", "PPI5k: fitting L (20 epochs)", "<=", 56.1, "s"),
        Goal("ppi5k_dl_s", "PPI5k: fitting D+L (20 epochs)", "<=", 89.8, "s"),
    ],
    quick={"calibrations": ("D",), "valid_pass": False},
)
def calibration(
    *,
    queries: Path,
    export: Path,
    run: Path,
    calibrations: tuple[str, ...] = ("L", "D+L", "D"),
    l_epochs: int = 20,
    threads: int = 1,
    valid_pass: bool = True,
    out: Path | None = None,
) -> Result:
    """Seconds of ``SRC.from_options`` fitting each calibration as ``pipeline answer`` builds it, each afresh
    (the backbone's ``--run`` copied without its saved fits), over ``--export``, with the train, valid and
    test query sets of the folder ``--queries`` (``*_train_*``, ``*_valid_*``, ``*_test_*``); the test set's
    answers written after each (into ``--out``). ``--valid-pass`` first times one valid selection pass (the
    identity) and one over D's five deltas. Run it with PYTHONPATH at another checkout for "before"."""
    import torch

    torch.set_num_threads(threads)
    from loaders import load
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.base import BuildInputs
    from pipeline.methods.options import MethodOptions
    from pipeline.methods.src.method import SRC
    from pipeline.stages.answer import run_answer, valid_score

    q = Path(queries)
    sets = {s: read_query_set(next(q.glob(f"*_{s}_*.parquet"))) for s in ("train", "valid", "test")}
    dataset = sets["test"].meta["dataset"]
    kg = load(dataset)
    torch.optim.Adam(
        [torch.zeros(1, requires_grad=True)]
    )  # its first construction imports torch._dynamo (~4 s)
    rows, measured = [], {}
    if valid_pass:
        src = SRC.load(export, dataset, device="cpu", kg=kg)
        score = valid_score(sets["valid"])
        score(src)  # warm: the engine's memo and pair work
        t0 = time.perf_counter()
        score(src)
        one = time.perf_counter() - t0
        grid = [src.with_delta(d) for d in (0.0, 0.05, 0.1, 0.15, 0.2)]
        t0 = time.perf_counter()
        score.many(grid)
        rows += [
            ["one valid selection pass", one, None, None],
            ["a valid pass over D's 5 deltas", time.perf_counter() - t0, None, None],
        ]
    answers = Path(out or tempfile.mkdtemp(prefix="bench-calibration-"))
    with progress(len(calibrations), "calibration", "fit") as bar:
        for name in calibrations:
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / "run"
                shutil.copytree(run, copy, ignore=shutil.ignore_patterns("calibration"))
                opts = MethodOptions(
                    method="src",
                    adjacency=export,
                    calibration=name,
                    run=copy,
                    device="cpu",
                    seed=0,
                    l_epochs=l_epochs,
                    kg=kg,
                )
                inputs = BuildInputs(
                    dataset=dataset,
                    valid=sets["valid"],
                    train=sets["train"],
                    score=valid_score(sets["valid"]),
                    progress=False,
                )
                t0 = time.perf_counter()
                method = SRC.from_options(opts, inputs)
                seconds = time.perf_counter() - t0
                rep = run_answer(
                    sets["test"],
                    method,
                    answers / name,
                    {"valid": sets["valid"], "train": sets["train"]},
                    progress=False,
                )
                kept = None
                if method.info.get("l_dir"):
                    ep = json.loads((Path(method.info["l_dir"]) / "L.json").read_text())["history"]["epochs"]
                    kept = max(ep, key=lambda k: (ep[k]["valid"], -int(k)))
            rows.append([f"fit {name}", seconds, rep.get("delta"), kept])
            if dataset == "ppi5k" and name in ("L", "D+L") and l_epochs == 20:
                measured["ppi5k_l_s" if name == "L" else "ppi5k_dl_s"] = seconds
            bar.update(1)
    return Result(
        [Table(["what", "seconds", "delta kept", "L check kept"], rows, formats={"seconds": ".2f"})],
        measured,
        [
            f"{dataset}: {len(sets['train'])} train, {len(sets['valid'])} valid, {len(sets['test'])} test queries; "
            f"{l_epochs} epochs of L; {threads} torch thread(s)."
        ],
    )
