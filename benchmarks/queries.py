"""Random soft queries over an observed graph, as the engine benchmarks draw them (a helper, no benchmark)."""

from __future__ import annotations

import numpy as np

from pipeline.softquery import QUERY_TYPES, Query


def random_queries(kg, name: str, count: int, rng: np.random.Generator) -> list[Query]:
    """``count`` queries of type ``name`` over the data set's test graph: each atom's relation drawn among the
    relations, each anchor the head of a random fact of its atom's relation, hybrid alpha (per atom a random
    level among 0 and the relation's 25/50/75th percentile), random beta (U(0.1, 1) rounded to 0.1)."""
    facts = kg.graph("test")
    h, r, c = facts["h"].to_numpy(), facts["r"].to_numpy(), facts["conf"].to_numpy()
    rels = np.unique(r)
    levels = {x: [0.0, *np.percentile(c[r == x], [25, 50, 75])] for x in rels}
    qt = QUERY_TYPES[name]
    out = []
    for _ in range(count):
        rr = rng.choice(rels, size=qt.n_atoms)
        anchors = []
        for a, rel in zip(
            qt.template.atoms, rr, strict=True
        ):  # the template's anchors come in order e1, e2, ...
            if a.variables() != (a.head, a.tail) and len(anchors) < qt.n_anchors:
                idx = np.nonzero(r == rel)[0]
                anchors.append(int(h[rng.choice(idx)]))
        alphas = [float(levels[x][rng.integers(4)]) for x in rr]
        betas = [round(float(rng.uniform(0.1, 1.0)), 1) for _ in rr]
        out.append(qt.build(rr.tolist(), anchors, alphas, betas))
    return out
