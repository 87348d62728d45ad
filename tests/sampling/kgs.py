"""Small KGs of the sampling tests: a hand-made one with hand-computed answers, and slices of real ones."""

from __future__ import annotations

import pandas as pd

from loaders.base import KGData

# (h, r, t, conf, split): six entities, two relations
TINY_FACTS = [
    (0, 0, 1, 0.8, "train"),
    (0, 0, 2, 0.5, "train"),
    (1, 1, 3, 0.9, "train"),
    (2, 1, 3, 0.4, "train"),
    (2, 1, 4, 0.6, "train"),
    (0, 0, 3, 0.7, "val"),
    (3, 1, 4, 0.5, "test"),
    (1, 1, 5, 0.3, "test"),
]


def make_kg(name: str, facts: list[tuple], n_entities: int, n_relations: int) -> KGData:
    rows = pd.DataFrame(facts, columns=["h", "r", "t", "conf", "split"])
    rows["line"] = range(1, len(rows) + 1)
    rows["split"] = pd.Categorical(rows["split"], categories=["train", "val", "test"])
    return KGData(
        name=name,
        entities=pd.DataFrame({"eid": range(n_entities), "name": [f"ent{i}" for i in range(n_entities)]}),
        relations=pd.DataFrame({"rid": range(n_relations), "name": [f"rel{i}" for i in range(n_relations)]}),
        rows=rows.astype({"h": "int64", "r": "int64", "t": "int64", "conf": "float64"}),
        test_negatives=pd.DataFrame({c: pd.Series(dtype="int64") for c in "hrt"}),
        softlogic=None,
        checksums={},
    )


def slice_kg(kg: KGData, n: int, name: str) -> KGData:
    """The facts of kg among its first n entities, as a data set of its own name (all splits kept)."""
    rows = kg.rows[(kg.rows.h < n) & (kg.rows.t < n)].reset_index(drop=True)
    return KGData(
        name, kg.entities.iloc[:n].copy(), kg.relations.copy(), rows, kg.test_negatives.iloc[:0], None, {}
    )
