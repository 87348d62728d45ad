"""Upper bounds on UKGE's trilinear score over blocks of heads and tails (a measurement, not an exporter).

UKGE scores P(h, r, t) = g(w <a_h, e_t> + b) with a_h = e_h * r (elementwise) and g = sigmoid (logi) or
clamp to [0, 1] (rect), both nondecreasing; so with w > 0, P >= T needs <a_h, e_t> >= x_T = (g^-1(T) - b)/w
(for w < 0 the inequality flips and the same bounds apply to -<a_h, e_t>). For a block H of heads and a
block T of tails, two classic bounds of the dot product hold for every member pair:

- per-dimension intervals: <a, e> <= sum_k max(lo_a lo_e, lo_a hi_e, hi_a lo_e, hi_a hi_e) over each
  dimension's [min, max] in the block (the product of two intervals is within their corner products);
- Cauchy-Schwarz around the block centres c_H, c_T with radii rho_H = max ||a - c_H||, rho_T:
  <a, e> = <c_H, c_T> + <a - c_H, c_T> + <c_H, e - c_T> + <a - c_H, e - c_T>
        <= <c_H, c_T> + rho_H ||c_T|| + ||c_H|| rho_T + rho_H rho_T.

A block pair is prunable when the smaller of the two bounds is below x_T (stage 1); stage 2 bounds each head
exactly against a tail block (<a_h, c_T> + ||a_h|| rho_T, and the interval bound with a point interval).
`measure` counts what each would prune; it changes no export.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from pipeline.models.box_bounds import kd_order
from pipeline.models.ukge import UKGE


def score_cut(model: UKGE, threshold: float) -> tuple[float, float]:
    """(sign, x_T): P >= threshold implies sign * <a_h, e_t> >= x_T (sign = +1 for w > 0, -1 for w < 0)."""
    w, b = float(model.w.detach()), float(model.b.detach())
    z = math.log(threshold / (1 - threshold)) if model.mapping == "logi" else threshold
    if w == 0:
        return 1.0, -math.inf if b >= z else math.inf
    return (1.0, (z - b) / w) if w > 0 else (-1.0, (z - b) / -w)


def _blocks(x: Tensor, order: Tensor, leaf: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per block of `leaf` rows of x in `order`: (min, max, centre, radius)."""
    n, d = x.shape
    nb = (n + leaf - 1) // leaf
    pad = nb * leaf - n
    xo = x[order]
    lo = torch.cat([xo, xo[-1:].expand(pad, d)]).view(nb, leaf, d)  # padding repeats a member
    mn, mx = lo.min(1).values, lo.max(1).values
    c = lo.mean(1)
    rad = (lo - c[:, None]).norm(dim=-1).max(1).values
    return mn, mx, c, rad


def _interval(mn1: Tensor, mx1: Tensor, mn2: Tensor, mx2: Tensor) -> Tensor:
    corners = torch.stack([mn1 * mn2, mn1 * mx2, mx1 * mn2, mx1 * mx2])
    return corners.max(0).values.sum(-1)


@torch.no_grad()
def measure(model: UKGE, threshold: float, leaf: int = 32, relations: list[int] | None = None) -> dict[str, Any]:
    """Counts of (head block, tail block) pairs each bound prunes (stage 1), of (head, tail block) rows the
    per-head bounds prune among the survivors (stage 2), and of pairs that really pass the threshold (for
    scale). Entities are ordered by a k-d split of their vectors, as the box export does. float64."""
    sign, cut = score_cut(model, threshold)
    n = model.n_entities
    ent = model.ent.detach().double() * sign
    rels = relations if relations is not None else list(range(model.n_relations))
    tot = dict.fromkeys(
        ["block_pairs", "pruned_interval", "pruned_cs", "pruned_either", "row_pairs", "rows_pruned",
         "pairs_left", "pairs", "facts"], 0)
    t_order = torch.as_tensor(kd_order(ent.numpy(), leaf))
    tmn, tmx, tc, trad = _blocks(ent, t_order, leaf)
    tnorm = tc.norm(dim=1)
    t_size = (n - torch.arange(len(tmn)) * leaf).clamp_max(leaf)  # the last tail block may be short
    for r in rels:
        a = model.ent.detach().double() * model.rel.detach().double()[r]
        h_order = torch.as_tensor(kd_order(a.numpy(), leaf))
        hmn, hmx, hc, hrad = _blocks(a, h_order, leaf)
        hnorm = hc.norm(dim=1)
        for s in range(0, len(hmn), 64):
            e = slice(s, s + 64)
            iv = _interval(hmn[e, None], hmx[e, None], tmn[None], tmx[None])
            cs = hc[e] @ tc.T + hrad[e, None] * tnorm[None] + hnorm[e, None] * trad[None] + hrad[e, None] * trad[None]
            p_iv, p_cs = iv < cut, cs < cut
            tot["block_pairs"] += iv.numel()
            tot["pruned_interval"] += int(p_iv.sum())
            tot["pruned_cs"] += int(p_cs.sum())
            tot["pruned_either"] += int((p_iv | p_cs).sum())
            # stage 2 on the surviving block pairs: each head's own vector against the tail block
            bi, bj = (~(p_iv | p_cs)).nonzero(as_tuple=True)
            for c in range(0, len(bi), 2048):
                i, j = bi[c : c + 2048] + s, bj[c : c + 2048]
                pos = i[:, None] * leaf + torch.arange(leaf)
                valid = pos < n
                ah = a[h_order[pos.clamp_max(n - 1)]]  # (pairs, leaf, d)
                b_cs = (ah * tc[j][:, None]).sum(-1) + ah.norm(dim=-1) * trad[j][:, None]
                b_iv = torch.maximum(ah * tmn[j][:, None], ah * tmx[j][:, None]).sum(-1)
                pruned = (torch.minimum(b_cs, b_iv) < cut) & valid
                tot["row_pairs"] += int(valid.sum())
                tot["rows_pruned"] += int(pruned.sum())
                tot["pairs_left"] += int(((~pruned & valid) * t_size[j][:, None]).sum())
        # for scale: the pairs whose exact score passes
        for h0 in range(0, n, 2048):
            tot["facts"] += int(((a[h0 : h0 + 2048] @ ent.T) >= cut).sum())
        tot["pairs"] += n * n
    return tot


def summary(tot: dict[str, Any]) -> dict[str, float]:
    """Shares (0-1) of what `measure` counted; `scored_share` = share of all pairs left to score exactly
    after both stages."""
    bp = max(1, tot["block_pairs"])
    return {
        "blocks_pruned_interval": tot["pruned_interval"] / bp,
        "blocks_pruned_cs": tot["pruned_cs"] / bp,
        "blocks_pruned": tot["pruned_either"] / bp,
        "rows_pruned_of_survivors": tot["rows_pruned"] / max(1, tot["row_pairs"]),
        "scored_share": tot["pairs_left"] / max(1, tot["pairs"]),
        "facts_share": tot["facts"] / max(1, tot["pairs"]),
    }
