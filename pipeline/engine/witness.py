"""Witnesses (design section 3): why an answer got its utility, from the engine itself.

The witness of an answer `a` is the winning conjunction (branch) and one entity per existential variable
such that the atom values under that assignment sum to the answer's utility. It is decoded by
self-reduction over the exact engine rather than by storing argmaxes inside the max-plus products (which
would cost memory on every answered query, explained or not, and touch the tested hot path):

    with ?y := a, make the next unassigned variable v the free one and solve; the engine returns
    U(phi[y:=a, earlier := chosen, v := e]) maximised over the remaining variables, for every e.
    Its max over e equals U(phi[y:=a, earlier := chosen]), so fixing v to the (lowest-id) argmax keeps
    the value; after the last variable every term is a constant and the atoms sum to U(a).

Each step is exact because the engine is (design section 2), so the recomputed sum equals the engine's
utility up to float32 summation order, and no other assignment gives more (the first step's max is over
all of them). The answers of one query are decoded together: one batched solve per variable and branch,
each over anchor-only query graphs (cheaper than answering). With a cycle cap the engine's utility is a
lower bound and so is the witness (`approximate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pipeline.core.kg import GraphTensors
from pipeline.engine.adjacency import Adjacency, as_adjacency
from pipeline.engine.atoms import AtomParams, constant_value, fold_anchor, fold_diagonal
from pipeline.engine.search import solve
from pipeline.softquery.model import FREE, Atom, Conjunction, Const, Query, Term, Var


@dataclass(frozen=True)
class AtomUse:
    """One atom of a witness with constants only: the confidence read from the graph (0 when the fact is
    not stored: found=False, the default), and its value beta * c or beta * (1 - c) (or -inf)."""

    atom: Atom
    head: int
    tail: int
    found: bool
    confidence: float
    value: float


@dataclass(frozen=True)
class Witness:
    """Why entity `answer` got `utility`: the branch (index of the conjunction) that won, the entity of every
    existential variable, and the atoms of that branch under the assignment (their values sum to utility)."""

    answer: int
    utility: float
    branch: int
    assignment: dict[Var, int]
    atoms: tuple[AtomUse, ...]
    approximate: bool

    @property
    def total(self) -> float:
        """The utility recomputed from the atoms alone (float64 sum)."""
        return float(sum(u.value for u in self.atoms))


def find_witnesses(
    query: Query,
    graph: GraphTensors | Adjacency,
    answers: Sequence[int],
    cycle_cap: int | None = None,
) -> list[Witness]:
    """The witness of each answer (entity id) of query on graph, in the order given. An entity whose
    utility is -inf has no witness: it gets branch -1, an empty assignment and no atoms."""
    adj = as_adjacency(graph)
    answers = [int(a) for a in answers]
    if not answers:
        return []
    n_ans = len(answers)
    best_val = [float("-inf")] * n_ans
    best: list[tuple[int, dict[Var, int], bool]] = [(-1, {}, False)] * n_ans
    known: dict[int, list[tuple[AtomUse, ...]]] = {}  # branch -> atoms per answer, when already looked up
    for bi, conj in enumerate(query.conjunctions):
        if any(v != FREE for v in conj.variables()):
            vals, assigns, approx = _decode(conj, adj, answers, cycle_cap)
        else:  # only ?y: binding it leaves constants, whose atoms are read directly (no search needed)
            known[bi] = _uses(conj, adj, [{FREE: a} for a in answers])
            vals = [_sum(u) for u in known[bi]]
            assigns, approx = [{} for _ in answers], [False] * n_ans
        for k in range(n_ans):
            if vals[k] > best_val[k]:  # strict: ties keep the first branch
                best_val[k], best[k] = vals[k], (bi, assigns[k], approx[k])
    uses: list[tuple[AtomUse, ...]] = [()] * n_ans
    for bi, conj in enumerate(query.conjunctions):
        ks = [k for k in range(n_ans) if best[k][0] == bi]
        if not ks:
            continue
        got = (
            [known[bi][k] for k in ks]
            if bi in known
            else _uses(conj, adj, [{**best[k][1], FREE: answers[k]} for k in ks])
        )
        for k, u in zip(ks, got, strict=True):
            uses[k] = u
    return [
        Witness(a, best_val[k], best[k][0], best[k][1], uses[k], best[k][2]) for k, a in enumerate(answers)
    ]


def _sum(uses: tuple[AtomUse, ...]) -> float:
    return float(sum(u.value for u in uses)) if uses else float("-inf")


def _decode(
    conj: Conjunction, adj: Adjacency, answers: list[int], cycle_cap: int | None
) -> tuple[list[float], list[dict[Var, int]], list[bool]]:
    """Per answer: the branch's utility at y = answer, an optimal assignment of its other variables, and
    whether a cycle cap made any step approximate. The branch has at least one variable besides ?y."""
    n_ans = len(answers)
    subs = [_bind(conj, {FREE: a}) for a in answers]
    assigns: list[dict[Var, int]] = [{} for _ in answers]
    approx = [False] * n_ans
    vals: list[float] = [float("-inf")] * n_ans
    alive = list(range(n_ans))  # answers whose branch value is finite (the others need no witness here)
    others = [v for v in conj.variables() if v != FREE]
    for step, v in enumerate(others):
        if not alive:
            break
        if step == len(others) - 1:  # v is the only variable left: a star of anchored atoms, folded directly
            util = _star([subs[k] for k in alive], v, adj)
            capped = [False] * len(alive)
        else:
            res = solve([Query((_rename(subs[k], v),)) for k in alive], adj, cycle_cap)
            util, capped = res.utility, res.approximate.tolist()
        top, arg = util.max(dim=1)  # torch.max: the first (lowest id) maximal entry
        keep = []
        for k, t, e, ap in zip(alive, top.tolist(), arg.tolist(), capped, strict=True):
            approx[k] |= bool(ap)
            if step == 0:
                vals[k] = t
            if t != float("-inf"):
                assigns[k][v] = e
                subs[k] = _bind(subs[k], {v: e})
                keep.append(k)
        alive = keep
    return vals, assigns, approx


def _star(conjs: list[Conjunction], v: Var, adj: Adjacency) -> torch.Tensor:
    """(B, N): the value of same-shape conjunctions whose only variable is v, for every entity as v. This is
    the engine's plan for such a query (anchor folds, diagonals, constant atoms; atoms.py), except that an
    atom equal in all B conjunctions (one not touching the answer or an earlier choice) is folded once:
    the answers of one query share most anchors, so this costs about one answering, not B."""
    dev, n, bsz = adj.device, adj.n_entities, len(conjs)
    shared = torch.zeros((1, n), dtype=torch.float32, device=dev)
    per: torch.Tensor | None = None
    for i, a0 in enumerate(conjs[0].atoms):
        same = all(c.atoms[i] == a0 for c in conjs)
        atoms = [a0] if same else [c.atoms[i] for c in conjs]
        params = AtomParams.of(atoms, dev)
        if a0.head == v and a0.tail == v:
            term = fold_diagonal(adj, params)
        elif a0.tail == v:
            heads = torch.tensor([a.head.eid for a in atoms], dtype=torch.int64, device=dev)
            term = fold_anchor(adj, params, heads, var_is_tail=True)
        elif a0.head == v:
            tails = torch.tensor([a.tail.eid for a in atoms], dtype=torch.int64, device=dev)
            term = fold_anchor(adj, params, tails, var_is_tail=False)
        else:
            heads = torch.tensor([a.head.eid for a in atoms], dtype=torch.int64, device=dev)
            tails = torch.tensor([a.tail.eid for a in atoms], dtype=torch.int64, device=dev)
            term = constant_value(adj, params, heads, tails)[:, None]
        if same:
            shared += term
        else:
            per = term.expand(bsz, n).clone() if per is None else per.add_(term)
    return shared.expand(bsz, n) if per is None else per.add_(shared)


def _bind(conj: Conjunction, env: dict[Var, int]) -> Conjunction:
    def term(t: Term) -> Term:
        return Const(env[t]) if isinstance(t, Var) and t in env else t

    return Conjunction(
        tuple(Atom(term(a.head), a.relation, term(a.tail), a.alpha, a.beta, a.negated) for a in conj.atoms)
    )


def _rename(conj: Conjunction, v: Var) -> Conjunction:
    """v becomes the free variable (?y no longer occurs: it was bound to the answer)."""

    def term(t: Term) -> Term:
        return FREE if t == v else t

    return Conjunction(
        tuple(Atom(term(a.head), a.relation, term(a.tail), a.alpha, a.beta, a.negated) for a in conj.atoms)
    )


def _uses(conj: Conjunction, adj: Adjacency, envs: list[dict[Var, int]]) -> list[tuple[AtomUse, ...]]:
    """Each atom under each full assignment of envs, looked up in the graph and valued as the engine values
    it (one batched lookup for all). An env that leaves a variable unbound (its branch failed) gets ()."""
    full = [k for k, env in enumerate(envs) if all(v in env for v in conj.variables())]
    out: list[tuple[AtomUse, ...]] = [()] * len(envs)
    if not full:
        return out
    dev, m = adj.device, len(conj.atoms)

    def eid(t: Term, env: dict[Var, int]) -> int:
        return env[t] if isinstance(t, Var) else t.eid

    heads = [eid(a.head, envs[k]) for k in full for a in conj.atoms]
    tails = [eid(a.tail, envs[k]) for k in full for a in conj.atoms]
    params = AtomParams.of(list(conj.atoms) * len(full), dev)
    found, conf = adj.fwd.lookup(
        params.rel,
        torch.tensor(heads, dtype=torch.int64, device=dev),
        torch.tensor(tails, dtype=torch.int64, device=dev),
        adj.n_entities,
    )
    vals = torch.where(found, params.value(conf), params.default())
    fl, cl, vl = found.tolist(), conf.tolist(), vals.tolist()
    for j, k in enumerate(full):
        out[k] = tuple(
            AtomUse(a, heads[j * m + i], tails[j * m + i], fl[j * m + i], cl[j * m + i], vl[j * m + i])
            for i, a in enumerate(conj.atoms)
        )
    return out
