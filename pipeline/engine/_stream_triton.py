"""The fused stream on a CUDA GPU (pipeline.engine.kernels; imported only there: importing this module
imports triton).

One kernel does what the torch form does in three passes over a (rows x entries) temporary (gather,
addcmul_, scatter amax): a program takes a tile of BLOCK_E entries and BLOCK_B rows, gathers st[src_i, b], adds each atom's term with a fused multiply-add (tl.fma: the rounding of
torch's addcmul_ and of the CPU's compiled loop), and maxes the values into out[dst_i, b].

Exact and order-free: a max is the same whatever order it is taken in, so the atomics' order changes no
value. triton's float atomic max works on the bits (signed max for a value without its sign bit,
unsigned min for one with it), right for every float but NaN; a NaN term is therefore flagged aside
and written at the end (torch's amax keeps a NaN). With SEGMENTED, each tile first takes the max of
every run of equal dst (the engine's entries are sorted by dst: a CN15k relation holds ~300 entries per
column) by a segmented scan, so one atomic per run and row reaches memory instead of one per entry;
without it every entry's value goes to an atomic (right for any order).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _seg_max(k1, v1, k2, v2):  # pragma: no cover - compiled
    """The combine of a segmented max scan over (key, value): a new key starts a new run."""
    return k2, tl.where(k1 == k2, tl.maximum(v1, v2), v2)


# Sizes and the index slices' alignment are not specialised on: each new value would compile the kernel
# again (~1 s), and a batch meets many (a fresh process then spent more time compiling than answering).
@triton.jit(do_not_specialize=["n_ent", "bsz"], do_not_specialize_on_alignment=["src", "dst", "cc"])
def _stream_kernel(  # pragma: no cover - compiled
    st,
    src,
    dst,
    cc,
    beta,
    out,
    nan,
    n_ent,
    bsz,
    P: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_B: tl.constexpr,
    SEGMENTED: tl.constexpr,
):
    e = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)
    em = e < n_ent
    s = tl.load(src + e, mask=em, other=0).to(tl.int64)
    o = tl.load(dst + e, mask=em, other=0).to(tl.int64)
    if SEGMENTED:  # an entry ends its run where the next one in the tile has another dst
        nxt = tl.load(dst + e + 1, mask=e + 1 < n_ent, other=-1).to(tl.int64)
        last = (tl.arange(0, BLOCK_E) == BLOCK_E - 1) | (nxt != o)
    b = tl.program_id(1) * BLOCK_B + tl.arange(0, BLOCK_B)
    bm = b < bsz
    m = em[:, None] & bm[None, :]
    x = tl.load(st + s[:, None] * bsz + b[None, :], mask=m, other=0.0)
    for p in tl.static_range(P):
        c = tl.load(cc + p * n_ent + e, mask=em, other=0.0)
        w = tl.load(beta + p * bsz + b, mask=bm, other=0.0)
        x = tl.fma(c[:, None], w[None, :], x)
    bad = x != x
    at = o[:, None] * bsz + b[None, :]
    tl.store(nan + at, 1, mask=m & bad)
    if SEGMENTED:
        x = tl.where(bad | ~m, float("-inf"), x)
        keys = tl.broadcast_to(o[:, None], (BLOCK_E, BLOCK_B))
        _, x = tl.associative_scan((keys, x), 0, _seg_max)
        tl.atomic_max(out + at, x, mask=m & last[:, None], sem="relaxed")
    else:
        tl.atomic_max(out + at, x, mask=m & ~bad, sem="relaxed")


def stream_max(
    state: torch.Tensor,
    betas: list[torch.Tensor],
    src: torch.Tensor,
    dst: torch.Tensor,
    cc: torch.Tensor,
    segmented: bool | None = None,
) -> torch.Tensor:
    """(B, N) on state's CUDA device: kernels.stream_max's values (state (B, N); betas P tensors (B,);
    src, dst (F,) int32|int64; cc (P, F)), by one fused kernel. segmented: force the segmented
    pre-reduction on or off (default: by the number of rows, see _shape)."""
    bsz, n = state.shape
    f = src.numel()
    st = state.t().contiguous()  # (N, B): an entry reads one run of B floats
    beta = torch.stack([b.to(torch.float32) for b in betas]).contiguous()
    conf = cc.detach().to(torch.float32).contiguous()
    out = torch.full((n, bsz), float("-inf"), dtype=torch.float32, device=state.device)
    nan = torch.zeros((n, bsz), dtype=torch.int8, device=state.device)
    block_b, block_e, seg = _shape(bsz)
    grid = (triton.cdiv(f, block_e), triton.cdiv(bsz, block_b))
    _stream_kernel[grid](
        st,
        _int32(src),
        _int32(dst),
        conf,
        beta,
        out,
        nan,
        f,
        bsz,
        P=len(betas),
        BLOCK_E=block_e,
        BLOCK_B=block_b,
        SEGMENTED=seg if segmented is None else segmented,
    )
    out.masked_fill_(nan.bool(), float("nan"))
    return out.t().contiguous()


def _shape(rows: int) -> tuple[int, int, bool]:
    """(BLOCK_B, BLOCK_E, SEGMENTED) for a step of `rows` rows: three shapes only (each compiles once).
    On an H200 (5M entries sorted by column, python -m benchmarks run kernels --device cuda) the segmented
    pre-reduction is 1.5-1.8x faster with one row and even with 8, and 5-15% slower from 36 rows on,
    where each entry's atomics are spread over many rows already."""
    if rows == 1:
        return 1, 2048, True
    if rows <= 8:
        return 8, 256, True
    return 64, 32, False


def _int32(idx: torch.Tensor) -> torch.Tensor:
    """Entity ids as contiguous int32 (the engine's index already is; shared entries' ids may be int64):
    one index type, so one compiled kernel per shape."""
    return (idx if idx.dtype == torch.int32 else idx.to(torch.int32)).contiguous()
