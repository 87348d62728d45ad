"""Tiny hand-made uncertain KGs (real KGData objects) for fast training and export tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loaders.base import KGData


def toy_kg(
    n_entities: int = 30,
    n_relations: int = 2,
    n_facts: int = 240,
    seed: int = 0,
    name: str = "toy",
    negatives: bool = True,
    softlogic: bool = True,
) -> KGData:
    """A random but learnable KG: confidence depends on a hidden 1-d position of each entity and relation,
    so nearby pairs have high confidence. Splits 80/10/10 of the distinct facts."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0, 1, n_entities)
    shift = rng.uniform(-0.3, 0.3, n_relations)
    h = rng.integers(0, n_entities, n_facts)
    t = rng.integers(0, n_entities, n_facts)
    r = rng.integers(0, n_relations, n_facts)
    conf = np.clip(1.0 - 2.0 * np.abs(pos[t] - pos[h] - shift[r]), 0.05, 1.0).round(3)
    facts = (
        pd.DataFrame({"h": h, "r": r, "t": t, "conf": conf})
        .drop_duplicates(["h", "r", "t"])
        .reset_index(drop=True)
    )
    n = len(facts)
    split = np.array(["train"] * n, dtype=object)
    split[int(0.8 * n) : int(0.9 * n)] = "val"
    split[int(0.9 * n) :] = "test"
    rows = facts.assign(
        split=pd.Categorical(split, categories=["train", "val", "test"]), line=np.arange(1, n + 1)
    )
    neg = (
        pd.DataFrame(
            {
                "h": rng.integers(0, n_entities, 10),
                "r": rng.integers(0, n_relations, 10),
                "t": rng.integers(0, n_entities, 10),
            }
        )
        if negatives
        else pd.DataFrame({c: pd.Series(dtype="int64") for c in "hrt"})
    )
    soft = facts.iloc[: n // 4][["h", "r", "t", "conf"]].reset_index(drop=True) if softlogic else None
    return KGData(
        name=name,
        entities=pd.DataFrame({"eid": np.arange(n_entities), "name": [f"e{i}" for i in range(n_entities)]}),
        relations=pd.DataFrame(
            {"rid": np.arange(n_relations), "name": [f"rel{i}" for i in range(n_relations)]}
        ),
        rows=rows[["h", "r", "t", "conf", "split", "line"]],
        test_negatives=neg,
        softlogic=soft,
        checksums={"toy": f"seed{seed}"},
    )
