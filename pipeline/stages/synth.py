"""A synthetic uncertain KG for scaling studies: ``pipeline synth NAME --entities N --relations R --facts F``.

The generator is a pure function of its arguments and seed (:func:`generate`); the file it writes is an
ordinary named-triple TSV that enters the project through ``pipeline ingest NAME --from PATH`` like any
user's own KG (:func:`synth_dataset`), so nothing downstream knows it is synthetic.

Shape of the graph:
- every entity has at least one fact (a first pass links each entity to a weighted partner), so the data
  set really has N entities after ingest;
- the remaining facts are drawn Chung-Lu style: head and tail independently from Zipf weights
  ``w_i = rank_i ** -ZIPF`` over a random permutation of the entities, relation from Zipf weights over the
  relations, so degrees follow a power law as in real KGs (a few hubs, a long tail);
- confidences are drawn by inverse-CDF sampling from the observed train confidences of PPI5k or CN15k,
  kept here as quantile tables (every 2.5%) so the study needs no download; interpolation between equal
  quantiles reproduces the point masses CN15k has (e.g. 0.7093 is ~35% of its facts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipeline.core import atomic, config
from pipeline.core.errors import PipelineError
from pipeline.stages.options import IngestOptions

ZIPF = 0.8  # exponent of the entity/relation weights; ~0.8 gives degree tails like PPI5k/CN15k's hubs
QUANTILE_STEP = 0.025
# quantiles 0, 2.5%, ..., 100% of the train confidences (tests/synth checks them against the data files)
CONFIDENCE_QUANTILES: dict[str, tuple[float, ...]] = {
    "ppi5k": (
        0.15, 0.159, 0.169, 0.169, 0.175, 0.188, 0.198, 0.211, 0.228, 0.24, 0.266, 0.282, 0.284, 0.304,
        0.311, 0.323, 0.323, 0.329, 0.329, 0.342, 0.349, 0.367, 0.37, 0.388, 0.402, 0.426, 0.454, 0.47,
        0.47, 0.489, 0.54, 0.547, 0.57, 0.581, 0.611, 0.698, 0.8, 0.879, 0.898, 0.921, 0.997,
    ),
    "cn15k": (
        0.1, 0.1154, 0.1755, 0.2055, 0.2357, 0.2555, 0.305, 0.3425, 0.4002, 0.4747, 0.5259, 0.5259,
        0.5259, 0.5743, *([0.7093] * 18), 0.8891, *([0.8927] * 6), 0.9844, 1.0,
    ),
}


def quantiles_of(confidences: np.ndarray) -> tuple[float, ...]:
    """The quantile table of a confidence sample (numpy's linear interpolation, rounded to 4 decimals)."""
    qs = np.quantile(np.asarray(confidences, dtype=np.float64), np.linspace(0, 1, round(1 / QUANTILE_STEP) + 1))
    return tuple(round(float(x), 4) for x in qs)


def draw_confidences(rng: np.random.Generator, n: int, like: str) -> np.ndarray:
    """(n,) float64 in [0, 1], rounded to 4 decimals, distributed like the ``like`` data set's train facts."""
    if like not in CONFIDENCE_QUANTILES:
        raise PipelineError(f"--like {like!r}: choose one of {', '.join(sorted(CONFIDENCE_QUANTILES))}")
    table = np.asarray(CONFIDENCE_QUANTILES[like])
    u = rng.random(n)
    return np.round(np.interp(u, np.linspace(0, 1, len(table)), table), 4)


def _zipf_weights(rng: np.random.Generator, n: int) -> np.ndarray:
    ranks = rng.permutation(n) + 1.0  # which entity is a hub is random, not its id
    w = ranks**-ZIPF
    return w / w.sum()


def generate(
    n_entities: int, n_relations: int, n_facts: int, seed: int = 0, like: str = "ppi5k"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct facts (head, relation, tail, confidence): three (F,) int64 arrays and one (F,) float64.

    F = n_facts exactly; no self-loops; every entity in 0..n_entities-1 occurs at least once; sorted by
    (head, relation, tail). Deterministic for the arguments and seed.
    """
    from pipeline.core.checks import check_int, check_seed

    check_seed(seed, "--seed")
    for value, option in ((n_entities, "--entities"), (n_relations, "--relations"), (n_facts, "--facts")):
        check_int(value, option, 1, 2**31 - 1)
    if n_entities < 2 or n_relations < 1:
        raise PipelineError(f"--entities must be >= 2 and --relations >= 1, got {n_entities} and {n_relations}")
    most = n_entities * (n_entities - 1) * n_relations
    if not (n_entities <= n_facts <= most // 2):
        raise PipelineError(
            f"--facts must be between --entities ({n_entities}, one fact per entity) and half of all "
            f"(h, r, t) pairs ({most // 2}), got {n_facts}"
        )
    rng = np.random.default_rng(seed)
    w_ent = _zipf_weights(rng, n_entities)
    w_rel = _zipf_weights(rng, n_relations)
    # pass 1: one fact per entity, on a random side, with a weighted partner
    ent = np.arange(n_entities)
    partner = rng.choice(n_entities, size=n_entities, p=w_ent)
    partner = np.where(partner == ent, (partner + 1) % n_entities, partner)
    as_head = rng.random(n_entities) < 0.5
    h = np.where(as_head, ent, partner)
    t = np.where(as_head, partner, ent)
    r = rng.choice(n_relations, size=n_entities, p=w_rel)
    keys = np.unique((h * n_relations + r) * n_entities + t)
    # pass 2: Chung-Lu draws until F distinct facts; oversample since hubs collide
    while len(keys) < n_facts:
        m = int(1.3 * (n_facts - len(keys))) + 16
        hh = rng.choice(n_entities, size=m, p=w_ent)
        tt = rng.choice(n_entities, size=m, p=w_ent)
        rr = rng.choice(n_relations, size=m, p=w_rel)
        ok = hh != tt
        new = np.unique((hh[ok] * n_relations + rr[ok]) * n_entities + tt[ok])
        new = new[~np.isin(new, keys)]
        if len(keys) + len(new) > n_facts:  # keep a random subset, not the smallest keys
            new = rng.choice(new, size=n_facts - len(keys), replace=False)
        keys = np.union1d(keys, new)
    h, rest = np.divmod(keys, n_relations * n_entities)
    r, t = np.divmod(rest, n_entities)
    return h, r, t, draw_confidences(rng, len(keys), like)


def entity_name(i: int, n: int) -> str:
    return f"ent{i:0{len(str(n - 1))}d}"


def relation_name(i: int, n: int) -> str:
    return f"rel{i:0{len(str(n - 1))}d}"


def write_tsv(path: str | Path, h: np.ndarray, r: np.ndarray, t: np.ndarray, c: np.ndarray, n_entities: int,
              n_relations: int) -> Path:
    """Write named triples with a header (atomically): head, relation, tail, confidence."""
    ents = np.array([entity_name(i, n_entities) for i in range(n_entities)], dtype=object)
    rels = np.array([relation_name(i, n_relations) for i in range(n_relations)], dtype=object)
    lines = ["head\trelation\ttail\tconfidence"]
    lines += [f"{a}\t{b}\t{d}\t{x:.4f}" for a, b, d, x in zip(ents[h], rels[r], ents[t], c.tolist(), strict=True)]
    return atomic.write_text(path, "\n".join(lines) + "\n")


def synth_dataset(
    name: str,
    n_entities: int,
    n_relations: int,
    n_facts: int,
    *,
    like: str = "ppi5k",
    out: str | Path | None = None,
    options: IngestOptions | None = None,
) -> dict[str, Any]:
    """Generate, write ``out`` (default PIPELINE_HOME/synth/NAME.tsv) and record it as the user data set NAME
    through ``pipeline ingest NAME --from FILE`` with ``options`` (its seed seeds the generator too, its split
    the files). Returns ingest's report plus the generated file."""
    from pipeline.stages.user_ingest import ingest_user

    o = options if options is not None else IngestOptions()
    h, r, t, c = generate(n_entities, n_relations, n_facts, o.seed, like)
    path = Path(out) if out is not None else config.home() / "synth" / f"{name}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_tsv(path, h, r, t, c, n_entities, n_relations)
    rep = ingest_user(name, from_path=str(path), options=o)
    return {**rep, "file": str(path), "like": like, "seed": o.seed}
