"""Alpha levels per relation: read from the store (the sampling path; ingest wrote them on the relation
vocabulary), or computed from a loaded data set. Both come from ONE rule,
:func:`loaders.levels.alpha_percentiles` over every published row (SQUK's definition)."""

from __future__ import annotations

import numpy as np

from loaders.levels import alpha_levels
from pipeline.core.errors import PipelineError
from pipeline.sampling.requirements import alpha_table


def store_alpha_table(store, dataset: str, n_relations: int) -> np.ndarray:
    """(n_relations, 4) alpha table from the store's per-relation statistics (pipeline.store.stats)."""
    from pipeline.store.stats import dataset_stats

    stats = dataset_stats(store, dataset)
    pct = {r.rid: (r.p25, r.p50, r.p75) for r in stats.per_relation if r.p25 is not None}
    return alpha_table(pct, n_relations)


def kg_alpha_table(kg) -> np.ndarray:
    """(n_relations, 4) alpha table of a loaded data set (loaders.KGData)."""
    return alpha_table(alpha_levels(kg), kg.n_relations)


def store_relation_types(store, dataset: str) -> list[str]:
    """The relationship type of each relation id of dataset, from its (:Relation) vocabulary nodes."""
    from pipeline.store import cypher_text

    rows = store.run(cypher_text("sample_relation_types"), {"dataset": dataset})
    types = [str(r["type"]) for r in rows]
    if [int(r["rid"]) for r in rows] != list(range(len(rows))):
        raise PipelineError(f"the store's relation vocabulary of '{dataset}' is not ids 0..{len(rows) - 1}")
    return types
