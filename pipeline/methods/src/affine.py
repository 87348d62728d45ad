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
the time of a CN15k batch (docs/studies/calibration-cost.md). Fitting for a method and reusing saved
fits: :mod:`pipeline.methods.src.fitting`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipeline.core import atomic, checksums
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.core.gather import rows
from pipeline.core.kg import GraphTensors
from pipeline.core.optim import adam
from pipeline.core.progress import output
from pipeline.core.provenance import is_sealed, seal
from pipeline.methods.src.delta import zero_alphas
from pipeline.methods.src.loss import batch_loss, identity_pull
from pipeline.methods.src.recipe import LConfig
from pipeline.softquery.model import Const, Query
from pipeline.softquery.types import shape_key

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
        rl = rows(ph, h) + rows(pr, r) + rows(pt, t)
        return torch.clamp(torch.relu(conf * (1.0 + rl[:, 0]) + rl[:, 1]), max=1.0)

    @torch.no_grad()
    def fill(self, out: torch.Tensor, conf: torch.Tensor, h: torch.Tensor, t: torch.Tensor,
             proj: tuple[torch.Tensor, ...], r: int) -> None:
        """out = calibrate(conf, h, r, t) for facts of one relation r, in place (bit for bit: _calibrate_into)."""
        _calibrate_into(out, conf, h, t, proj, r)


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
        fwd, bwd, diag = _calibrated_conf(adj, calib.projections(tables), rels, fill=calib.fill)
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
        self.bounds = _bounds(adj)  # read from the index once per fit, not once per step
        self.starts = _starts(adj)


def training_adjacency(
    adj: Any,
    calib: Any,
    tables: tuple[torch.Tensor, ...],
    relations: Iterable[int] | None = None,
    buffers: ConfBuffers | None = None,
    streamed: Iterable[int] | None = None,
) -> Any:
    """calibrated_adjacency for one training step of L, with autograd on: the facts of ``relations``
    (None: all) calibrated, each read through a gradient source (:func:`pipeline.engine.adjacency.
    take_conf`) that computes its calibrated value with autograd from the projections, so only the facts
    the engine reads (anchor rows, point lookups, the max-plus winners: at most batch x n_entities x atoms)
    enter the graph. The engine reads whole relations only where it streams them (an atom between two
    variables: 2p's second atom, 2il's unanchored one, a cycle's): ``streamed`` names those relations
    (None: every one of ``relations``), whose conf arrays are also filled without autograd; the others are
    never computed in full (a 1p/2i batch calibrates ~batch x row facts, not the export). Values are
    bit-for-bit those of calibrated_adjacency; the gradients of calib's parameters equal its autograd over
    every fact up to float summation order (tests/calibration/test_training_adjacency.py): a fact the
    engine never reads with autograd has a zero gradient there. Autograd over every fact of the batch's
    relations cost ~13 of the ~16 s of a CN15k batch (docs/studies/calibration-cost.md). The index answers
    with autograd on only (under no_grad, the facts it did not fill read their predicted confidence)."""
    rels = None if relations is None else sorted({int(r) for r in relations})
    full = rels if streamed is None else sorted(set(rels if rels is not None else range(adj.n_relations))
                                                & {int(r) for r in streamed})
    proj = calib.projections(tables)  # (n_entities, 2) and (n_relations, 2): cheap, with autograd
    with torch.no_grad():
        fwd, bwd, diag = _calibrated_conf(adj, tuple(p.detach() for p in proj), full, buffers, calib.fill)
    calibrated = torch.full((adj.n_relations,), rels is None, dtype=torch.bool, device=adj.device)
    if rels is not None and rels:
        calibrated[torch.tensor(rels, dtype=torch.int64, device=adj.device)] = True

    def source(raw: torch.Tensor, heads: torch.Tensor, tails: torch.Tensor, starts: torch.Tensor) -> Any:
        def grad(pos: torch.Tensor) -> torch.Tensor:
            rel = torch.searchsorted(starts, pos, right=True) - 1  # relation r holds [starts[r], starts[r+1])
            c = raw.index_select(0, pos)
            h, t = heads.index_select(0, pos).long(), tails.index_select(0, pos).long()
            return torch.where(calibrated[rel], calib.calibrate(c, h, rel, t, proj), c)

        return grad

    starts = buffers.starts if buffers is not None else _starts(adj)
    o_f, o_b = adj.fwd, adj.bwd
    return replace(
        adj,
        fwd=replace(o_f, conf=fwd, grad=source(o_f.conf, o_f.src, o_f.dst, starts[0])),
        bwd=replace(o_b, conf=bwd, grad=source(o_b.conf, o_b.dst, o_b.src, starts[1])),
        diag_conf=diag,
        diag_grad=source(adj.diag_conf, adj.diag_ent, adj.diag_ent, starts[2]),
    )


def _starts(adj: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where each relation's facts start in the rows by head, by tail and the diagonal (n_relations + 1,)."""
    n = adj.n_entities
    return adj.fwd.ptr[::n].contiguous(), adj.bwd.ptr[::n].contiguous(), adj.diag_off


def _bounds(adj: Any) -> tuple[list[int], list[int], list[int]]:
    """_starts as host lists (one device-to-host copy)."""
    return tuple(x.tolist() for x in _starts(adj))  # type: ignore[return-value]


def streamed_relations(queries: Iterable[Query]) -> set[int]:
    """The relations the engine reads in full for these queries: those of atoms between two variables
    (self-loops included). Anchored atoms are read row by row, through take_conf."""
    return {a.relation for q in queries for c in q.conjunctions for a in c.atoms
            if not isinstance(a.head, Const) and not isinstance(a.tail, Const)}


_CALIBRATE_BLOCK = 1 << 18  # facts calibrated at once by _calibrate_into: its temporaries stay in the L2 cache


def _calibrated_conf(
    adj: Any, proj: tuple[torch.Tensor, ...], relations: list[int] | None, buffers: ConfBuffers | None = None,
    fill: Callable[..., None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The calibrated conf arrays of adj (rows by head, rows by tail, diagonal), without autograd: the
    facts of relations (None: all) calibrated, the others copied. fill(out, conf, h, t, proj, r): the
    calibration's own no-grad form, bit-for-bit its calibrate (default: the affine L's _calibrate_into,
    which repeats AffineCalibration.calibrate's operations in the same order). buffers: written there
    (the previous step's other relations restored), else new arrays."""
    fill = fill or _calibrate_into
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
                fill(out[lo:hi], conf[lo:hi], heads[lo:hi], tails[lo:hi], proj, r)
        return out

    fb, bb, db = buffers.bounds if buffers is not None else _bounds(adj)
    got = (
        run(adj.fwd.conf, fb, adj.fwd.src, adj.fwd.dst, outs[0]),
        run(adj.bwd.conf, bb, adj.bwd.dst, adj.bwd.src, outs[1]),
        run(adj.diag_conf, db, adj.diag_ent, adj.diag_ent, outs[2]),
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


def make_calibration(cfg: LConfig, model: Any, tables: tuple[torch.Tensor, ...], threshold: float | None) -> nn.Module:
    """An untrained L (the identity) of the form cfg names: AffineCalibration on the confidences, or
    :class:`~pipeline.methods.src.score_form.ScoreCalibration` on a UKGE backbone's raw score (its
    relation embeddings trained too when cfg.train says so; re-thresholded at ``threshold``)."""
    de, dr = tables[0].shape[1], tables[1].shape[1]
    if cfg.form == "score":
        from pipeline.methods.src.score_form import ScoreCalibration

        if threshold is None:
            raise PipelineError("calibration L on the raw score re-thresholds: the export's threshold is needed")
        return _only_relation_terms(ScoreCalibration(model, de, dr, threshold, cfg.train == "affine+relations"), cfg)
    if cfg.train != "affine":
        raise PipelineError("l_train=affine+relations trains the relation embeddings through the raw score: "
                            "use l_form=score (a UKGE backbone)")
    return _only_relation_terms(AffineCalibration(de, dr), cfg)


def _only_relation_terms(calib: nn.Module, cfg: LConfig) -> nn.Module:
    """With cfg.terms == "relation", the head and tail weights stay 0 (not trained): rho and lambda are
    functions of the relation alone."""
    if cfg.terms == "relation":
        calib.w_head.requires_grad_(False)
        calib.w_tail.requires_grad_(False)
    return calib


# Beyond this, P * (1 + rho) + lambda no longer resolves the confidence P in float32 (24 bits of mantissa):
# L has stopped reading the confidence and answers with a step function of rounding noise, or with NaN where
# rho * P and lambda overflow with opposite signs (a learning rate of 1e30 ended there, its weights near 1e30)
MAX_CORRECTION = float(2**24)


def sane(calib: nn.Module, tables: tuple[torch.Tensor, ...]) -> bool:
    """Whether L still reads the confidences: every parameter finite and every fact's rho and lambda within
    :data:`MAX_CORRECTION` (bounded by the sum of the largest head, relation and tail parts)."""
    if not all(bool(torch.isfinite(p.detach()).all()) for p in calib.parameters()):
        return False
    with torch.no_grad():
        bound = sum(float(part.abs().max()) if part.numel() else 0.0 for part in calib.projections(tables))
    return math.isfinite(bound) and bound <= MAX_CORRECTION


def is_identity(calib: nn.Module) -> bool:
    """Whether L changes nothing: every parameter 0 (how every L starts, and what a kept epoch 0 saves)."""
    return all(not bool(p.detach().any()) for p in calib.parameters())


def _shape_label(query: Query, key: Any) -> str:
    from pipeline.softquery.types import QUERY_TYPES

    return next((qt.name for qt in QUERY_TYPES.values() if qt.matches(query)), str(key))


def fit_affine(
    model: Any,
    adj: Any,
    train_queries: list[Query],
    truth: Any,
    search: SearchFn,
    valid_score: Callable[[Any], float | dict[float, float]] | None = None,
    cfg: LConfig | None = None,
    progress: bool = True,
    threshold: float | None = None,
) -> tuple[nn.Module, dict[str, Any]]:
    """Train L on train_queries (alphas set to 0) against their true utilities on the truth graph.

    adj: the engine's index of the exported neural adjacency (predicted confidences); truth: the target
    graph (the observed train graph, or the valid graph for cfg.targets == "valid"; GraphTensors or
    Adjacency); search: the engine's search_batch. valid_score(adjacency) -> higher is better (or
    {delta: score}, whose max counts), computed at the identity (on adj itself) and at every check (after
    every epoch, or every cfg.check_every steps); the best check is kept (ties: the earlier; check 0 = the
    identity). Shapes the engine cannot differentiate through are left out and named in the history.
    threshold: the export's (the score form re-thresholds there).
    Returns the calibration and the history {epochs: {n: {loss, valid, step[, deltas]}}, shapes_used,
    shapes_skipped, config, best, best_valid}. One host read of the running loss per check: no per-step
    synchronisation with a GPU. cfg: the settings (default: LConfig())."""
    cfg = cfg if cfg is not None else LConfig()
    torch.manual_seed(cfg.seed)
    gen = torch.Generator(device=adj.device).manual_seed(cfg.seed)
    tables = feature_tables(model, adj.device)
    calib = make_calibration(cfg, model, tables, threshold).to(adj.device)
    params = [p for p in calib.parameters() if p.requires_grad]
    lr_now = cfg.lr_at(1)
    opt = adam(params, lr=lr_now, weight_decay=cfg.weight_decay)
    queries = [zero_alphas(q) for q in train_queries]
    groups: dict[Any, list[int]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(shape_key(q), []).append(i)
    # The targets are exact utilities on the target graph. Every shape is checked once for gradients
    # (the engine is differentiable through every step; a shape that is not is named, never silently
    # dropped); batches then mix shapes (the engine batches each shape within a call).
    kept, used, skipped, left = [], [], [], []
    true_u: dict[int, torch.Tensor] = {}
    for key, idx in groups.items():
        label = _shape_label(queries[idx[0]], key)  # the shape's query type, for the record
        if cfg.shapes and label not in cfg.shapes:
            left.append(label)
            continue
        with torch.no_grad():
            for s in range(0, len(idx), 256):
                chunk = idx[s : s + 256]
                for i, u in zip(chunk, search([queries[i] for i in chunk], truth), strict=True):
                    true_u[i] = u
        trial = [queries[i] for i in idx[: cfg.batch_size]]
        try:  # one trial step without updating: does the engine's computation carry gradients here?
            batch_loss(
                search, trial,
                training_adjacency(adj, calib, tables, query_relations(trial), None, streamed_relations(trial)),
                torch.stack([true_u[i] for i in idx[: cfg.batch_size]]), cfg.negatives,
                torch.Generator(device=adj.device).manual_seed(0), cfg.negative_weight, cfg.weights,
            ).backward()
        except RuntimeError:
            skipped.append(label)
            continue
        finally:
            opt.zero_grad()
        used.append(label)
        kept += idx
    if not kept:
        raise PipelineError("calibration L: no training query shape is differentiable through the engine"
                            + (f" among {', '.join(cfg.shapes)}" if cfg.shapes else ""))

    def score(index: Any = None) -> tuple[float, dict[str, float] | None]:
        if valid_score is None:
            return 0.0, None
        with torch.no_grad():
            got = valid_score(index if index is not None else calibrated_adjacency(adj, calib, tables))
        if isinstance(got, dict):
            return max(got.values()), {f"{d:g}": v for d, v in got.items()}
        return float(got), None

    best_score, deltas = score(adj)  # the identity: the export itself, exactly
    best_state = {k: v.detach().clone() for k, v in calib.state_dict().items()}
    best_check = 0
    history: dict[str, Any] = {
        "epochs": {"0": {"loss": None, "valid": best_score, "step": 0, **({"deltas": deltas} if deltas else {})}},
        "shapes_used": used,
        "shapes_skipped": skipped,
        "shapes_left_out": left,
        "config": cfg.record(),
    }
    n_batches = (len(kept) + cfg.batch_size - 1) // cfg.batch_size
    total_steps = cfg.steps or cfg.epochs * n_batches
    every = cfg.check_every or n_batches
    buffers = ConfBuffers(adj)  # each step's index is dead before the next one rewrites them
    bar = output(progress).bar(total=total_steps, desc="calibration L", unit="batch")
    try:  # closed on every path: a bar left open is redrawn by the next one
        order: list[int] = []
        at, epoch = 0, 0
        running = torch.zeros((), dtype=torch.float64, device=adj.device)
        count = 0
        for step in range(1, total_steps + 1):
            if at >= len(order):  # a fresh shuffle each epoch (the first draw of each epoch from gen, as before)
                epoch += 1
                order = [kept[i] for i in torch.randperm(len(kept), generator=gen, device=adj.device).tolist()]
                at = 0
                bar.set_description(f"calibration L epoch {epoch}" + ("" if cfg.steps else f"/{cfg.epochs}"))
            batch = order[at : at + cfg.batch_size]
            at += cfg.batch_size
            lr = cfg.lr_at(step)
            if lr != lr_now:  # the authors' schedule restarts Adam at each new rate, as their loop does
                lr_now = lr
                opt = adam(params, lr=lr, weight_decay=cfg.weight_decay)
            qs = [queries[i] for i in batch]
            loss = batch_loss(
                search, qs,
                training_adjacency(adj, calib, tables, query_relations(qs), buffers, streamed_relations(qs)),
                torch.stack([true_u[i] for i in batch]), cfg.negatives, gen, cfg.negative_weight, cfg.weights,
            )
            if cfg.identity:
                loss = loss + cfg.identity * identity_pull(calib, adj, tables, gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            running += loss.detach().double() * len(batch)  # stays on the device: read once per check
            count += len(batch)
            bar.update(1)
            if step % every and step != total_steps:
                continue
            mean = float(running / max(1, count))
            bar.set_postfix(batch=f"{(at - 1) // cfg.batch_size + 1}/{n_batches}", loss=f"{mean:.4g}", refresh=False)
            if not math.isfinite(mean) or not sane(calib, tables):
                # diverged: such a check is never kept (its utilities would be noise or NaN); the best check
                # before it stands, and the history says where it stopped
                history["diverged"] = {"step": step, "epoch": epoch, "loss": mean}
                output(progress).warn(f"calibration L diverged at step {step} (loss {mean:g}, corrections beyond "
                                      f"{MAX_CORRECTION:g} or not finite): stopped; the best check before it is "
                                      "kept (a lower learning rate, --l-lr, trains further)")
                break
            val, deltas = score()
            check = len(history["epochs"])
            history["epochs"][str(check)] = {"loss": mean, "valid": val, "step": step, "epoch": epoch,
                                             **({"deltas": deltas} if deltas else {})}
            running.zero_()
            count = 0
            # Without a valid set, the last check is kept; with one, the best (ties: the earlier check; a
            # NaN score never wins)
            if valid_score is None or val > best_score:
                best_score, best_check = val, check
                best_state = {k: v.detach().clone() for k, v in calib.state_dict().items()}
    finally:
        bar.close()
    calib.load_state_dict(best_state)
    history["best"] = best_check
    history["best_valid"] = best_score
    return calib, history


# ------------------------------------------------------------------------------------- saved calibrations


FIT_AGAIN = "answer again with calibration L to fit it (`pipeline answer ... --calibration L`)"


def save_affine(calib: nn.Module, path: Path, info: dict[str, Any]) -> None:
    """L.json (key, config, history) then L.pt (the state, whose presence marks the pair complete), each
    written atomically."""
    atomic.write_json(path / "L.json", seal(info))
    state = checksums.seal_object({k: v.detach().cpu() for k, v in calib.state_dict().items()})
    atomic.write_with(path / "L.pt", lambda tmp: torch.save(state, tmp))


def _read_state(f: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign file: torch raises several types
        raise ArtifactError(f"{f}: not a readable calibration ({type(exc).__name__}: {str(exc)[:120]})") from None
    return checksums.verify_object(state, f, FIT_AGAIN)


def load_affine(
    path: Path, entity_dim: int, relation_dim: int, device: str | torch.device = "cpu"
) -> AffineCalibration | None:
    """A saved L of the affine form on the confidences, or None when there is none at path."""
    f = path / "L.pt"
    if not f.exists():
        return None
    calib = AffineCalibration(entity_dim, relation_dim)
    calib.load_state_dict(_read_state(f))
    return calib.to(device)


def saved_config(path: Path) -> LConfig:
    """The LConfig a saved L was trained with (L.json's history; an L saved before the forms existed is
    the affine form on the confidences)."""
    from dataclasses import fields

    from pipeline.formats.meta import read_json

    doc = read_json(path / "L.json", "a saved calibration L")
    if not isinstance(doc, dict) or "digest" not in doc:
        raise checksums.missing(path / "L.json", "the digest of the saved calibration L", FIT_AGAIN)
    if not is_sealed(doc):
        raise ArtifactError(f"{path / 'L.json'}: the saved calibration L was edited after it was written (digest "
                            f"mismatch); {FIT_AGAIN}")
    rec = (doc.get("history") or {}).get("config") or {}
    known = {f.name for f in fields(LConfig)}
    values = {k: tuple(v) if k == "shapes" else v for k, v in rec.items() if k in known}
    return LConfig(**values)


def load_calibration(
    path: Path, model: Any, tables: tuple[torch.Tensor, ...], device: str | torch.device, threshold: float | None
) -> nn.Module | None:
    """A saved L of any form (its L.json names it), on device, or None when there is none at path.
    model, tables: the backbone's run and feature tables (the score form reads the backbone's vectors);
    threshold: the export's (the score form re-thresholds there)."""
    f = path / "L.pt"
    if not f.exists():
        return None
    cfg = saved_config(path)
    calib = make_calibration(cfg, model, tables, threshold)
    try:
        calib.load_state_dict(_read_state(f))
    except RuntimeError as exc:  # a state of another form or size
        raise ArtifactError(f"{f}: not a calibration L of this backbone ({str(exc)[:120]})") from None
    if not sane(calib, tuple(t.to("cpu") for t in tables)):  # never answer with it: noise or NaN utilities
        raise ArtifactError(f"{f}: calibration L with diverged weights (not finite, or corrections beyond "
                            f"{MAX_CORRECTION:g}); {FIT_AGAIN}")
    return calib.to(device)
