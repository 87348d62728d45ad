"""The compiled loops of pipeline.engine.kernels (imported only there: importing this module imports
numba): the stream (its runs reduced in vector registers by the _run intrinsics), the sparse rows of one
atom (rows_max) and the merge of two sorted key arrays (merge_two). Module level so that numba can cache
the compiled code on disk."""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from pipeline.engine._numba_cache import checked


@intrinsic
def fma32(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
    """a * b + c rounded once (llvm.fma.f32), as torch's addcmul_ computes it on the CPU."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32, f32, f32]))
        return builder.call(fn, args)

    return sig, codegen


LANES = 8  # rows per vector of the compiled stream: its state and betas are padded to a multiple of this


@numba.njit(inline="always")
def _amax(cur: Any, x: Any) -> Any:  # pragma: no cover - compiled
    """max as torch's amax computes it: the larger value; a NaN wins and stays (branch-free selects)."""
    return cur if cur != cur else (x if (x > cur or x != x) else cur)


@numba.njit(inline="always")
def _run_end(dst: Any, i: int, n: int) -> int:  # pragma: no cover - compiled
    """The end of the run of entries from i on with dst[i]'s column."""
    j = i + 1
    while j < n and dst[j] == dst[i]:
        j += 1
    return j


def _run(atoms: int, unroll: int = 2) -> Any:
    """An intrinsic run(st, src, cc, beta, out, i, j, o, blk, left): the entries i..j-1 (one run of column
    o) for the rows blk .. blk + vectors * LANES - 1, vectors = min(left, 4) (a switch among four
    loops, each with its vectors of LANES rows held in registers):

        out[o, b] = max(out[o, b], max over k of fma(cc[atoms-1, k], beta[atoms-1, b], ... fma(cc[0, k], beta[0, b], st[src[k], b])))

    written as LLVM vector code, because numba's loops leave the rows scalar: per entry one load of
    src[k] and of each atom's confidence, one vector load of st's row per vector, one fused
    multiply-add per atom and vector (llvm.fma: torch's addcmul_ rounding, in atom order) and one
    compare-and-select into the accumulator. ``unroll`` entries at a time into as many accumulators
    (independent chains of maxima), maxed together at the end of the run. A NaN never wins a select:
    each lane records whether it saw one (or out held one) and ends NaN, as amax's rule; other ties
    (signed zeros) may keep either zero, as the stream's accumulators always could. st, out, beta:
    2-D float32 with any strides (the rows of a vector contiguous: C order); src: 1-D int32 or int64."""

    @intrinsic
    def run(
        typingctx: Any, st: Any, src: Any, cc: Any, beta: Any, out: Any, i: Any, j: Any, o: Any, blk: Any, left: Any
    ) -> Any:
        sig = types.void(st, src, cc, beta, out, i, j, o, blk, left)

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            f32, i64, i8p = ir.FloatType(), ir.IntType(64), ir.IntType(8).as_pointer()
            vec, mask = ir.VectorType(f32, LANES), ir.VectorType(ir.IntType(1), LANES)
            kinds = signature.args
            st_a, src_a, cc_a, beta_a, out_a = (
                context.make_array(kinds[n])(context, builder, args[n]) for n in range(5)
            )
            first, last, col, row0, left = (context.cast(builder, args[n], kinds[n], types.int64) for n in range(5, 10))

            def at(a: Any, r: Any, c: Any) -> Any:  # the byte address of a[r, c] (strides are in bytes)
                s0, s1 = cgutils.unpack_tuple(builder, a.strides, 2)
                off = builder.add(builder.mul(r, s0), builder.mul(c, s1))
                return builder.gep(builder.bitcast(a.data, i8p), [off])

            def load_vec(p: Any) -> Any:
                return builder.load(builder.bitcast(p, vec.as_pointer()), align=4)

            def splat(x: Any) -> Any:
                one = builder.insert_element(ir.Constant(vec, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
                zeros = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
                return builder.shuffle_vector(one, ir.Constant(vec, ir.Undefined), zeros)

            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.v{LANES}f32"
            )
            (src_step,) = cgutils.unpack_tuple(builder, src_a.strides, 1)
            src_ty = kinds[1].dtype
            src_ptr = context.get_value_type(src_ty).as_pointer()

            def bigger(acc: Any, x: Any) -> Any:  # x > acc ? x : acc, lane by lane (a NaN x never wins)
                return builder.select(builder.fcmp_ordered(">", x, acc), x, acc)

            def nan_seen(seen: Any, x: Any) -> Any:
                return builder.or_(seen, builder.fcmp_unordered("uno", x, x))

            def emit(vectors: int) -> None:  # one loop over the run for `vectors` vectors of rows
                rows = [builder.add(row0, ir.Constant(i64, LANES * v)) for v in range(vectors)]
                betas = [[load_vec(at(beta_a, ir.Constant(i64, p), r)) for p in range(atoms)] for r in rows]

                def entry(k: Any) -> list:  # entry k's value, one vector per block of rows
                    sp = builder.gep(builder.bitcast(src_a.data, i8p), [builder.mul(k, src_step)])
                    s = context.cast(builder, builder.load(builder.bitcast(sp, src_ptr)), src_ty, types.int64)
                    cs = [
                        splat(builder.load(builder.bitcast(at(cc_a, ir.Constant(i64, p), k), f32.as_pointer())))
                        for p in range(atoms)
                    ]
                    got = []
                    for v in range(vectors):
                        x = load_vec(at(st_a, s, rows[v]))
                        for p in range(atoms):
                            x = builder.call(fma, [cs[p], betas[v][p], x])
                        got.append(x)
                    return got

                outs = [builder.bitcast(at(out_a, col, r), vec.as_pointer()) for r in rows]
                start = [builder.load(p, align=4) for p in outs]
                start_nan = [nan_seen(ir.Constant(mask, [0] * LANES), x) for x in start]
                low = ir.Constant(vec, [float("-inf")] * LANES)
                pre = builder.basic_block
                head, body = builder.append_basic_block("run.head"), builder.append_basic_block("run.body")
                tail_head, tail_body = builder.append_basic_block("run.tail"), builder.append_basic_block("run.tail.body")
                done = builder.append_basic_block("run.done")
                builder.branch(head)

                builder.position_at_end(head)  # `unroll` entries at a time
                k = builder.phi(i64)
                k.add_incoming(first, pre)
                accs = [[builder.phi(vec) for _ in range(vectors)] for _ in range(unroll)]
                seen = [builder.phi(mask) for _ in range(vectors)]
                for v in range(vectors):
                    accs[0][v].add_incoming(start[v], pre)
                    for u in range(1, unroll):
                        accs[u][v].add_incoming(low, pre)
                    seen[v].add_incoming(start_nan[v], pre)
                builder.cbranch(builder.icmp_signed("<=", builder.add(k, ir.Constant(i64, unroll)), last), body, tail_head)
                builder.position_at_end(body)
                now = list(seen)
                for u in range(unroll):
                    xs = entry(builder.add(k, ir.Constant(i64, u)))
                    for v in range(vectors):
                        accs[u][v].add_incoming(bigger(accs[u][v], xs[v]), body)
                        now[v] = nan_seen(now[v], xs[v])
                k.add_incoming(builder.add(k, ir.Constant(i64, unroll)), body)
                for v in range(vectors):
                    seen[v].add_incoming(now[v], body)
                builder.branch(head)

                builder.position_at_end(tail_head)  # the run's last entries, one at a time
                k2 = builder.phi(i64)
                k2.add_incoming(k, head)
                acc2 = [builder.phi(vec) for _ in range(vectors)]
                seen2 = [builder.phi(mask) for _ in range(vectors)]
                for v in range(vectors):
                    acc2[v].add_incoming(accs[0][v], head)
                    seen2[v].add_incoming(seen[v], head)
                builder.cbranch(builder.icmp_signed("<", k2, last), tail_body, done)
                builder.position_at_end(tail_body)
                xs = entry(k2)
                k2.add_incoming(builder.add(k2, ir.Constant(i64, 1)), tail_body)
                for v in range(vectors):
                    acc2[v].add_incoming(bigger(acc2[v], xs[v]), tail_body)
                    seen2[v].add_incoming(nan_seen(seen2[v], xs[v]), tail_body)
                builder.branch(tail_head)

                builder.position_at_end(done)
                nan = ir.Constant(vec, [float("nan")] * LANES)
                for v in range(vectors):
                    res = acc2[v]
                    for u in range(1, unroll):
                        res = bigger(res, accs[u][v])
                    builder.store(builder.select(seen2[v], nan, res), outs[v], align=4)

            # vectors = min(left, 4): one loop each, chosen by a switch, all leaving through one block
            exit_block = builder.append_basic_block("run.exit")
            cases = [builder.append_basic_block(f"run.v{v}") for v in (1, 2, 3, 4)]
            choice = builder.switch(left, cases[3])  # 4 and more: four vectors
            for v in (1, 2, 3):
                choice.add_case(ir.Constant(i64, v), cases[v - 1])
            for v, case in zip((1, 2, 3, 4), cases, strict=True):
                builder.position_at_end(case)
                emit(v)
                builder.branch(exit_block)
            builder.position_at_end(exit_block)
            return context.get_dummy_value()

        return sig, codegen

    return run


# one intrinsic per atom count: numba inlines each where it is called
_run_one, _run_two = _run(1), _run(2)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def stream(st: Any, src: Any, dst: Any, cc: Any, beta: Any, out: Any) -> None:  # pragma: no cover - compiled
    """out[dst_i, b] = max(out[dst_i, b], st[src_i, b] + sum_p beta[p, b] * cc[p, i]) for every entry i
    and row b (kernels.stream_max): st, out (N, W) float32; src, dst (F,) int32|int64; cc (P, F) and
    beta (P, W) float32. Each run of entries with one dst (the engine's arrays are sorted by dst) is
    reduced apart from out, in registers: with one or two atoms and W a multiple of LANES (the engine's
    padded_width), up to four vectors of LANES rows per pass over the run (_run); otherwise a plain
    loop. Correct for any order of dst (runs are then shorter)."""
    n_atoms, width = beta.shape
    n = src.shape[0]
    if n_atoms <= 2 and width % LANES == 0:
        i = 0
        while i < n:
            o, j = dst[i], _run_end(dst, i, n)
            blk = 0
            while blk < width:
                left = (width - blk) // LANES
                if n_atoms == 1:
                    _run_one(st, src, cc, beta, out, i, j, o, blk, left)
                else:
                    _run_two(st, src, cc, beta, out, i, j, o, blk, left)
                blk += LANES * min(left, 4)
            i = j
        return
    for i in range(n):  # rare (a three-atom multi-edge): one entry at a time
        s, o = src[i], dst[i]
        for b in range(width):
            v = st[s, b]
            for p in range(n_atoms):
                v = fma32(cc[p, i], beta[p, b], v)
            out[o, b] = _amax(out[o, b], v)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def merge_two(a: Any, b: Any, pos_a: Any, pos_b: Any) -> int:  # pragma: no cover - compiled
    """The keys present in both of two ascending, duplicate-free arrays a and b, by one two-pointer pass:
    writes each shared key's position in a and in b into pos_a, pos_b (room for min(len) entries, in
    ascending key order) and returns how many there are (kernels.shared_two)."""
    i = j = k = 0
    na, nb = a.shape[0], b.shape[0]
    while i < na and j < nb:
        x, y = a[i], b[j]
        if x < y:
            i += 1
        elif y < x:
            j += 1
        else:
            pos_a[k] = i
            pos_b[k] = j
            k += 1
            i += 1
            j += 1
    return k


@numba.njit(cache=True, nogil=True, boundscheck=False)
def rows_max(
    state: Any, b: Any, s: Any, rel: Any, alpha: Any, beta: Any, neg: Any, ptr: Any, dst: Any, conf: Any, n: int, out: Any
) -> None:  # pragma: no cover - compiled
    """The stored part of a max-plus step for the sparse rows of one atom (kernels.rows_max): for each
    finite state entry (b[i], s[i]), each fact (o, c) of row (rel[b], s) of the orientation (ptr, dst,
    conf) gives state[b, s] + value(c) at out[b, o], maxed in (amax's rule: a NaN wins), where value(c)
    is beta * cc if cc >= alpha else -inf, cc = 1 - c for a negated atom: each operation in float32,
    as atoms.AtomParams.value and maxplus._values compute them in torch (no fused multiply-add)."""
    one = np.float32(1.0)
    low = np.float32(-np.inf)
    for i in range(b.shape[0]):
        row, col = b[i], s[i]
        x = state[row, col]
        a, w, negated = alpha[row], beta[row], neg[row]
        k = rel[row] * n + col
        for p in range(ptr[k], ptr[k + 1]):
            c = conf[p]
            cc = one - c if negated else c
            v = w * cc if cc >= a else low
            o = dst[p]
            out[row, o] = _amax(out[row, o], x + v)


@numba.njit(inline="always")
def _value(c: Any, a: Any, w: Any, negated: Any) -> Any:  # pragma: no cover - compiled
    """An atom's value of confidence c (AtomParams.value in float32): beta * cc if cc >= alpha else -inf."""
    cc = np.float32(1.0) - c if negated else c
    return w * cc if cc >= a else np.float32(-np.inf)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def rows_max_two(
    state: Any, b: Any, s: Any,
    rel_a: Any, alpha_a: Any, beta_a: Any, neg_a: Any, ptr_a: Any, dst_a: Any, conf_a: Any,
    rel_b: Any, alpha_b: Any, beta_b: Any, neg_b: Any, ptr_b: Any, dst_b: Any, conf_b: Any,
    n: int, out: Any,
) -> None:  # pragma: no cover - compiled
    """The stored part of a max-plus step for the sparse rows of a two-atom multi-edge whose rows need a
    fact of both atoms (kernels.rows_max_two, SumMatrix.finite_rows): for each finite state entry (b[i],
    s[i]), the columns o stored in row (rel_a[b], s) of the first orientation (ptr_a, dst_a, conf_a) and
    in row (rel_b[b], s) of the second, each row sorted by o, met by one two-pointer pass; where both
    values are finite, state[b, s] + (value_a + value_b) is maxed into out[b, o] (amax's rule). Each
    operation in float32, in the order of the torch form."""
    for i in range(b.shape[0]):
        row, col = b[i], s[i]
        x = state[row, col]
        aa, wa, na_ = alpha_a[row], beta_a[row], neg_a[row]
        ab, wb, nb_ = alpha_b[row], beta_b[row], neg_b[row]
        ka, kb = rel_a[row] * n + col, rel_b[row] * n + col
        p, pend = ptr_a[ka], ptr_a[ka + 1]
        q, qend = ptr_b[kb], ptr_b[kb + 1]
        while p < pend and q < qend:
            oa, ob = dst_a[p], dst_b[q]
            if oa < ob:
                p += 1
            elif ob < oa:
                q += 1
            else:
                va = _value(conf_a[p], aa, wa, na_)
                vb = _value(conf_b[q], ab, wb, nb_)
                # finite values only, as the torch form keeps (a NaN or an infinity drops the entry)
                if va > -np.inf and va < np.inf and vb > -np.inf and vb < np.inf:
                    out[row, oa] = _amax(out[row, oa], x + (va + vb))
                p += 1
                q += 1


stream = checked(stream)  # its disk cache sealed with CRC-32s: a damaged file means a fresh compilation
merge_two = checked(merge_two)
rows_max = checked(rows_max)
rows_max_two = checked(rows_max_two)
