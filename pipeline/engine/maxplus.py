"""The sparse max-plus product of design section 2, step 3:

    out[b, o] = max_s  C[b, s] + M_b(s, o)

for a batch of state vectors C (B, N) and matrices M_b given as "default d_b + stored exceptions".
Split by whether (s, o) is stored:
  * stored:      a scatter-max over the stored entries. For a state finite on few entities, only the
                 rows of those entities are gathered (CSR); for a state finite almost everywhere (alpha 0
                 upstream), the matrix's finite entries are streamed once as contiguous arrays, over the
                 transposed batch when many rows share a relation (see _dense_rows, _stream_wide);
  * not stored:  d_b + max over s outside column o's support of C[b, s]. That maximum is C's best entry
                 unless (best, o) is stored, then the second best, ... so it is found by walking C's
                 top entries, and only for the few columns that hold all of them. Where no stored value
                 is below the default (positive atoms, betas >= 0: _stored_dominate) d_b + C's best entry
                 serves every column, no walk.
A state that is a constant floor with few entries above it (alpha 0 upstream: an anchor's row over 0)
needs neither the stream nor the rows of every entity: the floor plus each column's best stored value
(a few points per column, Adjacency.column_front) and the rows of the entries above it (_floor_rows).
No dense |E| x |E| matrix is formed; the work is the stored entries touched plus O(B * N).
"""

from __future__ import annotations

from typing import Any

import torch

from pipeline.engine.adjacency import Adjacency
from pipeline.engine.atoms import NEG_INF, RelationMatrix, SumMatrix
from pipeline.engine.kernels import applies as compiled_applies
from pipeline.engine.kernels import expect as compiled_expect
from pipeline.engine.kernels import mode as kernel_mode
from pipeline.engine.kernels import ready as compiled_ready
from pipeline.engine.kernels import rows_cost, torch_stream
from pipeline.engine.kernels import rows_max as compiled_rows
from pipeline.engine.kernels import rows_max_two as compiled_rows_two
from pipeline.engine.kernels import stream_max as compiled_stream

Matrix = RelationMatrix | SumMatrix
_TOPK = 16  # top entries fetched at once; the walk rarely needs more than a few
_FLOOR_COST = 16  # a fact gathered by _floor_rows costs about this many facts streamed (measured)
_FRONT_COST = 1.0  # building a relation pair's column front costs about this many rows streamed (measured)
_DENSE_FRACTION = 0.05  # a state finite on more entities than this reads its relation whole (see _dense_rows)
_WIDE = 8  # from this many rows of one relation on, stream the facts over the transposed state
_WIDE_BLOCK = 1 << 19  # floats gathered per block of entries (_stream_wide): 2 MiB, about the L2 cache
_WALK = 8  # top entries walked per column before a column is finished exactly (_max_off_column)
_GRAD_ENTRIES = 1 << 22  # stored entries examined at once when routing gradients (_attach_grad)
_DENSE_WINNERS = True  # route the gradients of everywhere-finite rows by streaming (_dense_winners)
_SPLIT_MULTI_EDGES = True  # alpha-0 positive multi-edges: no union of supports (_split_multi_edges)
_DOMINATE = True  # no default walk where no stored entry is below the default (_stored_dominate)
_COLUMN_SHARE = 16  # a dense row reading at most 1/16 of its cells finds their maximisers by columns
_FLOOR = True  # floor states with few entries above: column fronts, not the relation (_floor_rows)


def maxplus(state: torch.Tensor, m: Matrix, need: torch.Tensor | None = None) -> torch.Tensor:
    """(B, N) float32: the max-plus product of state (B, N) (-inf = impossible) with matrices m.

    Differentiable in state and in the graph's confidences (calibration L): the values are computed by the
    fast path below without autograd, then the gradient of each output entry is routed to its argmax term,
    state[b, s*] plus (where s* is a stored entry) that entry's value (see _attach_grad). need: (B, N)
    bool, the output entries whose gradient is read (None: all); the others get no route (their gradient
    must be 0), which spares finding their maximisers."""
    if torch.is_grad_enabled() and (state.requires_grad or _conf_requires_grad(m)):
        with torch.no_grad():
            out = _values(state.detach(), m)
        return _attach_grad(state, m, out, need)
    return _values(state, m)


def _conf_requires_grad(m: Matrix) -> bool:
    parts = m.parts if isinstance(m, SumMatrix) else [m]
    return any(p.adj.fwd.differentiable or p.adj.bwd.differentiable for p in parts)


def _attach_grad(state: torch.Tensor, m: Matrix, out: torch.Tensor, need: torch.Tensor | None = None) -> torch.Tensor:
    """out (B, N) (the product's values, no autograd) plus zero-valued terms that carry the gradient of
    each finite entry (b, o) to one maximiser s*: d out[b, o] / d state[b, s*] = 1 and, where (s*, o) is
    stored, d out / d V(s*, o) = 1 (through the stored confidences). Ties: the first maximiser found (a
    valid subgradient). The forward values are exactly those of the fast path.

    Maximisers: a stored entry whose term equals out (up to float rounding, since the fast path may fuse
    the multiply-add), else the best state entry outside column o's support (the default's term).
    need: (B, N) the entries to route (None: every one); the same maximisers as without it, found for
    those entries alone (the rows finite everywhere by their columns, :func:`_column_winners`)."""
    bsz, n = state.shape
    dev = state.device
    sd = state.detach()
    fin_out = torch.isfinite(out) if need is None else torch.isfinite(out) & need
    # Stored maximisers, a few batch rows at a time (the rows of a finite state hold a relation's facts).
    won = torch.zeros((bsz, n), dtype=torch.bool, device=dev)
    wb, ws, wo = [], [], []
    with torch.no_grad():
        fin = torch.isfinite(sd)
        if _DENSE_WINNERS and isinstance(m, RelationMatrix):  # rows finite everywhere: stream them
            dense = torch.nonzero(fin.all(1), as_tuple=True)[0]
            if dense.numel():
                # rows that read few cells (the authors' loss: one answer and 128 negatives) by their
                # columns; the others by streaming the relation once (a row whose answers are most
                # entities, as alpha-0 2p queries have, would gather most of the relation by columns)
                sparse = torch.zeros(0, dtype=torch.int64, device=dev)
                if need is not None:
                    few = need.index_select(0, dense).sum(1) * _COLUMN_SHARE <= n
                    sparse, dense = dense[few], dense[~few]
                found = [_dense_winners(sd, m, out, dense)] if dense.numel() else []
                if sparse.numel():
                    found.append(_column_winners(sd, m, out, sparse, need))  # type: ignore[arg-type]
                for b, s, o in found:
                    if need is not None:  # the same winners; those of unread cells would carry a zero gradient
                        keep = need.reshape(-1).index_select(0, b * n + o)
                        b, s, o = b[keep], s[keep], o[keep]
                    wb.append(b)
                    ws.append(s)
                    wo.append(o)
                fin[dense] = False
                fin[sparse] = False
        sd_flat, out_flat = sd.reshape(-1), out.reshape(-1)
        for lo, hi in _row_chunks(fin, m):
            b, s = torch.nonzero(fin[lo:hi], as_tuple=True)
            b = b + lo
            if not b.numel():
                continue
            pair, o, val = m.rows(b, s)
            bb, ss = b.index_select(0, pair), s.index_select(0, pair)
            # flat index_select: the same values as out[bb, o] / sd[bb, ss], without 2-D advanced indexing
            target = out_flat.index_select(0, bb * n + o)
            cand = sd_flat.index_select(0, bb * n + ss) + val
            hit = torch.isfinite(cand) & ((cand - target).abs() <= 1e-5 * target.abs().clamp_min(1.0))
            if need is not None:
                hit &= need.reshape(-1).index_select(0, bb * n + o)
            bb, ss, o = bb[hit], ss[hit], o[hit]
            cell = bb * n + o
            cell, first = _first_occurrence(cell, bsz * n)
            wb.append(bb[first])
            ws.append(ss[first])
            wo.append(o[first])
        if wb:  # winners in cell order, as one pass over all rows gives them
            b, s, o = torch.cat(wb), torch.cat(ws), torch.cat(wo)
            order = torch.sort(b * n + o).indices
            wb, ws, wo = [b[order]], [s[order]], [o[order]]
        if wb:
            won.view(-1)[wb[0] * n + wo[0]] = True
    res = out
    if wb:
        b, s, o = torch.cat(wb), torch.cat(ws), torch.cat(wo)
        term = state[b, s] + m.entry(b, s, o)
        delta = torch.zeros(bsz * n, dtype=out.dtype, device=dev).index_add(
            0, b * n + o, term - term.detach()
        )
        res = res + delta.view(bsz, n)
    # Default maximisers: the best state entry outside the column's support.
    rest = fin_out & ~won
    if bool(rest.any()):
        with torch.no_grad():
            arg = sd.argmax(dim=1)[:, None].expand(bsz, n).clone()
            rb, ro = torch.nonzero(rest, as_tuple=True)
            inside = m.contains(rb, arg[rb, ro], ro)  # the row's best entry is stored in that column
            if bool(inside.any()):
                arg[rb[inside], ro[inside]] = _argmax_off_column(sd, rb[inside], ro[inside], m)
        picked = state.gather(1, arg)
        res = res + torch.where(rest, picked - picked.detach(), torch.zeros((), device=dev))
    return res


def _dense_winners(
    sd: torch.Tensor, m: RelationMatrix, out: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The stored maximisers (b, s, o) of the given rows, whose state is finite everywhere: per cell
    (b, o) the smallest s with state[b, s] + V(s, o) equal to out[b, o] (the maximiser that a pass over
    the row's facts in (s, o) order finds first). The relation's finite entries are streamed once per
    group of rows with the same atom, in blocks, as the forward pass does (_dense_rows), instead of a
    ragged gather of every (b, s) row: the cost of calibration L, whose alphas are all 0."""
    bsz, n = sd.shape
    p = m.params
    keys = zip(p.rel[rows].tolist(), p.neg[rows].tolist(), p.alpha[rows].tolist(), strict=True)
    groups: dict[tuple, list[int]] = {}
    for b, key in zip(rows.tolist(), keys, strict=True):
        groups.setdefault(((m.from_head, *key),), []).append(b)
    wb, ws, wo = [], [], []
    for key, members in groups.items():
        src, dst, cc = (x.detach() for x in m.adj.finite_facts(key))
        if not src.numel():
            continue
        g_rows = torch.tensor(members, device=sd.device)
        st, tgt = sd.index_select(0, g_rows), out.index_select(0, g_rows)
        tol = 1e-5 * tgt.abs().clamp_min(1.0)  # per cell, once: the same values the test used per entry
        beta = p.beta.index_select(0, g_rows)[:, None]
        big = n  # no maximiser yet
        best = torch.full((len(members), n), big, dtype=torch.int64, device=sd.device)
        kernel = _winners_kernel() if sd.device.type == "cpu" else None
        if kernel is not None:  # one compiled pass, the same test on the same float32 operations
            best_t = best.T.contiguous()
            kernel(st.T.contiguous().numpy(), tgt.T.contiguous().numpy(), tol.T.contiguous().numpy(),
                   beta[:, 0].contiguous().numpy(), src.long().numpy(), dst.long().numpy(),
                   cc[0].contiguous().numpy(), best_t.numpy())
            best = best_t.T
        else:
            block = max(256, (1 << 22) // len(members))
            for lo in range(0, src.numel(), block):
                s_blk, o_blk = src[lo : lo + block].long(), dst[lo : lo + block].long()
                # beta * cc then + state: the same float operations as the value of the entry (atoms.value)
                cand = st.index_select(1, s_blk) + beta * cc[0, lo : lo + block][None, :]
                # |cand - target| <= a finite tolerance holds for finite values only: no isfinite pass
                hit = (cand - tgt.index_select(1, o_blk)).abs_() <= tol.index_select(1, o_blk)
                s_hit = torch.where(hit, s_blk[None, :], torch.full((), big, device=sd.device))
                best.scatter_reduce_(1, o_blk[None, :].expand(len(members), -1), s_hit, reduce="amin")
        gb, go = torch.nonzero(best < big, as_tuple=True)
        wb.append(g_rows.index_select(0, gb))
        ws.append(best[gb, go])
        wo.append(go)
    if not wb:
        empty = torch.zeros(0, dtype=torch.int64, device=sd.device)
        return empty, empty, empty
    return torch.cat(wb), torch.cat(ws), torch.cat(wo)


def _column_winners(
    sd: torch.Tensor, m: RelationMatrix, out: torch.Tensor, rows: torch.Tensor, need: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """_dense_winners for the needed cells (b, o) of the given rows alone: per cell the smallest s of a
    stored (s, o) with state[b, s] + V(s, o) equal to out[b, o], the same test on the same float
    operations, found in column o's stored entries (a loss that reads ~100 cells of a 5,000-entity row
    reads ~100 columns, not the relation)."""
    n = sd.shape[1]
    sel = torch.zeros(sd.shape[0], dtype=torch.bool, device=sd.device)
    sel[rows] = True
    cb, co = torch.nonzero(need & sel[:, None] & torch.isfinite(out), as_tuple=True)
    if not cb.numel():
        empty = torch.zeros(0, dtype=torch.int64, device=sd.device)
        return empty, empty, empty
    # column o's stored entries (s, o): the rows of the other orientation, with their confidences
    pair, s, conf = m.adj.oriented(not m.from_head).rows(m.params.rel.index_select(0, cb), co, n)
    s = s.long()
    bb, oo = cb.index_select(0, pair), co.index_select(0, pair)
    cand = sd.reshape(-1).index_select(0, bb * n + s) + m.params.value(conf, bb)
    target = out.reshape(-1).index_select(0, bb * n + oo)
    hit = torch.isfinite(cand) & ((cand - target).abs() <= 1e-5 * target.abs().clamp_min(1.0))
    big = n
    best = torch.full((cb.numel(),), big, dtype=torch.int64, device=sd.device)
    best.scatter_reduce_(0, pair[hit], s[hit], reduce="amin")
    found = best < big
    return cb[found], best[found], co[found]


_WINNERS: dict[str, Any] = {}


def _winners_kernel() -> Any:
    """The compiled maximiser search (:mod:`._winners_numba`), or None (numba missing, or
    PIPELINE_KERNELS=torch): the torch form, the same winners."""
    if kernel_mode() == "torch":
        return None
    if "kernel" not in _WINNERS:
        try:
            from pipeline.engine._winners_numba import winners
        except ImportError:
            winners = None
        _WINNERS["kernel"] = winners
    return _WINNERS["kernel"]


def _row_chunks(fin: torch.Tensor, m: Matrix) -> list[tuple[int, int]]:
    """Consecutive row ranges [lo, hi) of a state's finite mask fin (B, N) whose stored entries from
    finite entries number at most _GRAD_ENTRIES (a row over it is a range alone): bounds the memory of
    _attach_grad."""
    bsz, n = fin.shape
    count = torch.zeros(bsz, dtype=torch.int64, device=fin.device)
    ents = torch.arange(n, device=fin.device)
    for p in m.parts if isinstance(m, SumMatrix) else [m]:
        k = p.params.rel[:, None] * n + ents[None, :]
        count += ((p.ori.ptr[k + 1] - p.ori.ptr[k]) * fin).sum(1)
    chunks, lo, used = [], 0, 0
    for i, c in enumerate(count.tolist()):
        if i > lo and used + c > _GRAD_ENTRIES:
            chunks.append((lo, i))
            lo, used = i, 0
        used += c
    if lo < bsz:
        chunks.append((lo, bsz))
    return chunks


def _first_occurrence(key: torch.Tensor, bound: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct keys (K,) ascending and the position (K,) of each one's first occurrence in key (T,),
    keys in [0, bound): a scatter-min of positions into a bound-sized buffer (no sort of the T keys)."""
    t = key.numel()
    pos = torch.arange(t, device=key.device)
    first = torch.full((bound,), t, dtype=torch.int64, device=key.device)
    first.scatter_reduce_(0, key, pos, reduce="amin", include_self=True)
    uniq = torch.nonzero(first < t, as_tuple=True)[0]
    return uniq, first.index_select(0, uniq)


def _argmax_off_column(state: torch.Tensor, pb: torch.Tensor, po: torch.Tensor, m: Matrix) -> torch.Tensor:
    """(P,) int64: for pairs (row pb, column po), an s maximising state[pb, s] over s with (s, po) not stored."""
    n = state.shape[1]
    out = torch.empty(pb.numel(), dtype=torch.int64, device=state.device)
    step = max(1, (1 << 24) // n)
    for lo in range(0, pb.numel(), step):
        b, o = pb[lo : lo + step], po[lo : lo + step]
        rows = state[b]  # advanced indexing: already a copy
        pair, s = m.column(b, o)
        rows[pair, s] = NEG_INF
        out[lo : lo + step] = rows.argmax(dim=1)
    return out


def _values(state: torch.Tensor, m: Matrix) -> torch.Tensor:
    """The product's values (the fast path; in-place kernels, not differentiable)."""
    bsz, n = state.shape
    dev = state.device

    # Stored entries: only rows with a finite state can contribute. A nearly everywhere finite state is
    # better served by streaming its relation's facts once (no ragged gather, no per-fact parameters),
    # unless it is a constant floor with few entries above it (_floor_rows: alpha 0 upstream).
    low = state.amin(dim=1)
    floor = _floor_ready(m) & torch.isfinite(low) & _FLOOR
    if bool(floor.any()):
        floor &= _floor_pays(state, m, low, floor)
    if bool(torch.isfinite(low).all()):  # finite everywhere: no sparse gather
        finite, dense = None, ~floor
    else:
        finite = torch.isfinite(state)
        dense = ~floor & (finite.sum(1) > _DENSE_FRACTION * n)
    out = None
    if bool(dense.any()):
        out = _dense_rows(state, m, torch.nonzero(dense, as_tuple=True)[0])
    if out is None:
        out = torch.full((bsz, n), NEG_INF, dtype=torch.float32, device=dev)
    if bool(floor.any()):
        _floor_rows(state, m, torch.nonzero(floor, as_tuple=True)[0], low, out)
    if finite is not None:
        b, s = torch.nonzero(finite & ~(dense | floor)[:, None], as_tuple=True)
        if b.numel() and isinstance(m, RelationMatrix) and dev.type == "cpu" and compiled_ready():
            # one atom: each fact read once, no (T,) temporaries (CN15k, 50 inp queries: 0.113 -> 0.055 s)
            compiled_rows(state, b, s, m.params, m.ori.ptr, m.ori.dst, m.ori.conf, out)
        elif b.numel() and isinstance(m, SumMatrix) and len(m.parts) == 2 and dev.type == "cpu" and compiled_ready():
            # a multi-edge whose rows need both facts: their rows met by a merge, each fact read once (CN15k,
            # 100 2m test queries: a third of the step was finite_rows' keys, merge and temporaries)
            need = m.intersecting(b)
            if bool(need.any()):
                compiled_rows_two(state, b[need], s[need], m.parts, out)
            b, s = b[~need], s[~need]
            if b.numel():
                pair, o, val = m.rows(b, s)
                cand = state.reshape(-1).index_select(0, (b * n + s).index_select(0, pair)) + val
                out.view(-1).scatter_reduce_(0, b[pair] * n + o, cand, reduce="amax", include_self=True)
        elif b.numel():
            pair, o, val = m.finite_rows(b, s) if isinstance(m, SumMatrix) else m.rows(b, s)
            cand = state.reshape(-1).index_select(0, (b * n + s).index_select(0, pair)) + val
            out.view(-1).scatter_reduce_(0, b[pair] * n + o, cand, reduce="amax", include_self=True)

    # Entries not stored take the default; only batch elements with a finite default need it. Column o
    # gets d + (best state entry), except the few columns whose support holds that entry (pb, po); where
    # no stored entry is below the default (_stored_dominate) no column needs the exception.
    fin_d = torch.isfinite(m.default)
    dom = fin_d & _stored_dominate(m) & _DOMINATE
    if bool(dom.any()):
        _add_best(state, m.default, dom, out)
        fin_d &= ~dom
    sel = torch.nonzero(fin_d, as_tuple=True)[0]
    if not sel.numel():
        return out
    whole = sel.numel() == bsz  # the common all-or-nothing batch: no row copies
    rows = out if whole else out[sel]
    d = m.default[sel]
    top, pb, po, pv = _outside_support(state if whole else state[sel], sel, m)
    stored = rows[pb, po]
    torch.maximum(rows, (top + d)[:, None], out=rows)
    rows[pb, po] = torch.maximum(stored, pv + d[pb])
    if whole:
        return rows
    out[sel] = rows
    return out


def _monotone(m: Matrix) -> torch.Tensor:
    """(B,) bool: whether every atom of a batch element's matrix is positive with beta a finite number
    >= +0: its value c >= alpha ? beta * c : -inf never decreases as the confidence c grows."""
    out = None
    for p in m.parts if isinstance(m, SumMatrix) else [m]:
        a = p.params
        ok = ~a.neg & torch.isfinite(a.beta) & ~torch.signbit(a.beta)
        out = ok if out is None else out & ok
    return out


def _floor_ready(m: Matrix) -> torch.Tensor:
    """(B,) bool: whether a batch element's matrix suits _floor_rows: _monotone, one or two atoms
    (Adjacency.column_front)."""
    return _monotone(m) & (not isinstance(m, SumMatrix) or len(m.parts) <= 2)


def _floor_pays(state: torch.Tensor, m: Matrix, low: torch.Tensor, ready: torch.Tensor) -> torch.Tensor:
    """(B,) bool: the rows (among ready) that _floor_rows serves for less than the stream would. Rows
    are weighed by relation group (_relation_groups: the rows that one stream of _dense_rows serves
    together): a row on the floor path costs the facts of the rows of its entries above the floor, at
    _FLOOR_COST stream facts each; the rows left to the stream cost their relations' facts once for
    all of them (kernels.rows_cost: the compiled stream reads an entry once for eight rows, the torch
    form once per row). A multi-edge's column front not yet built costs about _FRONT_COST rows
    streamed (its column maxima and the cover of its shared entries' front). In each group the rows
    whose gathers cost most stream, as many as make the group's total least (none, some or all)."""
    n = state.shape[1]
    parts = m.parts if isinstance(m, SumMatrix) else [m]
    b, s = torch.nonzero((state > low[:, None]) & ready[:, None], as_tuple=True)
    gathered = torch.zeros(state.shape[0], dtype=torch.int64, device=state.device)
    streamed = torch.zeros_like(gathered)
    for p in parts:
        ptr, rel = p.ori.ptr, p.params.rel
        k = rel.index_select(0, b) * n + s
        gathered.index_add_(0, b, ptr.index_select(0, k + 1) - ptr.index_select(0, k))
        streamed += ptr.index_select(0, (rel + 1) * n) - ptr.index_select(0, rel * n)
    pays = torch.zeros_like(ready)
    rows = torch.nonzero(ready, as_tuple=True)[0]
    if not rows.numel():
        return pays
    adj = parts[0].adj
    cost = (gathered * _FLOOR_COST).tolist()
    full = streamed.tolist()
    ids = rows.tolist()
    groups = _relation_groups(parts, rows)
    # streams that would wait for the compiled form's background load: wait now, the costs below are then its
    compiled_expect(state.device, sum(full[ids[at[0]]] * len(at) for at in groups.values()))
    for key, at in groups.items():
        members = sorted((ids[i] for i in at), key=lambda i: -cost[i])  # the costliest gathers first
        facts = full[members[0]]
        front = 0.0 if len(parts) < 2 or adj.has_front(key) else _FRONT_COST * facts
        left = sum(cost[i] for i in members)  # every row on the floor path
        best, take = left + front, 0
        for j, i in enumerate(members[:-1], start=1):  # the j costliest stream, the others the floor
            left -= cost[i]
            total = facts * rows_cost(state.device, j, facts) + left + front
            if total < best:
                best, take = total, j
        if facts * rows_cost(state.device, len(members), facts) <= best:
            take = len(members)  # every row streams (no front needed)
        pays[members[take:]] = True
    return pays


def _relation_groups(parts: list[RelationMatrix], rows: torch.Tensor) -> dict[tuple, list[int]]:
    """The given batch rows grouped by their atoms' (from_head, relation), as Adjacency.column_front keys
    them: key -> positions in rows."""
    rels = [p.params.rel.index_select(0, rows).tolist() for p in parts]
    groups: dict[tuple, list[int]] = {}
    for i in range(rows.numel()):
        groups.setdefault(tuple((p.from_head, r[i]) for p, r in zip(parts, rels, strict=True)), []).append(i)
    return groups


def _floor_rows(
    state: torch.Tensor, m: Matrix, rows: torch.Tensor, low: torch.Tensor, out: torch.Tensor
) -> None:
    """The stored part of the product for rows whose state is a floor low[b] (its minimum, finite) with
    few entries above it, into out's rows (still -inf there). For such a row, max over stored (s, o) of
    state[s] + V(s, o) is the max of
      * the entries above the floor: their rows' stored entries, gathered (few rows);
      * low + max over s of V(s, o): every s counted at the floor (an entry above it is only undercounted,
        and the first term counts it at its true value). V(s, o) never decreases in any atom's confidence
        (_floor_ready), nor does the sum low + V as the engine computes it (fused multiply-adds of
        betas >= 0, then the alpha tests), so the column maximum is taken on points that cover the
        column's Pareto front of confidences (Adjacency.column_front): a few per column, not the relation.
    Both terms use the stream's arithmetic (low or state[s], then one fused multiply-add per atom in
    order), so each value is that of _dense_rows bit for bit while the work drops from the relation's
    facts per row to its columns plus the rows of the entries above the floor."""
    n = state.shape[1]
    parts = m.parts if isinstance(m, SumMatrix) else [m]
    adj = parts[0].adj
    sub, base = state.index_select(0, rows), low.index_select(0, rows)
    res = torch.full(sub.shape, NEG_INF, dtype=torch.float32, device=state.device)
    params = [(p.params.beta.index_select(0, rows), p.params.alpha.index_select(0, rows)) for p in parts]
    for key, members in _relation_groups(parts, rows).items():
        fo, fc = adj.column_front(key)
        if not fo.numel():
            continue
        at = torch.tensor(members, device=state.device)
        g = base.index_select(0, at)[:, None].expand(len(members), fo.numel()).clone()
        g = _add_atoms(
            g, [(b.index_select(0, at)[:, None], a.index_select(0, at)[:, None]) for b, a in params], fc
        )
        got = torch.full((len(members), n), NEG_INF, dtype=torch.float32, device=state.device)
        got.scatter_reduce_(1, fo.expand(len(members), -1), g, reduce="amax", include_self=True)
        res.index_copy_(0, at, got)
    b, s = torch.nonzero(sub > base[:, None], as_tuple=True)
    if b.numel():
        pair, o, conf = m.confs(rows.index_select(0, b), s)
        bp = b.index_select(0, pair)
        g = sub.reshape(-1).index_select(0, (b * n + s).index_select(0, pair))
        g = _add_atoms(g, [(beta.index_select(0, bp), a.index_select(0, bp)) for beta, a in params], conf)
        res.view(-1).scatter_reduce_(0, bp * n + o, g, reduce="amax", include_self=True)
    out.index_copy_(0, rows, res)


def _add_atoms(
    g: torch.Tensor, params: list[tuple[torch.Tensor, torch.Tensor]], conf: torch.Tensor
) -> torch.Tensor:
    """g + sum_p beta_p * conf[p] with one fused multiply-add per atom in order (as _stream), -inf where
    some conf[p] < alpha_p (compared in float32, as finite_facts); params: (beta, alpha) per atom,
    broadcastable against g, conf (P, ...) against g's trailing shape."""
    keep = None
    for (beta, alpha), c in zip(params, conf, strict=True):
        g.addcmul_(beta, c)
        ok = c >= alpha
        keep = ok if keep is None else keep & ok
    return g.masked_fill_(~keep, NEG_INF)


def _stored_dominate(m: Matrix) -> torch.Tensor:
    """(B,) bool: whether no stored entry of a batch element's matrix is below its default: _monotone
    with every alpha <= 0 (stored confidences are >= 0, so each stored value beta * c passes the alpha
    test and is >= beta * 0, the default; a multi-edge's sums of such terms are >= the sum of defaults).
    Then for every column o the default's term max over s outside o's support of state[s] + d may take
    the max over all s instead: a term state[s] + d with s inside the support is <= state[s] + V(s, o)
    (float addition is monotone), which the stored part already counts. The product's values are
    unchanged, bit for bit, and no column needs the walk of _outside_support."""
    out = _monotone(m)
    for p in m.parts if isinstance(m, SumMatrix) else [m]:
        out = out & (p.params.alpha <= 0)
    return out


def _add_best(state: torch.Tensor, default: torch.Tensor, rows: torch.Tensor, out: torch.Tensor) -> None:
    """out[b, :] = max(out[b, :], default[b] + max(state[b])) in place for the rows where rows (B,) holds."""
    if bool(rows.all()):
        torch.maximum(out, (state.amax(dim=1) + default)[:, None], out=out)
        return
    b = torch.nonzero(rows, as_tuple=True)[0]
    top = state.index_select(0, b).amax(dim=1) + default.index_select(0, b)
    out[b] = torch.maximum(out.index_select(0, b), top[:, None])


def _dense_rows(state: torch.Tensor, m: Matrix, rows: torch.Tensor) -> torch.Tensor | None:
    """(B, N) contiguous: in the given rows, the max over the stored (s, o) of state[row, s] + V(s, o),
    streaming the finite entries of each row's matrix as contiguous arrays; -inf in the other rows (None:
    no stored finite entry at all, every row -inf). Rows are grouped by their atoms' (relation, negated,
    alpha), so the alpha filter (and a multi-edge's union of supports) is built once per group, leaving
    one fused multiply-add per atom and one scatter-max per entry and row."""
    bsz, n = state.shape
    parts = m.parts if isinstance(m, SumMatrix) else [m]
    cols = [
        (p.params.rel[rows].tolist(), p.params.neg[rows].tolist(), p.params.alpha[rows].tolist())
        for p in parts
    ]
    groups: dict[tuple, list[int]] = {}
    for i, b in enumerate(rows.tolist()):
        key = tuple((p.from_head, c[0][i], c[1][i], c[2][i]) for p, c in zip(parts, cols, strict=True))
        groups.setdefault(key, []).append(b)
    out = None
    split: list[tuple[tuple, torch.Tensor, list[torch.Tensor]]] = []  # multi-edge groups without a union
    for key, members in groups.items():
        whole = len(members) == bsz  # one group holds the whole batch: no row copies
        bs = slice(None) if whole else torch.tensor(members, device=state.device)
        betas = [p.params.beta[bs] for p in parts]
        if _SPLIT_MULTI_EDGES and _splittable(key, betas):
            split.append((key, torch.tensor(members, device=state.device), betas))
            continue
        res = _stream(state, bs, betas, *parts[0].adj.finite_facts(key))
        if res is None:
            continue
        if whole:
            return res
        if out is None:
            out = torch.full((bsz, n), NEG_INF, dtype=torch.float32, device=state.device)
        out[bs] = res  # each row is in exactly one group and out is still -inf there
    if split:
        if out is None:
            out = torch.full((bsz, n), NEG_INF, dtype=torch.float32, device=state.device)
        _split_multi_edges(state, split, parts[0].adj, out)
    return out


def _stream(
    state: torch.Tensor,
    bs: slice | torch.Tensor,
    betas: list[torch.Tensor],
    src: torch.Tensor,
    dst: torch.Tensor,
    cc: torch.Tensor,
) -> torch.Tensor | None:
    """(G, N): for the rows bs of state, max over the entries i of state[row, src_i] + sum_p betas[p] *
    cc[p, i] at column dst_i (the parts added in order, one fused multiply-add each); -inf where no entry
    lands. None when there is no entry."""
    if not src.numel():
        return None
    rows = betas[0].numel()
    if compiled_applies(state.device, rows * src.numel()):  # the same values in one compiled loop
        sub = state if isinstance(bs, slice) else state.index_select(0, bs)
        return compiled_stream(sub, betas, src, dst, cc)
    if rows >= _WIDE:
        return _stream_wide(state[bs], betas, src, dst, cc)
    return torch_stream(state if isinstance(bs, slice) else state.index_select(0, bs), betas, src, dst, cc)


def _splittable(key: tuple[tuple[bool, int, bool, float], ...], betas: list[torch.Tensor]) -> bool:
    """Whether a group's multi-edge may skip the union of its supports (see _split_multi_edges): two or
    more atoms, all positive with alpha <= 0 (a missing fact adds exactly 0, nothing is ever -inf), and
    every beta a finite number >= +0 (each atom's term beta * c is then >= +0: adding it never lowers a sum)."""
    if len(key) < 2 or any(neg or alpha > 0 for _, _, neg, alpha in key):
        return False
    return all(bool((torch.isfinite(b) & ~torch.signbit(b)).all()) for b in betas)


def _split_multi_edges(
    state: torch.Tensor,
    groups: list[tuple[tuple[tuple[bool, int, bool, float], ...], torch.Tensor, list[torch.Tensor]]],
    adj: Adjacency,
    out: torch.Tensor,
) -> None:
    """_stream over the union of each group's multi-edge supports, without building any union (5-10M
    entries per relation pair on a CN15k export, 0.25-0.4 s each), into out's rows (still -inf there).
    groups: (atoms, rows, betas) per group, every one _splittable. For atoms that are positive at
    alpha <= 0 with betas >= +0, V(s, o) = sum_p beta_p c_p(s, o) with c_p = 0 off p's facts, and
      * on an entry stored in relation p alone, the union path's value x(s) + 0 + ... + beta_p c_p + ... + 0
        is bit for bit x(s) + beta_p c_p (adding +0 is exact; the fused multiply-add of a 0 term returns
        the sum unchanged): relation p's own stream;
      * on an entry stored in several, the single relations' terms are <= the full sum (float addition of
        a term >= +0 never decreases, and x + t is monotone in t): counting them too changes no maximum;
      * the full sum on the entries stored in >= 2 relations (adjacency.shared_facts, memoised) is computed
        by the same fused multiply-adds in the same part order as the union path.
    The max of these maxima is the union path's max, value for value. A relation's own stream serves the
    rows of every group that holds it at once (each relation read once per batch, not once per pair).
    Values only: maxplus computes them without autograd, and _attach_grad routes gradients from them
    unchanged (never through this path)."""
    n = state.shape[1]
    alone: dict[tuple, list[tuple[torch.Tensor, torch.Tensor]]] = {}  # atom -> (rows, betas) needing it
    for key, rows, betas in groups:
        for atom, beta in zip(key, betas, strict=True):
            alone.setdefault(atom, []).append((rows, beta))
    jobs = [
        (torch.cat([r for r, _ in got]), [torch.cat([b for _, b in got])], (atom,))
        for atom, got in alone.items()
    ]
    jobs += [(rows, betas, key) for key, rows, betas in groups]
    for rows, betas, atoms in jobs:  # the arrays of one job at a time (shared entries are built lazily)
        if len(atoms) == 1:
            facts = adj.finite_facts(atoms)  # a slice of the index
        else:
            facts = adj.shared_facts(tuple((p[0], p[1]) for p in atoms))
        res = _stream(state, rows, betas, *facts)
        if res is not None:  # a row may come twice (one relation in two atoms): a max, not a copy
            out.scatter_reduce_(0, rows[:, None].expand(-1, n), res, reduce="amax", include_self=True)


def _stream_wide(
    state: torch.Tensor, betas: list[torch.Tensor], src: torch.Tensor, dst: torch.Tensor, cc: torch.Tensor
) -> torch.Tensor:
    """(B, N) contiguous: max over entries i of state[:, src_i] + sum_p betas[p] * cc[p, i] at column
    dst_i, for many rows at once. Works on the transposed state (N, B) so every entry moves one contiguous
    run of B floats, in blocks small enough for the cache (entries sorted by dst keep the scatter's writes
    local)."""
    bsz, n = state.shape
    st = state.t().clone(memory_format=torch.contiguous_format)  # always a copy: its buffer is reused below
    out = torch.full((n, bsz), NEG_INF, dtype=torch.float32, device=state.device)
    block = max(256, _WIDE_BLOCK // bsz)
    for lo in range(0, src.numel(), block):
        g = st.index_select(0, src[lo : lo + block])
        for beta, w in zip(betas, cc, strict=True):
            g.addcmul_(w[lo : lo + block, None], beta[None, :])
        # scatter indices must be int64 on some paths; converting a block costs little next to its gather
        out.scatter_reduce_(
            0, dst[lo : lo + block, None].long().expand(-1, bsz), g, reduce="amax", include_self=True
        )
    # The transposed state is dead: its buffer (already paged in) takes the result back in (B, N) layout.
    # A fresh (B, N) buffer costs ~1 us of page fault per 4 KiB, and a transposed view is slow to add to.
    return st.view(bsz, n).copy_(out.t())


def _outside_support(
    state: torch.Tensor, sel: torch.Tensor, m: Matrix
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each selected row of state (S, N), max over s with (s, o) not stored, in compressed form:
    top (S,) the row's best entry, right for every column except the pairs (pb, po) (P,) whose column
    support holds that entry; pv (P,) the exact value there, found by walking the row's next best entries."""
    n = state.shape[1]
    k = min(_TOPK, n)
    vals, idx = torch.topk(state, k, dim=1)
    pair, o, _ = m.rows(sel, idx[:, 0])  # the best entry's row: the columns it is stored in
    keep = torch.isfinite(vals[pair, 0])  # a row all -inf: nothing better exists
    pb, po = pair[keep], o[keep]
    pv = torch.empty(pb.shape, dtype=state.dtype, device=state.device)
    act = torch.arange(pb.numel(), device=state.device)  # pairs still walking
    j = 1
    while act.numel():
        b, c = pb[act], po[act]
        if j > _WALK:  # columns holding many top entries (hubs): finish them exactly, column by column
            pv[act] = _max_off_column(state, sel, b, c, m)
            break
        if j >= k:  # the walk outgrew the fetched top entries: fetch more
            vals, idx = _extend(state, vals, idx, min(4 * k, n))
            k = vals.shape[1]
        if j >= n:  # every s is in the support: only stored entries exist in this column
            pv[act] = NEG_INF
            break
        v = vals[b, j]
        pv[act] = v
        act = act[torch.isfinite(v) & m.contains(sel[b], idx[b, j], c)]
        j += 1
    return vals[:, 0], pb, po, pv


def _max_off_column(
    state: torch.Tensor, sel: torch.Tensor, pb: torch.Tensor, po: torch.Tensor, m: Matrix
) -> torch.Tensor:
    """(P,): for pairs (row pb, column po), max of state[pb] over s with (s, po) not stored. That is the
    entry of row pb's best-first order at the smallest position no member of column po's support holds
    (the mex of the support's positions): each involved row is sorted once and each pair reads only its
    column's support (hub columns hold thousands of a row's top entries; no copy of a row per pair)."""
    n = state.shape[1]
    dev = state.device
    rows, inv = torch.unique(pb, return_inverse=True)
    vals, order = torch.sort(state.index_select(0, rows), dim=1, descending=True)
    pos = torch.empty_like(order)
    pos.scatter_(1, order, torch.arange(n, device=dev).expand_as(order))  # position of s in its row's order
    pair, s = m.column(sel[pb], po)  # a multi-edge's parts may list an s twice (harmless below)
    p = pos.view(-1).index_select(0, inv.index_select(0, pair) * n + s)  # flat gathers: ~4x faster
    # The mex of a pair is at most its support's size: only positions below the largest size + 1 matter,
    # marked in a (pairs x width) table whose first free cell per row is the mex (chunked by pairs).
    width = min(n, int(torch.bincount(pair, minlength=pb.numel()).max()) + 1) if pair.numel() else 1
    keep = p < width
    pair, p = pair[keep], p[keep]
    mex = torch.empty(pb.numel(), dtype=torch.int64, device=dev)
    step = max(1, (1 << 24) // width)
    for lo in range(0, pb.numel(), step):
        hi = min(lo + step, pb.numel())
        inside = (pair >= lo) & (pair < hi)
        taken = torch.zeros((hi - lo, width), dtype=torch.bool, device=dev)
        taken.view(-1)[(pair[inside] - lo) * width + p[inside]] = True
        free = ~taken
        mex[lo:hi] = torch.where(free.any(1), free.to(torch.uint8).argmax(1), n)  # argmax: the first free
    got = vals[inv, mex.clamp(max=n - 1)]
    return torch.where(mex < n, got, torch.full_like(got, NEG_INF))


def _extend(
    state: torch.Tensor, vals: torch.Tensor, idx: torch.Tensor, k_new: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lengthen each row's best-first list (vals, idx) (S, k) to (S, k_new) without reordering its prefix.
    topk may order tied values differently from one call to the next, so the new entries are those of a
    larger topk not already listed, in order: the walk then never repeats nor skips an entity."""
    k = idx.shape[1]
    v2, i2 = torch.topk(state, k_new, dim=1)
    listed = torch.zeros(state.shape, dtype=torch.bool, device=state.device)
    listed.scatter_(1, idx, True)
    dup = listed.gather(1, i2)
    order = torch.sort(dup.to(torch.int8), dim=1, stable=True).indices[:, : k_new - k]  # unlisted first
    return torch.cat([vals, v2.gather(1, order)], 1), torch.cat([idx, i2.gather(1, order)], 1)
