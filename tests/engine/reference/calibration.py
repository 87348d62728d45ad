"""Calibration of predicted confidences for SRC (design section 2): D, L and D+L.

- ``D``: every atom's alpha becomes ``max(0, alpha - delta)`` when answering on predicted confidences; delta
  is chosen on the valid query set from a small grid (0 included, so D never does worse there than none).
- ``L``: ``P_c = min(1, relu(P * (1 + rho) + lambda))`` with ``[rho, lambda] = W_h e_h + W_r e_r + W_t e_t + b``
  over the frozen backbone's feature vectors (``model.features``). Trained to minimise the squared error
  between predicted and true utilities of training queries with alpha = 0 (answers plus sampled
  non-answers), the state kept is the best on the valid queries. The engine is differentiable through
  every step (anchors, max-plus elimination, DNF max), so every train shape (2p, 2il included) is used,
  in batches that mix shapes. The cap at 1 keeps ``1 - P_c`` (negation)
  a confidence. Only the stored exceptions of the exported adjacency are calibrated: a fact below the
  export threshold stays absent (confidence 0), exactly as SRC sees it without calibration.
- ``D+L``: L first (trained with alpha = 0, so D does not change it), then delta chosen with L applied.

Because the features are separable (e_h depends on h only, ...), the linear map is applied as per-entity and
per-relation projections ``(n_entities, 2)``, ``(n_relations, 2)``: no (nnz, feature) matrix is ever built.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from pipeline.core.errors import PipelineError
from pipeline.core.kg import GraphTensors
from pipeline.softquery.model import Conjunction, Query

CALIBRATIONS = ("none", "D", "L", "D+L")
DELTA_GRID = (0.0, 0.05, 0.1, 0.15, 0.2)
# Bumped whenever L's training changes what it learns, so saved calibrations of older code are never reused.
L_VERSION = 2

# (queries, graph) -> (B, n_entities) utilities; the engine's evaluate_batch.
Evaluator = Callable[[Sequence[Query], GraphTensors], torch.Tensor]


def method_name(calibration: str) -> str:
    """The table name of a calibration: none -> SRC, D -> SRC(D), ..."""
    check_calibration(calibration)
    return "SRC" if calibration == "none" else f"SRC({calibration})"


def check_calibration(calibration: str) -> None:
    if calibration not in CALIBRATIONS:
        raise PipelineError(f"unknown calibration '{calibration}'; expected one of {', '.join(CALIBRATIONS)}")


# ---------------------------------------------------------------------------------------------------- D


def lower_alphas(query: Query, delta: float) -> Query:
    """The query with every atom's alpha lowered by delta (never below 0)."""
    if delta == 0.0:
        return query
    return Query(
        tuple(
            Conjunction(tuple(replace(a, alpha=max(0.0, float(a.alpha) - delta)) for a in c.atoms))
            for c in query.conjunctions
        )
    )


def zero_alphas(query: Query) -> Query:
    """The query with alpha = 0 on every atom (L trains on these: no atom can fail)."""
    return Query(
        tuple(Conjunction(tuple(replace(a, alpha=0.0) for a in c.atoms)) for c in query.conjunctions)
    )


def choose_delta(
    score: Callable[[float], float], grid: Sequence[float] = DELTA_GRID, progress: bool = False
) -> tuple[float, dict[float, float]]:
    """The delta of the grid with the highest score (the first on ties, so smaller deltas win); also every
    score, for the record."""
    bar = tqdm(grid, desc="calibration D", unit="delta", disable=not progress, dynamic_ncols=True)
    scores = {float(d): float(score(float(d))) for d in bar}
    best = max(scores, key=lambda d: (scores[d], -d))
    return best, scores


# ---------------------------------------------------------------------------------------------------- L


class AffineCalibration(nn.Module):
    """L: ``P_c = min(1, relu(P * (1 + rho) + lambda))``, ``[rho, lambda]`` linear in (e_h, e_r, e_t).

    Initialised to the identity (all weights 0), so an untrained L changes nothing."""

    def __init__(self, entity_dim: int, relation_dim: int) -> None:
        super().__init__()
        self.w_head = nn.Parameter(torch.zeros(entity_dim, 2))
        self.w_rel = nn.Parameter(torch.zeros(relation_dim, 2))
        self.w_tail = nn.Parameter(torch.zeros(entity_dim, 2))
        self.bias = nn.Parameter(torch.zeros(2))

    def projections(
        self, tables: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        """[rho, lambda] parts per head entity (n_entities, 2), per relation (n_relations, 2, bias included)
        and per tail entity (n_entities, 2), from the feature tables of :func:`feature_tables`."""
        eh, er, et = tables
        return eh @ self.w_head, er @ self.w_rel + self.bias, et @ self.w_tail

    @staticmethod
    def calibrate(
        conf: torch.Tensor, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor, proj: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        """Calibrated confidences (nnz,) of facts h, r, t (nnz,) int64 with predicted conf (nnz,) float32."""
        ph, pr, pt = proj
        rl = ph[h] + pr[r] + pt[t]
        return torch.clamp(torch.relu(conf * (1.0 + rl[:, 0]) + rl[:, 1]), max=1.0)


@torch.no_grad()
def feature_tables(
    model: Any, device: str | torch.device = "cpu"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The frozen backbone's features of every entity as head (n_entities, De), of every relation
    (n_relations, Dr) and of every entity as tail (n_entities, De), float32 on device."""
    n, m = model.n_entities, model.n_relations
    dev = model.device
    ents = torch.arange(n, device=dev)
    eh, _, et = model.features(ents, torch.zeros(n, dtype=torch.int64, device=dev), ents)
    rels = torch.arange(m, device=dev)
    _, er, _ = model.features(
        torch.zeros(m, dtype=torch.int64, device=dev), rels, torch.zeros(m, dtype=torch.int64, device=dev)
    )

    # Scale each table to a mean row norm of 1, so that [rho, lambda] = e . w moves by about lr per Adam
    # step whatever the backbone's dimension and scale (one learning rate suits every backbone).
    def norm(x: torch.Tensor) -> torch.Tensor:
        return (x / x.norm(dim=1).mean().clamp_min(1e-8)).float().to(device)

    return norm(eh), norm(er), norm(et)


def calibrated_graph(
    graph: GraphTensors, calib: AffineCalibration, tables: tuple[torch.Tensor, ...]
) -> GraphTensors:
    """The graph with every stored confidence replaced by its calibrated value."""
    proj = calib.projections(tables)
    return replace(graph, conf=calib.calibrate(graph.conf, graph.head, graph.rel, graph.tail, proj))


def calibrated_adjacency(
    adj: Any,
    calib: AffineCalibration,
    tables: tuple[torch.Tensor, ...],
    relations: Iterable[int] | None = None,
) -> Any:
    """The engine's indexed graph (pipeline.engine.Adjacency) with calibrated confidences, differentiable in
    calib: the same index with new conf arrays, so training never re-sorts the export.

    relations: calibrate only the facts of these relations (the others keep their predicted confidence).
    A training batch reads a few relations, so this skips the other facts (most of a CN15k export: 84M
    facts at threshold 0.1); answers over those relations are exactly those of the full calibration."""
    n = adj.n_entities
    proj = calib.projections(tables)
    if relations is None:

        def orient(o: Any, src_is_head: bool) -> Any:
            rel = o.key // (n * n)  # key = (rel * N + src) * N + dst
            h, t = (o.src, o.dst) if src_is_head else (o.dst, o.src)
            return replace(o, conf=calib.calibrate(o.conf, h, rel, t, proj))

        counts = adj.diag_off[1:] - adj.diag_off[:-1]
        diag_rel = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
        diag_conf = calib.calibrate(adj.diag_conf, adj.diag_ent, diag_rel, adj.diag_ent, proj)
        return replace(adj, fwd=orient(adj.fwd, True), bwd=orient(adj.bwd, False), diag_conf=diag_conf)

    rels = sorted({int(r) for r in relations})

    def part(conf: torch.Tensor, bounds: list[tuple[int, int, int]], h_of: Any, t_of: Any) -> torch.Tensor:
        # bounds: (relation, start, end) slices of conf; out-of-place index_put keeps the graph to calib
        # no facts in these slices still yields a tensor tied to calib (zero gradients, as the full path)
        dev = conf.device
        empty = torch.zeros(0, dtype=torch.int64, device=dev)
        pos = torch.cat([empty] + [torch.arange(lo, hi, device=dev) for _, lo, hi in bounds])
        rel = torch.cat(
            [empty] + [torch.full((hi - lo,), r, dtype=torch.int64, device=dev) for r, lo, hi in bounds]
        )
        new = calib.calibrate(conf[pos], h_of(pos), rel, t_of(pos), proj)
        return conf.index_put((pos,), new)

    def orient_subset(o: Any, src_is_head: bool) -> Any:
        bounds = [(r, int(o.ptr[r * n]), int(o.ptr[(r + 1) * n])) for r in rels]
        h_of = (lambda i: o.src[i]) if src_is_head else (lambda i: o.dst[i])
        t_of = (lambda i: o.dst[i]) if src_is_head else (lambda i: o.src[i])
        return replace(o, conf=part(o.conf, bounds, h_of, t_of))

    dbounds = [(r, int(adj.diag_off[r]), int(adj.diag_off[r + 1])) for r in rels]
    diag_conf = part(adj.diag_conf, dbounds, lambda i: adj.diag_ent[i], lambda i: adj.diag_ent[i])
    return replace(
        adj, fwd=orient_subset(adj.fwd, True), bwd=orient_subset(adj.bwd, False), diag_conf=diag_conf
    )


def query_relations(queries: Iterable[Query]) -> set[int]:
    """Every relation id read by the queries' atoms."""
    return {a.relation for q in queries for c in q.conjunctions for a in c.atoms}


@dataclass(frozen=True)
class LConfig:
    """Hyper-parameters of training L (all part of its cache key)."""

    epochs: int = 20
    lr: float = 0.001
    batch_size: int = 64
    negatives: int = 32  # uniformly sampled entities per query besides its answers
    negative_weight: float = 1.0  # weight of the sampled non-answers' mean error (answers' weigh 1)
    weight_decay: float = 0.0
    seed: int = 0


def _loss_entities(true_u: torch.Tensor, negatives: int, gen: torch.Generator) -> torch.Tensor:
    """(B, n_entities) bool mask: the answers (finite u > 0) plus `negatives` uniformly sampled entities.

    Uniform, not the best-predicted non-answers: a high prediction that is not a train answer is often a
    true fact of valid/test that the backbone generalised to, and L must not learn to erase those."""
    answers = torch.isfinite(true_u) & (true_u > 0)
    mask = answers.clone()
    uniform = torch.randint(0, true_u.shape[1], (true_u.shape[0], negatives), generator=gen)
    mask.scatter_(1, uniform.to(mask.device), True)
    return mask


def _batch_loss(
    evaluate: Evaluator,
    queries: list[Query],
    adj: Any,
    true_u: torch.Tensor,
    negatives: int,
    gen: torch.Generator,
    negative_weight: float = 1.0,
) -> torch.Tensor:
    pred_u = evaluate(queries, adj)
    mask = _loss_entities(true_u, negatives, gen)
    answers = torch.isfinite(true_u) & (true_u > 0)
    # alpha = 0: no atom fails, so both utilities are finite on every entity of the mask. Answers and
    # sampled non-answers weigh the same in total: non-answers outnumber answers and would otherwise
    # teach L to push every confidence to 0.
    err = (pred_u - true_u).pow(2)
    pos, neg = mask & answers, mask & ~answers
    parts = [(err[m].mean(), w) for m, w in ((pos, 1.0), (neg, negative_weight)) if m.any() and w > 0]
    if not parts:
        return (pred_u * 0).nan_to_num().sum()  # nothing to fit in this batch: a zero loss with a graph
    return sum(e * w for e, w in parts) / sum(w for _, w in parts)


def fit_affine(
    model: Any,
    adj: Any,
    train_queries: list[Query],
    truth: Any,
    evaluate: Evaluator,
    valid_score: Callable[[Any], float] | None = None,
    cfg: LConfig = LConfig(),
    progress: bool = True,
) -> tuple[AffineCalibration, dict[str, Any]]:
    """Train L on train_queries (alphas set to 0) against their true utilities on the truth graph.

    adj: the engine's index of the exported neural adjacency (predicted confidences); truth: the observed
    train graph (GraphTensors or Adjacency); evaluate: the engine's evaluate_batch. valid_score(adjacency)
    -> higher is better, computed after every epoch; the best epoch (epoch 0 = identity) is kept.
    Shapes the engine cannot differentiate through are left out and named in the history.
    Returns the calibration and the history {epochs: {n: {loss, valid}}, shapes_used, shapes_skipped}."""
    from pipeline.softquery.types import QUERY_TYPES, shape_key

    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    tables = feature_tables(model, adj.device)
    calib = AffineCalibration(tables[0].shape[1], tables[1].shape[1]).to(adj.device)
    opt = torch.optim.Adam(calib.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    queries = [zero_alphas(q) for q in train_queries]
    groups: dict[Any, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(shape_key(q), []).append(i)
    # The targets are exact utilities on the observed train graph. Every shape is checked once for
    # gradients (the engine is differentiable through every step; a shape that is not is named, never
    # silently dropped); batches then mix shapes (the engine batches each shape within a call).
    kept, used, skipped = [], [], []
    true_u: dict[int, torch.Tensor] = {}
    for key, idx in groups.items():
        # Name the shape by its query type where it has one (for the record).
        label = next((qt.name for qt in QUERY_TYPES.values() if qt.matches(queries[idx[0]])), str(key))
        with torch.no_grad():
            for s in range(0, len(idx), 256):
                chunk = idx[s : s + 256]
                for i, u in zip(chunk, evaluate([queries[i] for i in chunk], truth), strict=True):
                    true_u[i] = u
        trial = idx[: cfg.batch_size]
        try:  # one trial step without updating: does the engine's computation carry gradients here?
            _batch_loss(
                evaluate,
                [queries[i] for i in trial],
                calibrated_adjacency(adj, calib, tables, query_relations(queries[i] for i in trial)),
                torch.stack([true_u[i] for i in trial]),
                cfg.negatives,
                torch.Generator().manual_seed(0),
            ).backward()
        except RuntimeError:
            skipped.append(label)
            continue
        finally:
            opt.zero_grad()
        used.append(label)
        kept += idx
    if not kept:
        raise PipelineError("calibration L: no training query shape is differentiable through the engine")

    def score() -> float:
        if valid_score is None:
            return 0.0
        with torch.no_grad():
            return float(valid_score(calibrated_adjacency(adj, calib, tables)))

    best_score = score()
    best_state = {k: v.detach().clone() for k, v in calib.state_dict().items()}
    history: dict[str, Any] = {
        "epochs": {"0": {"loss": None, "valid": best_score}},
        "shapes_used": used,
        "shapes_skipped": skipped,
        "config": cfg.__dict__,
    }
    n_batches = (len(kept) + cfg.batch_size - 1) // cfg.batch_size
    bar = tqdm(
        total=cfg.epochs * n_batches,
        desc="calibration L",
        unit="batch",
        disable=not progress,
        dynamic_ncols=True,
    )
    for epoch in range(1, cfg.epochs + 1):
        total, count = 0.0, 0
        order = [kept[i] for i in torch.randperm(len(kept), generator=gen).tolist()]
        for lo in range(0, len(order), cfg.batch_size):
            batch = order[lo : lo + cfg.batch_size]
            loss = _batch_loss(
                evaluate,
                [queries[i] for i in batch],
                calibrated_adjacency(adj, calib, tables, query_relations(queries[i] for i in batch)),
                torch.stack([true_u[i] for i in batch]),
                cfg.negatives,
                gen,
                cfg.negative_weight,
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(batch)
            count += len(batch)
            bar.update(1)
        val = score()
        history["epochs"][str(epoch)] = {"loss": total / max(1, count), "valid": val}
        # Without a valid set, the last epoch is kept; with one, the best (ties: the earlier epoch).
        if valid_score is None or val > best_score:
            best_score = val
            best_state = {k: v.detach().clone() for k, v in calib.state_dict().items()}
    bar.close()
    calib.load_state_dict(best_state)
    history["best_valid"] = best_score
    return calib, history


# ------------------------------------------------------------------------------------- saved calibrations


def cache_key(parts: dict[str, Any]) -> str:
    """A content key for a fitted calibration (model hash, export threshold, query set checksums, config)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def save_affine(calib: AffineCalibration, path: Path, info: dict[str, Any]) -> None:
    """calibration.pt (state) and calibration.json (key, config, history) side by side; atomic."""
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / "L.pt.part"
    torch.save({k: v.detach().cpu() for k, v in calib.state_dict().items()}, tmp)
    tmp.replace(path / "L.pt")
    (path / "L.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str) + "\n")


def load_affine(
    path: Path, entity_dim: int, relation_dim: int, device: str | torch.device = "cpu"
) -> AffineCalibration | None:
    """A saved L, or None when there is none at path."""
    f = path / "L.pt"
    if not f.exists():
        return None
    calib = AffineCalibration(entity_dim, relation_dim)
    calib.load_state_dict(torch.load(f, map_location="cpu", weights_only=True))
    return calib.to(device)


def queryset_checksum(frame: Any) -> str:
    """A checksum of a query set's ids and texts (the calibration cache depends on the queries, not the file name)."""
    h = hashlib.sha256()
    for qid, text in zip(frame["id"], frame["text"], strict=True):
        h.update(f"{qid}\t{text}\n".encode())
    return h.hexdigest()[:16]
