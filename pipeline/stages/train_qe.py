"""Training LogicE+NE / ConE+NE on query sets (resumable, seeded, CUDA when present).

Each step takes a batch of same-plan train queries, scores their ground-truth answers (with utilities)
and ``negatives`` uniformly drawn entities, and applies one of :data:`pipeline.baselines.losses.LOSSES`.
After every ``eval_every`` epochs the model answers the valid query set and the epoch with the best
selection score (mean of the type-averaged tau, rho, MAP and NDCG, as calibration uses) is kept.
Randomness is drawn from generators seeded by (seed, epoch), so a resumed run equals an uninterrupted one.

No host round trip per step: the epoch's generator lives on the training device, so the
batches' rows, the answer subsamples and the negatives are drawn where they are used, and the loss is
summed there and read once per epoch (with a progress bar, at most once per PROGRESS_EVERY_S seconds). The
host reads one list per epoch (the order of the batches and, with in-batch negatives, the size of each
batch's pool of answers). On the CPU the generator is the CPU's and draws exactly what the earlier loop
drew, in the same order (seeded CPU runs are reproduced bit for bit); on CUDA it is CUDA's (Philox): the
same seed gives the same run twice on the device, with other draws than the CPU's (the same distribution).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.baselines import runs
from pipeline.baselines.losses import compute_loss
from pipeline.baselines.models import QueryEmbeddingModel, get_qe_model_class
from pipeline.baselines.plan import Plan, PlanParams, group_by_plan
from pipeline.baselines.settings import QEConfig
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.core.optim import adam
from pipeline.models.runs import read_json, run_metadata, torch_load, torch_save, write_run_json

# Settings added after runs were made, with the value that those runs used: a config leaves them out while
# they hold it, so an older run still resumes and a reproduction's ledger (keyed on the config) still
# matches it instead of training the baseline again.
LATER_SETTINGS: dict[str, Any] = {"batch_negatives": 0}


def config_doc(cfg: QEConfig) -> dict[str, Any]:
    """The run's config as saved in config.json and compared on resume (JSON values; see LATER_SETTINGS)."""
    doc = json.loads(json.dumps(asdict(cfg)))
    return {k: v for k, v in doc.items() if not (k in LATER_SETTINGS and v == LATER_SETTINGS[k])}


@dataclass
class PlanBatchData:
    """Train queries of one plan as tensors: params (n, atoms), answers/util/mask (n, A) padded."""

    params: PlanParams
    answers: torch.Tensor
    util: torch.Tensor
    mask: torch.Tensor

    def take(self, idx: torch.Tensor) -> PlanBatchData:
        p = self.params
        return PlanBatchData(
            PlanParams(p.anchor[idx], p.relation[idx], p.alpha[idx], p.beta[idx]),
            self.answers[idx],
            self.util[idx],
            self.mask[idx],
        )

    def to(self, device: torch.device | str) -> PlanBatchData:
        return PlanBatchData(
            self.params.to(device), self.answers.to(device), self.util.to(device), self.mask.to(device)
        )


# Training targets per query: a ground truth holds the whole tie group at its top-100 cut (the tie-aware truth), up to
# every entity of the graph; padded to that width, 53,000 CN15k train queries took 24 GB.
TRAIN_ANSWERS = 100


def cap_answers(qid: str, answers: list[int], utils: list[float], k: int = TRAIN_ANSWERS) -> tuple[list[int], list[float]]:
    """At most k of a query's answers (best first) as training targets: every answer above the k-th
    utility, then a random choice within the tie group at the cut, seeded by the query id (the same
    targets in every run; never the lowest ids)."""
    if len(answers) <= k:
        return answers, utils
    cut = utils[k - 1]
    above = [i for i, u in enumerate(utils) if u > cut]
    group = [i for i, u in enumerate(utils) if u == cut]
    rng = np.random.default_rng(zlib.crc32(qid.encode()))
    keep = above + sorted(rng.choice(group, size=k - len(above), replace=False).tolist())
    return [answers[i] for i in keep], [utils[i] for i in keep]


def train_tensors(query_sets: list[Any]) -> dict[Plan, PlanBatchData]:
    """Group the queries of train query sets by plan and pad their answers (best first, at most
    TRAIN_ANSWERS: :func:`cap_answers`)."""
    queries, ids, answers, utils = [], [], [], []
    for qs in query_sets:
        queries += qs.queries()
        qids = qs.frame["id"].astype(str).tolist()
        ids += qids
        for qid, a, u in zip(qids, qs.frame["answers_hard"], qs.frame["utilities_hard"], strict=True):
            a, u = cap_answers(qid, [int(x) for x in a], [float(x) for x in u])
            answers.append(a)
            utils.append(u)
    out = {}
    for plan, (pos, params) in group_by_plan(queries, ids).items():
        width = max(1, max(len(answers[i]) for i in pos))
        a = torch.zeros(len(pos), width, dtype=torch.long)
        u = torch.zeros(len(pos), width)
        for row, i in enumerate(pos):
            n = len(answers[i])
            a[row, :n] = torch.tensor(answers[i], dtype=torch.long)
            u[row, :n] = torch.tensor(utils[i], dtype=torch.float32)
        out[plan] = PlanBatchData(params, a, u, u > 0)
    return out


def step_loss(
    model: QueryEmbeddingModel,
    plan: Plan,
    data: PlanBatchData,
    negatives: torch.Tensor,
    loss: str,
    answers: PlanBatchData | None = None,
) -> torch.Tensor:
    """The loss of one batch: data (B queries of plan, answers possibly subsampled), negatives (B, N)
    entity ids; answers: the batch with every answer (default data), so that a negative that is any
    answer of its query is masked, not only one of the answers scored in this step."""
    full = data if answers is None else answers
    n_pos = data.answers.shape[1]
    logits = model.logits(plan, data.params, torch.cat([data.answers, negatives], dim=1))
    # a negative that is one of the query's answers is not a negative
    neg_mask = ~(negatives.unsqueeze(-1) == full.answers.unsqueeze(1)).logical_and(
        full.mask.unsqueeze(1)
    ).any(-1)
    return compute_loss(loss, logits[:, :n_pos], data.util, data.mask, logits[:, n_pos:], neg_mask)


def batch_negatives(
    data: PlanBatchData, k: int, gen: torch.Generator, pool_size: int | None = None
) -> torch.Tensor:
    """k negatives per query (B, k) drawn uniformly from the answers of the whole batch (the in-batch
    negatives of dense retrieval): an entity is drawn in proportion to how many of the batch's queries it
    answers, so the negatives look like answers, which uniform draws over all entities seldom do. Measured
    on PPI5k (docs/baselines.md, fourth round): with 64 of them LogicE+NE's valid MAP rises from 6 to 16 as
    its top-10 lists stop sharing a few hub entities. Draws that answer the query itself are masked by
    :func:`step_loss`.

    pool_size: the number of real answers in the batch (``data.mask.sum()``), when the caller knows it on
    the host (the trainer reads every batch's once per epoch); else it is read here. The j-th draw picks
    the j-th real answer in row-major order (what a boolean selection of the answers picks), through a
    table of the real answers' positions by rank built with one scatter: no boolean selection, whose size
    only the host learns (a synchronisation on an accelerator). On the CPU, 256 queries x 64 draws: 0.20-0.26
    ms against 0.14-0.24 for the selection (a step of the models takes tens of ms); a binary search over the
    running count took 1.6 ms."""
    m = int(data.mask.sum()) if pool_size is None else int(pool_size)
    b, dev = data.answers.shape[0], data.answers.device
    if m == 0:  # no answers in the batch: nothing to draw from but the padding
        pool = data.answers.reshape(-1)
        return pool[_on(torch.randint(0, pool.numel(), (b, k), generator=gen, device=gen.device), dev)]
    draws = _on(torch.randint(0, m, (b, k), generator=gen, device=gen.device), dev)
    real = data.mask.reshape(-1)
    n = real.numel()
    at = torch.arange(n, device=dev)
    # a real answer of rank j goes to slot j, every padding entry to a slot of its own past n: all distinct
    slot = torch.where(real, real.cumsum(0) - 1, at + n)
    by_rank = torch.empty(2 * n, dtype=torch.int64, device=dev).scatter_(0, slot, at)
    return data.answers.reshape(-1)[by_rank[draws.reshape(-1)]].reshape(b, k)


def _on(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """x on ``device``: itself when already there (drawn by a generator on the training device)."""
    return x if x.device == device else x.to(device)


def draw_negatives(
    data: PlanBatchData,
    n_entities: int,
    uniform: int,
    in_batch: int,
    gen: torch.Generator,
    pool_size: int | None = None,
) -> torch.Tensor:
    """A step's negatives per query (B, uniform + in_batch): ``uniform`` entities drawn uniformly, then
    ``in_batch`` :func:`batch_negatives` of the batch's (full) answers (pool_size: as there)."""
    dev = data.answers.device
    neg = _on(torch.randint(0, n_entities, (data.answers.shape[0], uniform), generator=gen, device=gen.device), dev)
    if in_batch:
        neg = torch.cat([neg, batch_negatives(data, in_batch, gen, pool_size)], dim=1)
    return neg


def subsample_answers(data: PlanBatchData, k: int, gen: torch.Generator) -> PlanBatchData:
    """At most k answers per query, drawn uniformly among its real ones (keeps a step's cost bounded while
    every answer is still seen over the epochs); answers stay best first."""
    if data.answers.shape[1] <= k:
        return data
    keys = _on(torch.rand(data.mask.shape, generator=gen, device=gen.device), data.mask.device)
    keys = keys.masked_fill(~data.mask, 2.0)  # padding sorts last
    cols = keys.topk(k, dim=1, largest=False).indices.sort(dim=1).values
    return PlanBatchData(
        data.params, data.answers.gather(1, cols), data.util.gather(1, cols), data.mask.gather(1, cols)
    )


def epoch_batches(
    sizes: dict[Plan, int], batch_size: int, gen: torch.Generator
) -> list[tuple[Plan, torch.Tensor]]:
    """Shuffled (plan, row indices) batches covering every train query once; the rows on the generator's
    device (the order of the batches is read on the host: one list per epoch)."""
    batches = []
    for plan, n in sizes.items():
        perm = torch.randperm(n, generator=gen, device=gen.device)
        batches += [(plan, perm[s : s + batch_size]) for s in range(0, n, batch_size)]
    order = torch.randperm(len(batches), generator=gen, device=gen.device).tolist()
    return [batches[i] for i in order]


# the running loss shown by the progress bar is read (a host synchronisation on an accelerator) at most
# this often; without a bar the loss is read once per epoch
PROGRESS_EVERY_S = 1.0


def epoch_generator(seed: int, epoch: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The generator of one epoch's draws, on the training device (module docstring)."""
    return torch.Generator(device=device).manual_seed(seed * 1_000_003 + epoch)


def train_epoch(
    model: QueryEmbeddingModel,
    opt: torch.optim.Optimizer,
    data: dict[Plan, PlanBatchData],
    cfg: QEConfig,
    n_entities: int,
    epoch: int,
    bar: Any = None,
) -> tuple[torch.Tensor, int]:
    """One epoch over the train queries (``data`` on the model's device): returns the sum of each batch's
    loss times its queries (a 0-d float64 tensor on the device, added in step order: the sum a host float
    made before) and the number of queries seen. ``bar``: a tqdm over the epoch's batches (updated here,
    its running loss read at most once per PROGRESS_EVERY_S seconds); None: nothing is read per step."""
    dev = next(model.parameters()).device
    gen = epoch_generator(cfg.seed, epoch, dev)
    batches = epoch_batches({p: int(d.answers.shape[0]) for p, d in data.items()}, cfg.batch_size, gen)
    pools: list[int | None] = [None] * len(batches)
    if cfg.batch_negatives and batches:  # every batch's count of answers, read at once
        pools = torch.stack([data[p].mask[idx].sum() for p, idx in batches]).tolist()
    total = torch.zeros((), dtype=torch.float64, device=dev)
    seen, shown = 0, time.monotonic()
    model.train()
    for step, ((plan, idx), pool) in enumerate(zip(batches, pools, strict=True)):
        full = data[plan].take(idx)
        batch = subsample_answers(full, cfg.max_answers, gen)
        neg = draw_negatives(full, n_entities, cfg.negatives, cfg.batch_negatives, gen, pool)
        loss = step_loss(model, plan, batch, neg, cfg.loss, answers=full)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n = idx.shape[0]
        total += loss.detach().double() * n
        seen += n
        if bar is not None:
            bar.update(1)
            if step == len(batches) - 1 or time.monotonic() - shown >= PROGRESS_EVERY_S:
                shown = time.monotonic()
                bar.set_postfix(loss=f"{float(total) / seen:.4f}")
    return total, seen


def qe_valid_score(model: QueryEmbeddingModel, valid: Any) -> float:
    """The answering stage's selection score (:func:`pipeline.stages.answer.valid_score`) of the model's
    answers to the valid queries."""
    from pipeline.methods.qe import QueryEmbedding
    from pipeline.stages.answer import valid_score

    return valid_score(valid)(QueryEmbedding(model, {"dataset": valid.meta["dataset"], "model": model.name}, ""))


def _check_config(cfg: QEConfig) -> None:
    get_qe_model_class(cfg.model)  # the settings' ranges: checked when the QEConfig was made


def train_qe(
    cfg: QEConfig,
    out_dir: str | Path,
    device: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
    kg: Any = None,
) -> dict[str, Any]:
    """Train a baseline into out_dir (resuming from its checkpoint when the config matches); returns results.

    kg: the loaded data set whose entity and relation counts size the model (default: the registered
    data set cfg.dataset; a reproduction passes the one it loaded, e.g. a toy graph in tests)."""
    from loaders import get_spec
    from pipeline.core import config as env
    from pipeline.core.progress import output
    from pipeline.formats.queryset import read_query_set

    _check_config(cfg)
    out = Path(out_dir)
    dev = torch.device(env.select_device(device))
    train_sets = [read_query_set(p) for p in cfg.train_queries]
    valid = read_query_set(cfg.valid_queries)
    for qs in [*train_sets, valid]:
        if qs.meta["dataset"] != cfg.dataset:
            raise PipelineError(f"{qs.path}: a query set of '{qs.meta['dataset']}', not '{cfg.dataset}'")
    if cfg.max_valid:
        valid.frame = valid.frame.groupby("type", sort=False).head(cfg.max_valid).reset_index(drop=True)
    spec = kg if kg is not None else get_spec(cfg.dataset)

    torch.manual_seed(cfg.seed)
    model = get_qe_model_class(cfg.model)(spec.n_entities, spec.n_relations, **cfg.model_kwargs()).to(dev)
    opt = adam(model.parameters(), lr=cfg.lr)
    doc = config_doc(cfg)
    history: list[dict[str, Any]] = []
    start, best = 0, {"score": float("-inf"), "epoch": -1}
    ckpt = out / runs.CHECKPOINT_FILE
    if ckpt.exists():
        saved = read_json(out / runs.CONFIG_FILE)
        if {k: v for k, v in saved.items() if k != "epochs"} != {
            k: v for k, v in doc.items() if k != "epochs"
        }:
            raise ArtifactError(f"{out}: holds a run with another configuration; choose another --out")
        state = torch_load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, best, history = int(state["epoch"]) + 1, state["best"], list(state["history"])
        log(f"resuming {out} after epoch {start}")
    write_run_json(out / runs.CONFIG_FILE, doc)
    # the data checksums each query set was sampled from, so a run can be traced to its data
    checksums = {str(qs.path): qs.meta.get("checksums") for qs in [*train_sets, valid]}
    write_run_json(
        out / runs.METADATA_FILE,
        {**run_metadata(checksums, cfg.seed, str(dev)), "model_config": model.config()},
    )

    data = {p: d.to(dev) for p, d in train_tensors(train_sets).items()}
    sizes = {p: int(d.answers.shape[0]) for p, d in data.items()}
    n_train = sum(sizes.values())
    t_start = time.perf_counter()
    for epoch in range(start, cfg.epochs):
        t0 = time.perf_counter()
        # closed on every path (a bar left open is redrawn by the next one)
        shown = output(progress)
        with shown.bar(total=sum(-(-n // cfg.batch_size) for n in sizes.values()),
                       desc=f"{cfg.model} epoch {epoch + 1}/{cfg.epochs}", unit="batch") as bar:
            total, seen = train_epoch(model, opt, data, cfg, spec.n_entities, epoch, bar if shown.bars else None)
        row: dict[str, Any] = {
            "epoch": epoch + 1,
            "loss": float(total) / max(seen, 1),
            "seconds": time.perf_counter() - t0,
        }
        if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs:
            t1 = time.perf_counter()
            row["valid_score"] = qe_valid_score(model, valid)
            row["valid_seconds"] = time.perf_counter() - t1
            if row["valid_score"] > best["score"]:
                best = {"score": row["valid_score"], "epoch": epoch + 1}
                runs.save_qe_model(out / runs.MODEL_FILE, model)
        history.append(row)
        log(" ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        torch_save(
            ckpt,
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "epoch": epoch,
                "best": best,
                "history": history,
            },
        )
        write_run_json(out / runs.RESULTS_FILE, _results(history, best, n_train, sizes))
    if not (out / runs.MODEL_FILE).exists():  # e.g. epochs 0: keep the initial model so the run answers
        runs.save_qe_model(out / runs.MODEL_FILE, model)
    results = _results(history, best, n_train, sizes)
    results["seconds_this_call"] = time.perf_counter() - t_start
    write_run_json(out / runs.RESULTS_FILE, results)
    return results


def _results(
    history: list[dict[str, Any]], best: dict[str, Any], n_train: int, sizes: dict[Plan, int]
) -> dict[str, Any]:
    train_s = sum(h["seconds"] for h in history)
    return {
        "best_epoch": best["epoch"],
        "best_valid_score": best["score"],
        "epochs_run": len(history),
        "train_queries": n_train,
        "plans": len(sizes),
        "train_seconds": train_s,
        "seconds_per_epoch": train_s / max(len(history), 1),
        "valid_seconds": sum(h.get("valid_seconds", 0.0) for h in history),
        "history": history,
    }
