"""SRC's max-plus search (design section 2): utility vectors of soft queries on one graph, exactly.

A conjunction is planned from its query graph: constant atoms become scalars, anchor atoms and self-loops
fold into their variable's state, multi-edges are summed, and each tree component is eliminated leaf by
leaf towards its root (?y, or any variable for a component without ?y, which then contributes its best
value as a scalar). A cycle is broken by enumerating the finite candidates of one of its variables as
constants. DNF: element-wise max over conjunctions. Conjunctions of one shape (same structure, any ids,
alphas, betas, negations) run as one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.core.config import env_number
from pipeline.core.errors import PipelineError
from pipeline.core.kg import GraphTensors
from pipeline.core.progress import output
from pipeline.engine.adjacency import Adjacency, as_adjacency
from pipeline.engine.atoms import (
    NEG_INF,
    AtomParams,
    RelationMatrix,
    SumMatrix,
    constant_value,
    fold_anchor,
    fold_diagonal,
)
from pipeline.engine.maxplus import maxplus
from pipeline.softquery.graph import QueryGraph
from pipeline.softquery.model import FREE, TOP_K, Atom, Conjunction, Const, Query, Var
from pipeline.softquery.types import conjunction_shape

MAX_BATCH = 256  # conjunctions per batched computation: bounds memory at a few (B, N) float32 states
# An exact answer of a query with cycles enumerates, nested, the candidates of one variable per cycle: the
# product of their counts (its cycle work) is what made a 5-variable, 15-atom cycle run for hours on a
# 200-entity graph (~0.2 ms a substitution batched, 1.5-6 ms nested: 10^4 took 15 s).
# Above this bound a query without --cycle-cap is refused, saying how to bound it; PIPELINE_CYCLE_WORK
# raises the bound (an exact answer over more, taking its time).
CYCLE_WORK_ENV = "PIPELINE_CYCLE_WORK"
DEFAULT_CYCLE_WORK = 50_000


class CycleWorkExceeded(PipelineError):
    """A query's cycles need more candidate substitutions than the bound (CYCLE_WORK_ENV) and no cap
    was given."""


def cycle_work_limit() -> int:
    """PIPELINE_CYCLE_WORK when set (an integer >= 1), else DEFAULT_CYCLE_WORK."""
    return env_number(CYCLE_WORK_ENV, DEFAULT_CYCLE_WORK, int, lambda v: v >= 1,
                      "a whole number of substitutions >= 1")


@dataclass(frozen=True)
class SearchResult:
    """utility: (B, N) float32, -inf = the query fails for that entity; approximate: (B,) bool, True where
    a cycle cap skipped candidates (the utility is then a lower bound)."""

    utility: torch.Tensor
    approximate: torch.Tensor


def search_query(query: Query, graph: GraphTensors | Adjacency, cycle_cap: int | None = None) -> torch.Tensor:
    """(n_entities,) float32 utility vector of query on graph (-inf = fails). Exact unless cycle_cap."""
    return solve([query], graph, cycle_cap).utility[0]


def search_batch(
    queries: Sequence[Query],
    graph: GraphTensors | Adjacency,
    cycle_cap: int | None = None,
    progress: bool = False,
    need: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, n_entities) float32 utility vectors of B queries (any mix of shapes) on graph. need: see solve."""
    return solve(queries, graph, cycle_cap, progress, need).utility


def solve(
    queries: Sequence[Query],
    graph: GraphTensors | Adjacency,
    cycle_cap: int | None = None,
    progress: bool = False,
    need: torch.Tensor | None = None,
) -> SearchResult:
    """Utilities and approximation flags of B queries. cycle_cap: at most this many candidates per
    enumerated cycle variable (None = all, exact). need: (B, n_entities) bool, under autograd only: the
    utilities whose gradient the caller reads (calibration L's loss reads each query's answers and a few
    sampled entities); the values are the same, but the last max-plus product of a query routes the
    gradients of those cells alone (the others must then have a zero gradient: a loss that never reads
    them). None: every cell."""
    adj = as_adjacency(graph)
    n = adj.n_entities
    for q in queries:
        _check_ids(q, adj)
    groups: dict[tuple, list[tuple[int, Conjunction]]] = {}
    for qi, q in enumerate(queries):
        for c in q.conjunctions:
            groups.setdefault(shape_of(c), []).append((qi, c))
    if cycle_cap is None:
        _check_cycle_work(queries, groups, adj)
    out = torch.full((len(queries), n), NEG_INF, dtype=torch.float32, device=adj.device)
    approx = torch.zeros(len(queries), dtype=torch.int32, device=adj.device)
    chunks = [items[i : i + MAX_BATCH] for items in groups.values() for i in range(0, len(items), MAX_BATCH)]
    graded: list[tuple[torch.Tensor, torch.Tensor]] = []  # (flat index, utilities) that carry a gradient
    written: set[int] = set()  # queries whose row of out holds a result already
    # an inner bar (a search runs inside a stage's bar): leave=False, closed with its loop
    with output(progress).bar(chunks, desc="search", unit="batch", leave=False) as bar:
        for chunk in bar:
            qis = [qi for qi, _ in chunk]
            idx = torch.tensor(qis, device=adj.device)
            rows = None if need is None else need.index_select(0, idx)
            util, ap = _conjunctions([c for _, c in chunk], adj, cycle_cap, need=rows)
            if util.requires_grad:  # in place twice would break autograd: one out-of-place scatter below
                flat = (idx[:, None] * n + torch.arange(n, device=adj.device)).reshape(-1)
                graded.append((flat, util.reshape(-1)))
            else:
                _max_into(out, qis, util, written)
            approx.index_add_(0, idx, ap.to(torch.int32))
    if graded:
        flat = torch.cat([f for f, _ in graded])
        vals = torch.cat([u for _, u in graded])
        out = out.view(-1).scatter_reduce(0, flat, vals, reduce="amax", include_self=True).view(out.shape)
    return SearchResult(out, approx > 0)


def cycle_work(conj: Conjunction, adj: Adjacency, cycle_cap: int | None = None) -> int:
    """An upper bound of the substitutions an exact answer of ``conj`` enumerates (1 without a cycle): the
    product, over the variables the search enumerates one cycle at a time, of their candidate counts on
    ``conj`` itself (a substitution only narrows them), each at most ``cycle_cap``. Which variable is
    enumerated depends on the shape only, so the plan is followed with a stand-in constant."""
    work, c = 1, conj
    while QueryGraph(c).has_cycle:
        v = QueryGraph(c).cycle_variables()[0]
        n = int(_candidates(conj, v, adj).numel())
        work *= min(n, cycle_cap) if cycle_cap is not None else n
        if work == 0:
            return 0
        c = _substitute(c, v, 0)
    return work


def _check_cycle_work(
    queries: Sequence[Query], groups: dict[tuple, list[tuple[int, Conjunction]]], adj: Adjacency
) -> None:
    """CycleWorkExceeded for the first conjunction (of queries[qi]) whose cycle work is over the bound.
    groups: the conjunctions by shape (:func:`shape_of`), whose first member tells whether the shape has a
    cycle: a cycle is among variables, which the shape keeps (a tree shape's conjunctions cost nothing here:
    building each one's graph cost 3-4 ms per 100 one-atom queries, more than answering them)."""
    limit = None
    for members in groups.values():
        if not QueryGraph(members[0][1]).has_cycle:
            continue
        for qi, c in members:
            limit = cycle_work_limit() if limit is None else limit
            work = cycle_work(c, adj)
            if work > limit:
                from pipeline.softquery.printer import to_text

                text = to_text(queries[qi])
                raise CycleWorkExceeded(
                    f"the query {text if len(text) <= 100 else text[:97] + '...'}: its cycles need up to "
                    f"{work:,} candidate substitutions, more than the bound of {limit:,} (an exact answer could "
                    f"take hours): give --cycle-cap K (at most K candidates per cycle variable; utilities are "
                    f"then lower bounds), or raise {CYCLE_WORK_ENV} for the exact answer"
                )


def _max_into(out: torch.Tensor, qis: list[int], util: torch.Tensor, written: set[int]) -> None:
    """out[qis[i]] = max(out[qis[i]], util[i]) for rows util (B, N), in place; written: the rows of out
    set so far (updated). Whole-row copies in rounds of distinct queries (several conjunctions of one
    query repeat its index), no (B * N) index as a scatter would need."""
    rounds: list[list[int]] = []  # round k: the positions holding a query's (k+1)-th conjunction
    seen: dict[int, int] = {}
    for pos, qi in enumerate(qis):
        k = seen[qi] = seen.get(qi, -1) + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(pos)
    for positions in rounds:
        ids = [qis[p] for p in positions]
        idx = torch.tensor(ids, device=out.device)
        rows = util if len(positions) == len(qis) else util[torch.tensor(positions, device=out.device)]
        if not written.isdisjoint(ids):
            rows = torch.maximum(out.index_select(0, idx), rows)
        out.index_copy_(0, idx, rows)
        written.update(ids)


def top_answers(utility: torch.Tensor, k: int = TOP_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The answers of a utility vector (N,): entity ids (K,) int64 and utilities (K,) float32 of the entities
    with finite u > 0, best first, ties by entity id, at most k."""
    ok = torch.nonzero(torch.isfinite(utility) & (utility > 0), as_tuple=True)[0]  # ids ascending
    vals = utility[ok]
    order = torch.sort(vals, descending=True, stable=True).indices[:k]  # stable: ties keep id order
    return ok[order], vals[order]


def shape_of(conj: Conjunction) -> tuple:
    """Batching key: the atoms' structure (variables by first appearance, ?y kept, constants bare)."""
    return conjunction_shape(conj, negations=False)


def _check_ids(q: Query, adj: Adjacency) -> None:
    for a in q.atoms:
        if not 0 <= a.relation < adj.n_relations:
            raise PipelineError(f"relation id #{a.relation} out of range 0..{adj.n_relations - 1}")
        for t in a.terms:
            if isinstance(t, Const) and not 0 <= t.eid < adj.n_entities:
                raise PipelineError(f"entity id #{t.eid} out of range 0..{adj.n_entities - 1}")


def _conjunctions(
    conjs: list[Conjunction], adj: Adjacency, cycle_cap: int | None, show_bar: bool = True,
    need: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Same-shape conjunctions -> ((B, N) utilities, (B,) approximate flags). show_bar: the outermost
    cycle enumeration may show a progress bar; the nested ones it runs never do (no restarting bars).
    need: (B, N) the cells whose gradient is read (see solve; a cycle's enumeration routes them all)."""
    graph = QueryGraph(conjs[0])
    if graph.has_cycle:
        res = [_cyclic(c, adj, cycle_cap, show_bar) for c in conjs]
        return torch.stack([u for u, _ in res]), torch.tensor([a for _, a in res], device=adj.device)
    return _tree(conjs, graph, adj, need), torch.zeros(len(conjs), dtype=torch.bool, device=adj.device)


def _tree(conjs: list[Conjunction], graph: QueryGraph, adj: Adjacency, need: torch.Tensor | None = None) -> torch.Tensor:
    """(B, N): exact utilities of same-shape conjunctions whose variable graph is a forest. need: the
    cells of the result whose gradient is read (the products into ?y route only those)."""
    bsz, n, dev = len(conjs), adj.n_entities, adj.device
    params = [AtomParams.of([c.atoms[i] for c in conjs], dev) for i in range(len(conjs[0].atoms))]

    def consts(i: int, side: str) -> torch.Tensor:
        return torch.tensor([getattr(c.atoms[i], side).eid for c in conjs], dtype=torch.int64, device=dev)

    # A variable's state is the sum of its terms in plan order; the first term is taken as it is and the
    # others are added in place: no zero-filled (B, N) buffer per variable (fresh pages fault).
    state: dict[Var, torch.Tensor] = {}

    def add(v: Var, term: torch.Tensor) -> None:
        state[v] = term if v not in state else state[v].add_(term)

    def pop(v: Var) -> torch.Tensor:
        got = state.pop(v, None)
        return torch.zeros((bsz, n), dtype=torch.float32, device=dev) if got is None else got

    scalar = None  # (B,) constant atoms and the best values of components without ?y
    for i in graph.constant_atoms:
        val = constant_value(adj, params[i], consts(i, "head"), consts(i, "tail"))
        scalar = val if scalar is None else scalar + val
    for i in graph.anchor_atoms:
        a = graph.atom(i)
        if isinstance(a.tail, Var):
            add(a.tail, fold_anchor(adj, params[i], consts(i, "head"), var_is_tail=True))
        else:
            add(a.head, fold_anchor(adj, params[i], consts(i, "tail"), var_is_tail=False))
    for i in graph.self_loops:
        add(graph.atom(i).head, fold_diagonal(adj, params[i]))

    for comp in graph.components:
        root = FREE if FREE in comp else comp[0]
        for child, parent in reversed(_bfs_edges(graph, root)):
            atoms = graph.edges[frozenset((child, parent))]
            parts = [RelationMatrix(adj, params[i], from_head=graph.atom(i).head == child) for i in atoms]
            m = parts[0] if len(parts) == 1 else SumMatrix(parts)
            # a product into ?y adds to the result cell by cell: outside need, its gradient is 0 too
            add(parent, maxplus(pop(child), m, need if parent == FREE else None))
        if root != FREE:
            best = pop(root).amax(dim=1)
            scalar = best if scalar is None else scalar + best
    util = pop(FREE)
    return util if scalar is None else util.add_(scalar[:, None])


def _bfs_edges(graph: QueryGraph, root: Var) -> list[tuple[Var, Var]]:
    """(child, parent) pairs in BFS order from root; reversed, every child comes before its parent."""
    seen, order, frontier = {root}, [], [root]
    while frontier:
        nxt = []
        for p in frontier:
            for c in graph.neighbours(p):
                if c not in seen:
                    seen.add(c)
                    order.append((c, p))
                    nxt.append(c)
        frontier = nxt
    return order


def _cyclic(
    conj: Conjunction, adj: Adjacency, cycle_cap: int | None, show_bar: bool = True
) -> tuple[torch.Tensor, bool]:
    """(N,) utility of one conjunction with a cycle: enumerate the candidates of one cycle variable as
    constants (each substitution has one cycle fewer) and take the max. Exact over every candidate that
    can give a finite value; with cycle_cap only the most promising `cycle_cap` ones (then approximate)."""
    graph = QueryGraph(conj)
    v = graph.cycle_variables()[0]  # never ?y: a cycle has at least two other variables
    cand = _candidates(conj, v, adj)
    approximate = False
    if cycle_cap is not None and cand.numel() > cycle_cap:
        cand = cand[torch.topk(_promise(conj, v, adj)[cand], cycle_cap).indices]
        approximate = True
    best = torch.full((adj.n_entities,), NEG_INF, dtype=torch.float32, device=adj.device)
    subs = [_substitute(conj, v, int(e)) for e in cand.tolist()]
    shapes: dict[tuple, list[Conjunction]] = {}
    for s in subs:
        shapes.setdefault(shape_of(s), []).append(s)
    # A substitution that still holds a cycle enumerates again, once per candidate: the product of the
    # candidate counts is what makes a many-cycle query run for minutes. Such runs, and long flat ones,
    # show a progress line that says how to bound them.
    nested = bool(subs) and QueryGraph(subs[0]).has_cycle
    bound = f"capped at {cycle_cap}, approximate" if approximate else "--cycle-cap N bounds it (approximate)"
    for group in shapes.values():
        with output(show_bar and (len(group) > 4 * MAX_BATCH or nested)).bar(
            range(0, len(group), MAX_BATCH),
            desc=f"cycle ?{v.name}: {len(subs)} candidates{', each with cycles left' if nested else ''}; {bound}",
            unit="batch",
            leave=False,
        ) as bar:
            for i in bar:
                util, ap = _conjunctions(group[i : i + MAX_BATCH], adj, cycle_cap, show_bar=False)
                best = torch.maximum(best, util.amax(dim=0))
                approximate |= bool(ap.any())
    return best, approximate


def _substitute(conj: Conjunction, v: Var, eid: int) -> Conjunction:
    c = Const(eid)
    return Conjunction(
        tuple(
            Atom(
                c if a.head == v else a.head,
                a.relation,
                c if a.tail == v else a.tail,
                a.alpha,
                a.beta,
                a.negated,
            )
            for a in conj.atoms
        )
    )


def _incident(conj: Conjunction, v: Var) -> list[tuple[Atom, bool]]:
    """Atoms touching v with whether v is their head (self-loops count once, as head)."""
    return [(a, a.head == v) for a in conj.atoms if v in a.terms]


def _candidates(conj: Conjunction, v: Var, adj: Adjacency) -> torch.Tensor:
    """Entities that v can take with a finite value: an atom with default -inf needs a stored finite fact
    at v's position, so candidates are the intersection of those supports (all entities if none)."""
    ok = torch.ones(adj.n_entities, dtype=torch.bool, device=adj.device)
    for a, v_is_head in _incident(conj, v):
        p = AtomParams.of([a], adj.device)
        if torch.isfinite(p.default()).item():
            continue
        h, t, c = adj.fwd.src, adj.fwd.dst, adj.fwd.conf
        lo, hi = (
            int(adj.fwd.ptr[a.relation * adj.n_entities]),
            int(adj.fwd.ptr[(a.relation + 1) * adj.n_entities]),
        )
        fin = torch.isfinite(p.value(c[lo:hi], torch.zeros(hi - lo, dtype=torch.int64, device=adj.device)))
        if a.head == a.tail:  # a self-loop r(?v, ?v) needs a stored (e, r, e)
            fin &= h[lo:hi] == t[lo:hi]
        other = a.tail if v_is_head else a.head
        if isinstance(other, Const):  # r(e, ?v) needs a fact of e itself
            fin &= (t if v_is_head else h)[lo:hi] == other.eid
        here = torch.zeros_like(ok)
        here[(h if v_is_head else t)[lo:hi][fin]] = True
        ok &= here
    return torch.nonzero(ok, as_tuple=True)[0]


def _promise(conj: Conjunction, v: Var, adj: Adjacency) -> torch.Tensor:
    """(N,) an optimistic score per candidate (sum over incident atoms of the best value at v's position),
    used only to choose which candidates a cycle cap keeps."""
    score = torch.zeros(adj.n_entities, dtype=torch.float32, device=adj.device)
    for a, v_is_head in _incident(conj, v):
        p = AtomParams.of([a], adj.device)
        lo, hi = (
            int(adj.fwd.ptr[a.relation * adj.n_entities]),
            int(adj.fwd.ptr[(a.relation + 1) * adj.n_entities]),
        )
        val = p.value(adj.fwd.conf[lo:hi], torch.zeros(hi - lo, dtype=torch.int64, device=adj.device))
        best = p.default().expand(adj.n_entities).clone()
        best.scatter_reduce_(0, (adj.fwd.src if v_is_head else adj.fwd.dst)[lo:hi].long(), val, reduce="amax")
        score += best
    return score
