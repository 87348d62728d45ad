"""Calibration L (design section 2): ``P_c = min(1, relu(P * (1 + rho) + lambda))`` with
``[rho, lambda] = W_h e_h + W_r e_r + W_t e_t + b`` over the frozen backbone's feature vectors
(``model.features``). Trained to minimise the squared error between predicted and true utilities of
training queries with alpha = 0 (answers plus sampled non-answers); the state kept is the best on the valid
queries. The engine is differentiable through every step (anchors, max-plus elimination, DNF max), so every
train shape (2p, 2il included) is used, in batches that mix shapes. The cap at 1 keeps ``1 - P_c``
(negation) a confidence. Only the stored exceptions of the exported adjacency are calibrated: a fact below
the export threshold stays absent (confidence 0), exactly as SRC sees it without calibration.

Because the features are separable (e_h depends on h only, ...), the linear map is applied as per-entity and
per-relation projections ``(n_entities, 2)``, ``(n_relations, 2)``: no (nnz, feature) matrix is ever built.
A training step calibrates the batch's relations without autograd (:func:`training_adjacency`) and recomputes
with autograd only the facts the engine reads with it (anchor rows, the max-plus winners): the values are
those of autograd over every fact bit for bit, the gradients equal to 1e-6 (summation order), at ~1/4 of
the time of a CN15k batch (docs/benchmarks.md, issue 14, third round). Fitting for a method and reusing saved
fits: :mod:`pipeline.methods.src.fitting`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.core import atomic, checksums
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.core.kg import GraphTensors
from pipeline.core.progress import output
from pipeline.core.provenance import seal
from pipeline.methods.src.delta import zero_alphas
from pipeline.softquery.model import Query

# (queries, graph) -> (B, n_entities) utilities: the engine's search_batch
SearchFn = Callable[[Sequence[Query], GraphTensors], torch.Tensor]


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
    calib when autograd is on: the same index with new conf arrays, so training never re-sorts the export.
    Without autograd (answering, valid scores) the values are computed by :func:`_calibrated_conf`,
    bit-for-bit the same; training uses :func:`training_adjacency` (same values, gradients of the read
    facts only).

    relations: calibrate only the facts of these relations (the others keep their predicted confidence).
    A training batch reads a few relations, so this skips the other facts (most of a CN15k export: 84M
    facts at threshold 0.1); answers over those relations are exactly those of the full calibration."""
    if not torch.is_grad_enabled():
        rels = None if relations is None else sorted({int(r) for r in relations})
        fwd, bwd, diag = _calibrated_conf(adj, calib.projections(tables), rels)
        return replace(adj, fwd=replace(adj.fwd, conf=fwd), bwd=replace(adj.bwd, conf=bwd), diag_conf=diag)
    n = adj.n_entities
    proj = calib.projections(tables)
    if relations is None:

        def orient(o: Any, src_is_head: bool) -> Any:
            from pipeline.engine.adjacency import fact_relations

            rel = fact_relations(o.ptr, n)
            h, t = (o.src, o.dst) if src_is_head else (o.dst, o.src)
            return replace(o, conf=calib.calibrate(o.conf, h, rel, t, proj))

        counts = adj.diag_off[1:] - adj.diag_off[:-1]
        diag_rel = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
        diag_conf = calib.calibrate(adj.diag_conf, adj.diag_ent, diag_rel, adj.diag_ent, proj)
        return replace(adj, fwd=orient(adj.fwd, True), bwd=orient(adj.bwd, False), diag_conf=diag_conf)

    rels = sorted({int(r) for r in relations})

    def part(conf: torch.Tensor, bounds: list[tuple[int, int, int]], h_of: Any, t_of: Any) -> torch.Tensor:
        # bounds: (relation, start, end) slices of conf, ascending. The slices are read as views (no
        # position arrays to build and gather through, which cost as much as the calibration itself on an
        # export) and the new conf is one concatenation of calibrated and untouched slices, out of place so
        # the graph keeps to calib; no facts in these slices still yields a tensor tied to calib (zero
        # gradients, as the full path). Values are those of calibrating each fact alone: bit-for-bit.
        dev = conf.device
        pieces, at = [], 0
        for r, lo, hi in bounds:
            if hi == lo:
                continue
            pieces.append(conf[at:lo])
            rel = torch.full((hi - lo,), r, dtype=torch.int64, device=dev)
            pieces.append(calib.calibrate(conf[lo:hi], h_of(lo, hi), rel, t_of(lo, hi), proj))
            at = hi
        if not pieces:
            return conf + 0.0 * proj[1].sum()
        pieces.append(conf[at:])
        return torch.cat(pieces)

    def orient_subset(o: Any, src_is_head: bool) -> Any:
        bounds = [(r, int(o.ptr[r * n]), int(o.ptr[(r + 1) * n])) for r in rels]
        h_of = (lambda lo, hi: o.src[lo:hi]) if src_is_head else (lambda lo, hi: o.dst[lo:hi])
        t_of = (lambda lo, hi: o.dst[lo:hi]) if src_is_head else (lambda lo, hi: o.src[lo:hi])
        return replace(o, conf=part(o.conf, bounds, h_of, t_of))

    dbounds = [(r, int(adj.diag_off[r]), int(adj.diag_off[r + 1])) for r in rels]
    diag_conf = part(
        adj.diag_conf, dbounds, lambda lo, hi: adj.diag_ent[lo:hi], lambda lo, hi: adj.diag_ent[lo:hi]
    )
    return replace(
        adj, fwd=orient_subset(adj.fwd, True), bwd=orient_subset(adj.bwd, False), diag_conf=diag_conf
    )


class ConfBuffers:
    """The conf arrays of training_adjacency kept across the steps of one fit: a step rewrites the facts of
    its relations and restores those of the previous step's others to their predicted confidence, instead of
    allocating and copying two export-sized arrays (0.46 s of a ~1.7 s CN15k step, mostly page faults).
    The index of a step is valid until the next step that uses the same buffers."""

    def __init__(self, adj: Any) -> None:
        self.arrays = (adj.fwd.conf.detach().clone(), adj.bwd.conf.detach().clone(), adj.diag_conf.detach().clone())
        self.dirty: set[int] = set()  # relations whose facts hold calibrated values now


def training_adjacency(
    adj: Any,
    calib: AffineCalibration,
    tables: tuple[torch.Tensor, ...],
    relations: Iterable[int] | None = None,
    buffers: ConfBuffers | None = None,
) -> Any:
    """calibrated_adjacency for one training step of L: the same confidences, computed without autograd,
    each array carrying a gradient source that recomputes the calibrated value of the facts the engine
    reads with autograd (its anchor rows, point lookups and the max-plus winners: at most batch x
    n_entities x atoms facts) from the projections, which are differentiable in calib. Forward values are
    bit-for-bit those of calibrated_adjacency; the gradients of calib's parameters equal its autograd
    over every fact up to float summation order (tests/calibration/test_training_adjacency.py): a fact the
    engine never reads with autograd has a zero gradient there. Autograd over every fact of the batch's
    relations cost ~13 of the ~16 s of a CN15k batch (docs/benchmarks.md, issue 14)."""
    rels = None if relations is None else sorted({int(r) for r in relations})
    proj = calib.projections(tables)  # (n_entities, 2) and (n_relations, 2): cheap, with autograd
    with torch.no_grad():
        fwd, bwd, diag = _calibrated_conf(adj, tuple(p.detach() for p in proj), rels, buffers)
    calibrated = torch.full((adj.n_relations,), rels is None, dtype=torch.bool, device=adj.device)
    if rels is not None:
        calibrated[torch.tensor(rels, dtype=torch.int64, device=adj.device)] = True

    def source(raw: torch.Tensor, heads: torch.Tensor, tails: torch.Tensor, starts: torch.Tensor) -> Any:
        def grad(pos: torch.Tensor) -> torch.Tensor:
            rel = torch.searchsorted(starts, pos, right=True) - 1  # relation r holds [starts[r], starts[r+1])
            c = raw.index_select(0, pos)
            h, t = heads.index_select(0, pos).long(), tails.index_select(0, pos).long()
            return torch.where(calibrated[rel], calib.calibrate(c, h, rel, t, proj), c)

        return grad

    n = adj.n_entities
    o_f, o_b = adj.fwd, adj.bwd
    return replace(
        adj,
        fwd=replace(o_f, conf=fwd, grad=source(o_f.conf, o_f.src, o_f.dst, o_f.ptr[::n].contiguous())),
        bwd=replace(o_b, conf=bwd, grad=source(o_b.conf, o_b.dst, o_b.src, o_b.ptr[::n].contiguous())),
        diag_conf=diag,
        diag_grad=source(adj.diag_conf, adj.diag_ent, adj.diag_ent, adj.diag_off),
    )


_CALIBRATE_BLOCK = 1 << 18  # facts calibrated at once by _calibrate_into: its temporaries stay in the L2 cache


def _calibrated_conf(
    adj: Any, proj: tuple[torch.Tensor, ...], relations: list[int] | None, buffers: ConfBuffers | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The calibrated conf arrays of adj (rows by head, rows by tail, diagonal), without autograd: the
    facts of relations (None: all) calibrated, the others copied. Bit-for-bit AffineCalibration.calibrate,
    whose operations are repeated in the same order (see _calibrate_into). buffers: written there (the
    previous step's other relations restored), else new arrays."""
    n = adj.n_entities
    rels = list(range(adj.n_relations)) if relations is None else relations
    restore = [] if buffers is None else sorted(buffers.dirty - set(rels))
    outs = (None, None, None) if buffers is None else buffers.arrays

    def run(
        conf: torch.Tensor, bounds: list[int], heads: torch.Tensor, tails: torch.Tensor, out: torch.Tensor | None
    ) -> torch.Tensor:
        if out is None:
            out = conf.clone()
        for r in restore:
            out[bounds[r] : bounds[r + 1]] = conf[bounds[r] : bounds[r + 1]]
        for r in rels:
            lo, hi = bounds[r], bounds[r + 1]
            if hi > lo:
                _calibrate_into(out[lo:hi], conf[lo:hi], heads[lo:hi], tails[lo:hi], proj, r)
        return out

    fb, bb = adj.fwd.ptr[::n].tolist(), adj.bwd.ptr[::n].tolist()
    got = (
        run(adj.fwd.conf, fb, adj.fwd.src, adj.fwd.dst, outs[0]),
        run(adj.bwd.conf, bb, adj.bwd.dst, adj.bwd.src, outs[1]),
        run(adj.diag_conf, adj.diag_off.tolist(), adj.diag_ent, adj.diag_ent, outs[2]),
    )
    if buffers is not None:
        buffers.dirty = set(rels)
    return got


def _calibrate_into(
    out: torch.Tensor,
    conf: torch.Tensor,
    h: torch.Tensor,
    t: torch.Tensor,
    proj: tuple[torch.Tensor, ...],
    r: int,
) -> None:
    """out = calibrate(conf, h, r, t) for facts of one relation r, in place and in blocks. The relation's
    row is added to the head table first: (ph + pr[r])[h] is the same float sum as ph[h] + pr[r], so every
    value equals calibrate's, whose (nnz, 2) temporaries and index arrays cost ~3x more on an export."""
    ph, pr, pt = proj
    head = ph + pr[r]
    rho_h, lam_h = head[:, 0].contiguous(), head[:, 1].contiguous()
    rho_t, lam_t = pt[:, 0].contiguous(), pt[:, 1].contiguous()
    tmp = torch.empty(min(_CALIBRATE_BLOCK, conf.numel()), dtype=out.dtype, device=out.device)
    for lo in range(0, conf.numel(), _CALIBRATE_BLOCK):
        hi = min(lo + _CALIBRATE_BLOCK, conf.numel())
        x, y = out[lo:hi], tmp[: hi - lo]
        hb, tb = h[lo:hi], t[lo:hi]
        torch.index_select(rho_h, 0, hb, out=x)
        x.add_(rho_t.index_select(0, tb))  # rho = (ph[h] + pr[r]) + pt[t]
        x.add_(1.0).mul_(conf[lo:hi])  # conf * (1 + rho): additions and products commute bit for bit
        torch.index_select(lam_h, 0, hb, out=y)
        x.add_(y.add_(lam_t.index_select(0, tb))).relu_().clamp_(max=1.0)


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
    search: SearchFn,
    queries: list[Query],
    adj: Any,
    true_u: torch.Tensor,
    negatives: int,
    gen: torch.Generator,
    negative_weight: float = 1.0,
) -> torch.Tensor:
    pred_u = search(queries, adj)
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
    search: SearchFn,
    valid_score: Callable[[Any], float] | None = None,
    cfg: LConfig = LConfig(),
    progress: bool = True,
) -> tuple[AffineCalibration, dict[str, Any]]:
    """Train L on train_queries (alphas set to 0) against their true utilities on the truth graph.

    adj: the engine's index of the exported neural adjacency (predicted confidences); truth: the observed
    train graph (GraphTensors or Adjacency); search: the engine's search_batch. valid_score(adjacency)
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
                for i, u in zip(chunk, search([queries[i] for i in chunk], truth), strict=True):
                    true_u[i] = u
        trial = idx[: cfg.batch_size]
        try:  # one trial step without updating: does the engine's computation carry gradients here?
            _batch_loss(
                search,
                [queries[i] for i in trial],
                training_adjacency(adj, calib, tables, query_relations(queries[i] for i in trial)),
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
    buffers = ConfBuffers(adj)  # each step's index is dead before the next one rewrites them
    bar = output(progress).bar(total=cfg.epochs * n_batches, desc="calibration L", unit="batch")
    try:  # closed on every path: a bar left open is redrawn by the next one
        for epoch in range(1, cfg.epochs + 1):
            total, count = 0.0, 0
            order = [kept[i] for i in torch.randperm(len(kept), generator=gen).tolist()]
            bar.set_description(f"calibration L epoch {epoch}/{cfg.epochs}")
            for lo in range(0, len(order), cfg.batch_size):
                batch = order[lo : lo + cfg.batch_size]
                loss = _batch_loss(
                    search,
                    [queries[i] for i in batch],
                    training_adjacency(adj, calib, tables, query_relations(queries[i] for i in batch), buffers),
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
                bar.set_postfix(
                    batch=f"{lo // cfg.batch_size + 1}/{n_batches}", loss=f"{loss.item():.4g}", refresh=False
                )
                bar.update(1)
            val = score()
            history["epochs"][str(epoch)] = {"loss": total / max(1, count), "valid": val}
            # Without a valid set, the last epoch is kept; with one, the best (ties: the earlier epoch).
            if valid_score is None or val > best_score:
                best_score = val
                best_state = {k: v.detach().clone() for k, v in calib.state_dict().items()}
    finally:
        bar.close()
    calib.load_state_dict(best_state)
    history["best_valid"] = best_score
    return calib, history


# ------------------------------------------------------------------------------------- saved calibrations


def save_affine(calib: AffineCalibration, path: Path, info: dict[str, Any]) -> None:
    """L.json (key, config, history) then L.pt (the state, whose presence marks the pair complete), each
    written atomically."""
    atomic.write_json(path / "L.json", seal(info))
    state = checksums.seal_object({k: v.detach().cpu() for k, v in calib.state_dict().items()})
    atomic.write_with(path / "L.pt", lambda tmp: torch.save(state, tmp))


def load_affine(
    path: Path, entity_dim: int, relation_dim: int, device: str | torch.device = "cpu"
) -> AffineCalibration | None:
    """A saved L, or None when there is none at path."""
    f = path / "L.pt"
    if not f.exists():
        return None
    calib = AffineCalibration(entity_dim, relation_dim)
    try:
        state = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign file: torch raises several types
        raise ArtifactError(f"{f}: not a readable calibration ({type(exc).__name__}: {str(exc)[:120]})") from None
    calib.load_state_dict(checksums.verify_object(state, f))
    return calib.to(device)
