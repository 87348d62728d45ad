"""A brute-force oracle for the engine: enumerate every assignment of every variable (tiny KGs only).

Independent of the engine: dense confidence tensors, itertools over assignments, float64 sums. The
`c >= alpha` test is made in float32 as the engine documents (pipeline.engine.atoms)."""

from __future__ import annotations

import itertools

import numpy as np

from pipeline.softquery.model import FREE, Atom, Query, Var


def dense_conf(n_entities: int, n_relations: int, facts: list[tuple[int, int, int, float]]) -> np.ndarray:
    """(R, N, N) float32 confidences, 0 where not stored."""
    p = np.zeros((n_relations, n_entities, n_entities), dtype=np.float32)
    for h, r, t, c in facts:
        p[r, h, t] = np.float32(c)
    return p


def atom_value(a: Atom, c: np.float32) -> float:
    cc = np.float32(1.0) - c if a.negated else c
    if cc >= np.float32(a.alpha):
        return float(np.float32(a.beta) * cc)
    return float("-inf")


def oracle(query: Query, conf: np.ndarray) -> np.ndarray:
    """(N,) float64 utility vector by enumeration."""
    n = conf.shape[1]
    out = np.full(n, -np.inf)
    for conj in query.conjunctions:
        others = [v for v in conj.variables() if v != FREE]
        for y in range(n):
            best = -np.inf
            for values in itertools.product(range(n), repeat=len(others)):
                env = dict(zip(others, values, strict=True))
                env[FREE] = y
                total = 0.0
                for a in conj.atoms:
                    h = env[a.head] if isinstance(a.head, Var) else a.head.eid
                    t = env[a.tail] if isinstance(a.tail, Var) else a.tail.eid
                    total += atom_value(a, conf[a.relation, h, t])
                    if total == -np.inf:
                        break
                best = max(best, total)
            out[y] = max(out[y], best)
    return out
