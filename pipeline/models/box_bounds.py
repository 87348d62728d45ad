"""Exact pruned scoring of box models (BEUrRE) for the neural-adjacency export.

Brute force scores all |E|^2 pairs of every relation with d-dimensional box arithmetic (CN15k: ~5e11
element operations). Almost all pairs of a trained box model are far apart, so this module bounds the best
confidence of a whole block of heads against a whole block of tails, skips every block pair whose bound is
below the threshold, and scores the rest exactly with the model's own `_prob` (so the kept facts are the
brute-force ones).

**The bound.** With s(x) = log(max(softplus(x - 2 gamma beta), tiny)) (a nondecreasing function: softplus,
log and max are), BEUrRE's confidence is

    log P(h, t) = sum_k [ s(cap_k(h, t)) - s(w_k(c)) ],     c = h (condition "head") or t ("tail"),

where cap_k = hi_cap_k - lo_cap_k is the Gumbel intersection's side (`gumbel_intersection`):
lo_cap = max(beta * logaddexp(lo_h / beta, lo_t / beta), lo_h, lo_t) is nondecreasing in lo_h and lo_t
(logaddexp and max are nondecreasing in each argument), and hi_cap likewise nondecreasing in hi_h and hi_t,
so cap_k is nonincreasing in both lower corners and nondecreasing in both upper corners: **the soft
intersection's side, hence its volume prod_k softplus(cap_k - 2 gamma beta), does not decrease when either
box grows.** For a block of heads H and a block of tails T let LO = min and HI = max of the corners over
each block (their enclosing boxes), A_k = cap_k(LO_H, HI_H, LO_T, HI_T) and W_k = the smallest side k of the
condition boxes in their block. Then for every h in H, t in T and every dimension k:

  1. cap_k(h, t) <= A_k (monotonicity above) and w_k(c) >= W_k, so s(cap_k) - s(w_k(c)) <= s(A_k) - s(W_k);
  2. cap_k(h, t) <= w_k(c) (the hard-clamped intersection lies inside both boxes), so the term is <= 0.

Hence log P(h, t) <= B(H, T) = sum_k min(0, s(A_k) - s(W_k)), and a block pair with B < log(threshold)
holds no fact to export. Enlarging H or T only lowers each LO, raises each HI and lowers each W, so B is
itself monotone: tight blocks (entities ordered by a k-d split of their box centres, `kd_order`) prune
most. **Per pair, dimension by dimension.** For a single pair (a block of one head and one tail) the terms
t_k = s(cap_k(h, t)) - s(w_k(c)) are each <= 0 (point 2), so any partial sum over a subset S of the
dimensions bounds log P from above, and so does sum_{k in S} s(hard_k) - s(w_k) with hard_k = min(hi_h,
hi_t) - max(lo_h, lo_t) the hard intersection's side (cap_k <= hard_k: the model clamps the Gumbel
intersection inside the hard one; s is nondecreasing), which costs no logaddexp: stage 3 adds these terms a
few dimensions at a time, in the order that drops pairs
soonest (the most negative mean term on a sample of the relation's pairs first; the order only changes the
speed), and drops a pair once its partial sum is below the cut. Only the survivors are scored in full, by
the model's own `_prob`, so the kept facts and their scores are still the brute-force ones. Where a sample
of the relation's pairs says the partial sums would cut too little to pay for themselves (`worthwhile`: a
low threshold), stage 3 scores every surviving row in full instead.
Floating point: each operation above is monotone up to an ulp (vectorised exp/log), and the model
sums its two log volumes separately; a block is pruned only when B < log(threshold) - margin with a margin
far above those rounding errors (`MARGIN_ABS` + `MARGIN_REL` * sum |terms|), so pruning never drops a fact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from pipeline.models.beurre import EULER_GAMMA, BEUrRE, gumbel_intersection

MARGIN_ABS = 1e-3
MARGIN_REL = 1e-5
LEAF = 32


def supports(model: Any) -> bool:
    """Whether the model's scores have the box structure this module bounds."""
    return isinstance(model, BEUrRE)


def log_sides(width: Tensor, beta: float, temperature: float = 1.0) -> Tensor:
    """s(width) per dimension, the summands of `beurre.log_volume` (same operations, same dtype)."""
    tiny = torch.finfo(width.dtype).tiny
    side = F.softplus(width - 2 * EULER_GAMMA * beta, beta=1.0 / temperature).clamp_min(tiny)
    return torch.log(side)


def kd_order(points: np.ndarray, leaf: int = LEAF) -> np.ndarray:
    """A permutation of the rows of points (n, d) such that every run of `leaf` consecutive rows is a cell of
    a k-d tree (median split on the widest coordinate, recursively), so blocks of the order are compact.
    Deterministic (stable sorts, no randomness)."""
    n = len(points)
    order = np.arange(n)
    stack = [(0, n)]
    while stack:
        a, b = stack.pop()
        if b - a <= leaf:
            continue
        seg = points[order[a:b]]
        k = int(np.argmax(seg.max(0) - seg.min(0)))
        order[a:b] = order[a:b][np.argsort(seg[:, k], kind="stable")]
        # split on a multiple of the leaf size, so only the last block of the whole order is short
        mid = a + max(1, ((b - a) // 2 + leaf - 1) // leaf) * leaf
        if mid >= b:
            continue
        stack += [(a, mid), (mid, b)]
    return order


@dataclass(frozen=True)
class Blocks:
    """Entities in k-d order cut into blocks of `leaf`: order (n,) int64; lo, hi (n_blocks, d) the enclosing
    box of each block; w_min (n_blocks, d) the smallest side per dimension (used only on the condition
    side)."""

    order: Tensor
    starts: Tensor
    lo: Tensor
    hi: Tensor
    w_min: Tensor

    def members(self, i: int) -> Tensor:
        return self.order[int(self.starts[i]) : int(self.starts[i + 1])]


def make_blocks(lo: Tensor, width: Tensor, order: Tensor, leaf: int = LEAF) -> Blocks:
    """Blocks of the (already transformed) boxes lo, width (n, d) taken in `order`."""
    n = len(order)
    starts = torch.arange(0, n + leaf, leaf, device=lo.device).clamp_max(n).unique_consecutive()
    lo_o, hi_o, w_o = lo[order], (lo + width)[order], width[order]
    segs = starts[1:] - starts[:-1]
    idx = torch.repeat_interleave(torch.arange(len(segs), device=lo.device), segs)
    d = lo.shape[1]
    shape = (len(segs), d)
    blo = torch.full(shape, float("inf"), dtype=lo.dtype, device=lo.device)
    bhi = torch.full(shape, float("-inf"), dtype=lo.dtype, device=lo.device)
    bw = torch.full(shape, float("inf"), dtype=lo.dtype, device=lo.device)
    ix = idx[:, None].expand(-1, d)
    blo.scatter_reduce_(0, ix, lo_o, "amin")
    bhi.scatter_reduce_(0, ix, hi_o, "amax")
    bw.scatter_reduce_(0, ix, w_o, "amin")
    return Blocks(order, starts, blo, bhi, bw)


def block_log_bound(
    heads: Blocks, tails: Blocks, beta: float, condition: str = "head", chunk: int = 64
) -> tuple[Tensor, Tensor]:
    """Upper bound B (n_head_blocks, n_tail_blocks) on log P over each block pair (module docstring), and
    the rounding margin of each bound (same shape)."""
    w_cond = heads.w_min if condition == "head" else tails.w_min
    bounds, margins = [], []
    for a in range(0, len(heads.lo), chunk):
        hlo, hhi = heads.lo[a : a + chunk, None], heads.hi[a : a + chunk, None]
        lo, hi = gumbel_intersection(hlo, hhi, tails.lo[None], tails.hi[None], beta)
        s_cap = log_sides(hi - lo, beta)
        s_w = log_sides(w_cond[a : a + chunk, None] if condition == "head" else w_cond[None], beta)
        bounds.append((s_cap - s_w).clamp_max(0.0).sum(-1))
        margins.append(MARGIN_ABS + MARGIN_REL * (s_cap.abs() + s_w.abs()).sum(-1))
    return torch.cat(bounds), torch.cat(margins)


@dataclass
class PruneStats:
    """Counts over an export: block pairs bounded / pruned (stage 1), (head, tail block) pairs bounded /
    pruned (stage 2), pairs reaching stage 3 (``pairs_scored``), of them cut by a partial sum / scored in
    full, facts kept."""

    block_pairs: int = 0
    blocks_pruned: int = 0
    row_pairs: int = 0
    rows_pruned: int = 0
    pairs_scored: int = 0
    pairs_total: int = 0
    pairs_cut: int = 0  # stage 3: pairs dropped by a partial sum over some dimensions
    pairs_exact: int = 0  # stage 3: pairs scored in full
    pair_dims: int = 0  # stage 3: (pair, dimension) terms of the partial sums
    facts: int = 0
    heads_done: int = 0  # head rows finished (progress and the export's early guard)
    heads_total: int = 0  # head rows the caller will score in all (0: unknown)

    @property
    def pruned_share(self) -> float:
        return self.blocks_pruned / self.block_pairs if self.block_pairs else 0.0

    @property
    def cut_share(self) -> float:
        """Share of the pairs reaching stage 3 that a partial sum dropped."""
        return self.pairs_cut / self.pairs_scored if self.pairs_scored else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "block_pairs": self.block_pairs,
            "blocks_pruned": self.blocks_pruned,
            "pruned_share": self.pruned_share,
            "row_pairs": self.row_pairs,
            "rows_pruned": self.rows_pruned,
            "pairs_scored": self.pairs_scored,
            "pairs_total": self.pairs_total,
            "scored_share": self.pairs_scored / self.pairs_total if self.pairs_total else 0.0,
            "pairs_cut": self.pairs_cut,
            "cut_share": self.cut_share,
            "exact_share": self.pairs_exact / self.pairs_total if self.pairs_total else 0.0,
            "pairs_exact": self.pairs_exact,
            "pair_dims": self.pair_dims,
            "facts": self.facts,
        }


STAGES = (8, 16, 24, 36, 48)  # stage 3: partial sums after these many dimensions (then the exact score)


STAGE_COST = 0.6  # one dimension of a partial sum / one dimension of the exact score (measured, CPU)


def worthwhile(terms: Tensor, bounds: list[int], cut: float) -> bool:
    """Whether stage 3's partial sums save work, judged on a sample's per-dimension terms (pairs, d) in the
    stages' order: their cost (the dimensions each stage adds for the pairs still in, at STAGE_COST) plus the
    exact score of the survivors, against the exact score of every pair. At a low threshold almost every pair
    survives (CN15k BEUrRE at T = 0.1: 50-80%) and the partial sums would only add work."""
    if len(bounds) < 2 or len(terms) == 0:
        return False
    d = terms.shape[1]
    alive = torch.ones(len(terms), dtype=torch.bool, device=terms.device)
    cost = 0.0
    for a, b in pairwise(bounds):
        cost += STAGE_COST * (b - a) * float(alive.float().mean())
        alive &= terms[:, :b].sum(-1) >= cut
    cost += d * float(alive.float().mean())
    return cost < 0.8 * d


@dataclass(frozen=True)
class StagedPairs:
    """Stage 3 of `score_relation`: the per-pair partial-sum cut (module docstring). Holds the relation's
    transformed corners with their columns in the selective order, cut into the stages' column slices
    (contiguous, so a stage gathers only its own columns), and per stage the condition side's sum of
    log-sides over the slice."""

    slices: tuple[tuple[Tensor, Tensor, Tensor, Tensor, Tensor], ...]  # per stage: hlo, hhi, tlo, thi, sum s_w
    cond_head: bool
    offset: float  # 2 gamma beta: s(x) = log softplus(x - offset)
    cut: float

    @staticmethod
    def build(
        heads: tuple[Tensor, Tensor], tails: tuple[Tensor, Tensor], beta: float, condition: str, cut: float,
        stages: tuple[int, ...] = STAGES, sample: int = 4096, judge: bool = True,
    ) -> StagedPairs:
        """heads, tails: (lower corners, widths) of the head and tail boxes, (n, d) each. judge: drop the
        stages where `worthwhile` says they cannot pay (False: keep them, for tests)."""
        (hlo, hw), (tlo, tw) = heads, tails
        d = hlo.shape[1]
        cond_head = condition == "head"
        s_w = log_sides(hw if cond_head else tw, beta)
        hhi, thi = hlo + hw, tlo + tw
        # the selective order: mean term per dimension over a fixed, evenly spread sample of pairs
        ih = torch.linspace(0, len(hlo) - 1, sample, device=hlo.device).long()
        it = torch.linspace(0, len(tlo) - 1, sample, device=hlo.device).flip(0).long()
        hard = torch.minimum(hhi[ih], thi[it]) - torch.maximum(hlo[ih], tlo[it])
        terms = (log_sides(hard, beta) - s_w[ih if cond_head else it]).clamp_max(0.0)
        order = torch.argsort(terms.mean(0), stable=True)
        bounds = [0, *(k for k in stages if 0 < k < d)]
        if judge and not worthwhile(terms[:, order], bounds, cut):
            bounds = [0]
        cols = [order[a:b] for a, b in pairwise(bounds)]
        slices = tuple(
            (*(x[:, c].contiguous() for x in (hlo, hhi, tlo, thi)), s_w[:, c].sum(-1)) for c in cols
        )
        return StagedPairs(slices, cond_head, 2 * EULER_GAMMA * beta, cut)

    def survivors(self, h2: Tensor, t2: Tensor, stats: PruneStats | None = None) -> tuple[Tensor, Tensor]:
        """The pairs of heads h2 (rows,) x tails t2 (rows, leaf) (-1: no tail) whose partial bounds never
        fall below the cut (with the rounding margin), as flat (heads, tails). Per stage: log prod_k
        softplus(hard_k - 2 gamma beta) - sum_k s(w_k) over its dimensions, with hard_k the hard
        intersection's side (>= the Gumbel one, which the model clamps inside it): one log per pair and
        stage instead of one per dimension. A product that underflows float32 to 0 (its log < -103) only
        cuts pairs far below any threshold of use (> 1e-40)."""
        rows, leaf = t2.shape
        ok = (t2 >= 0).reshape(-1)
        ph = h2.repeat_interleave(leaf)
        pt = t2.reshape(-1).clamp_min(0)
        partial = absum = None
        for i, (hlo, hhi, tlo, thi, sw_sum) in enumerate(self.slices):
            if i == 0:  # the first stage on the (rows, leaf) grid: each head's columns gathered once
                hl, hh = hlo.index_select(0, h2)[:, None], hhi.index_select(0, h2)[:, None]
                tl = tlo.index_select(0, pt).view(rows, leaf, -1)
                th = thi.index_select(0, pt).view(rows, leaf, -1)
                hard = torch.minimum(hh, th).sub_(torch.maximum(hl, tl)).view(rows * leaf, -1)
            else:
                hard = torch.minimum(hhi.index_select(0, ph), thi.index_select(0, pt))
                hard.sub_(torch.maximum(hlo.index_select(0, ph), tlo.index_select(0, pt)))
            log_cap = torch.log(F.softplus(hard.sub_(self.offset)).prod(-1))
            sw = sw_sum.index_select(0, ph if self.cond_head else pt)
            term = log_cap - sw
            partial = term if partial is None else partial.add_(term)
            mag = log_cap.abs_().add_(sw.abs())
            absum = mag if absum is None else absum.add_(mag)
            keep = partial >= (MARGIN_REL * absum).add_(MARGIN_ABS).neg_().add_(self.cut)
            if i == 0:
                keep &= ok
            idx = keep.nonzero().squeeze(1)
            if stats is not None:
                stats.pair_dims += len(ph) * hlo.shape[1]
                stats.pairs_cut += len(ph) - len(idx) - (int((~ok).sum()) if i == 0 else 0)
            ph, pt = ph.index_select(0, idx), pt.index_select(0, idx)
            partial, absum = partial.index_select(0, idx), absum.index_select(0, idx)
        if not self.slices:
            ph, pt = ph[ok], pt[ok]
        if stats is not None:
            stats.pairs_exact += len(ph)
        return ph, pt


def _members(blocks: Blocks, leaf: int) -> Tensor:
    """(n_blocks, leaf) int64 member positions of each block, -1 where the last block is short."""
    n = len(blocks.order)
    pos = torch.arange(len(blocks.lo) * leaf, device=blocks.order.device)
    out = torch.full_like(pos, -1)
    out[pos < n] = blocks.order[pos[pos < n]]
    return out.view(-1, leaf)


@torch.no_grad()
def score_relation(
    model: BEUrRE,
    r: int,
    threshold: float,
    heads: Tensor | None = None,
    leaf: int = LEAF,
    pair_budget: int = 1 << 22,
    stats: PruneStats | None = None,
    on_block: Callable[[int], None] | None = None,
    stages: tuple[int, ...] = STAGES,
) -> tuple[Tensor, Tensor, Tensor]:
    """All (h, t) of relation r with model confidence >= threshold, exactly as brute force finds them.

    Three stages: (1) bound every (head block, tail block) pair from both enclosing boxes; (2) for the
    surviving pairs, bound each head's own box against the tail block's enclosing box (the same argument
    with a block of one head, far tighter); (3) for the pairs of the surviving (head, tail block) rows,
    sum the pair's own terms over the first `stages` dimensions (most selective first, `StagedPairs`),
    dropping a pair as soon as the partial sum is below the cut, and score the survivors exactly with the
    model's `_prob`. heads: the head ids to score (default all; the tails are always all entities).
    Returns (h, t, score): int64, int64, float32 tensors on the model's device, sorted by (h, t). stats is
    updated in place (facts as they are found); on_block(n_heads) is called after each group of heads (a
    progress bar's update, or a guard that raises to stop an unselective export early)."""
    stats = stats if stats is not None else PruneStats()
    dev = model.lo.device
    n = model.n_entities
    heads = torch.arange(n, device=dev) if heads is None else heads.to(dev)
    hlo, hw = model.boxes(heads, r, "head")
    tlo, tw = model.boxes(torch.arange(n, device=dev), r, "tail")
    hhi = hlo + hw
    beta, cond = model.gumbel_beta, model.condition
    cut = float(np.log(threshold))
    hb = make_blocks(hlo, hw, _order(hlo, hw, leaf).to(dev), leaf)
    tb = make_blocks(tlo, tw, _order(tlo, tw, leaf).to(dev), leaf)
    bound, margin = block_log_bound(hb, tb, beta, cond)
    keep = bound >= cut - margin  # (n_head_blocks, n_tail_blocks)
    stats.block_pairs += keep.numel()
    stats.blocks_pruned += int((~keep).sum())
    stats.pairs_total += len(heads) * n
    hmem, tmem = _members(hb, leaf), _members(tb, leaf)
    staged = StagedPairs.build((hlo, hw), (tlo, tw), beta, cond, cut, stages)
    out_h, out_t, out_s = [], [], []
    chunk = max(1, pair_budget // (leaf * model.dim))  # (head, tail block) rows per exact-scoring slice
    group = max(1, 1024 // leaf)  # head blocks per step of stage 2 (and per progress update)
    for g in range(0, len(hb.lo), group):
        bi, bj = keep[g : g + group].nonzero(as_tuple=True)
        rows = hmem[bi + g]  # (pairs, leaf) head positions
        hh = rows.reshape(-1)
        jj = bj.repeat_interleave(leaf)
        valid = hh >= 0
        hh, jj = hh[valid], jj[valid]
        stats.row_pairs += len(hh)
        for a in range(0, len(hh), chunk * 4):
            h1, j1 = hh[a : a + chunk * 4], jj[a : a + chunk * 4]
            # stage 2: the head's own box against the tail block's enclosing box
            lo, hi = gumbel_intersection(hlo[h1], hhi[h1], tb.lo[j1], tb.hi[j1], beta)
            s_cap = log_sides(hi - lo, beta)
            s_w = log_sides(hw[h1] if cond == "head" else tb.w_min[j1], beta)
            b2 = (s_cap - s_w).clamp_max(0.0).sum(-1)
            m2 = MARGIN_ABS + MARGIN_REL * (s_cap.abs() + s_w.abs()).sum(-1)
            k2 = b2 >= cut - m2
            stats.rows_pruned += int((~k2).sum())
            h1, j1 = h1[k2], j1[k2]
            for c in range(0, len(h1), chunk):
                h2, t2 = h1[c : c + chunk], tmem[j1[c : c + chunk]]  # (rows,), (rows, leaf)
                stats.pairs_scored += int((t2 >= 0).sum())
                if staged.slices:
                    # stage 3: the pair's own log-sides over a few dimensions at a time (a partial sum of
                    # terms <= 0 bounds log P), then the survivors exactly
                    ph, pt = staged.survivors(h2, t2, stats)
                    p = model._prob(hlo[ph], hw[ph], tlo[pt], tw[pt])
                    k3 = p >= threshold
                    hk, tk, sk = ph[k3], pt[k3], p[k3]
                else:  # not selective enough for partial sums to pay: every row scored in full
                    ok_t = t2 >= 0
                    tc = t2.clamp_min(0)
                    p = model._prob(hlo[h2][:, None], hw[h2][:, None], tlo[tc], tw[tc])
                    ri, ci = ((p >= threshold) & ok_t).nonzero(as_tuple=True)
                    hk, tk, sk = h2[ri], tc[ri, ci], p[ri, ci]
                    stats.pairs_exact += int(ok_t.sum())
                out_h.append(heads[hk])
                out_t.append(tk)
                out_s.append(sk)
                stats.facts += len(hk)
        done = int((hmem[g : g + group] >= 0).sum())
        stats.heads_done += done
        if on_block is not None:
            on_block(done)
    if out_h:
        h, t, s = torch.cat(out_h), torch.cat(out_t), torch.cat(out_s)
    else:
        h = t = torch.zeros(0, dtype=torch.int64, device=dev)
        s = torch.zeros(0, dtype=torch.float32, device=dev)
    idx = torch.argsort(h * n + t)
    return h[idx], t[idx], s[idx].to(torch.float32)


def _order(lo: Tensor, width: Tensor, leaf: int) -> Tensor:
    # k-d split on the box centres: neighbours in space share blocks, so enclosing boxes stay small
    centres = (lo + width / 2).detach().cpu().double().numpy()
    return torch.as_tensor(kd_order(centres, leaf))
