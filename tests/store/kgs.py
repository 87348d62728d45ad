"""Tiny hand-made KGs for the store tests (values with few decimals, so every stored float is exact)."""

from __future__ import annotations

import pandas as pd

from loaders.base import KGData

# (h, r, t, conf, split): 5 entities, 2 relations; (0,0,1) appears in train twice (mean 0.5) and again
# in test (test-graph mean of 0.75, 0.25, 0.875 = 0.625); (2,1,3) only in val; (3,1,4) only in test
TINY_FACTS = [
    (0, 0, 1, 0.75, "train"),
    (0, 0, 1, 0.25, "train"),
    (0, 0, 2, 0.5, "train"),
    (1, 1, 2, 0.9, "train"),
    (2, 1, 3, 0.4, "val"),
    (0, 0, 1, 0.875, "test"),
    (3, 1, 4, 0.25, "test"),
    (4, 0, 4, 1.0, "test"),
]

NASTY = "x\"'`}) DETACH DELETE n //"


def make_kg(
    name: str, facts=TINY_FACTS, n_entities: int = 5, relation_names=("rel0", "rel1"), entity_names=None
) -> KGData:
    rows = pd.DataFrame(facts, columns=["h", "r", "t", "conf", "split"])
    rows["line"] = range(1, len(rows) + 1)
    rows["split"] = pd.Categorical(rows["split"], categories=["train", "val", "test"])
    names = list(entity_names) if entity_names is not None else [f"ent{i}" for i in range(n_entities)]
    return KGData(
        name=name,
        entities=pd.DataFrame({"eid": range(n_entities), "name": names}),
        relations=pd.DataFrame({"rid": range(len(relation_names)), "name": list(relation_names)}),
        rows=rows.astype({"h": "int64", "r": "int64", "t": "int64", "conf": "float64"}),
        test_negatives=pd.DataFrame({c: pd.Series(dtype="int64") for c in "hrt"}),
        softlogic=None,
        checksums={},
    )


def snapshot(store, dataset: str) -> dict:
    """Everything of one data set in the store, in a canonical order (for equality of two states)."""
    ents = store.run(
        "MATCH (n:Entity {dataset: $d}) RETURN n.eid AS eid, n.name AS name ORDER BY eid", {"d": dataset}
    )
    rels = store.run(
        "MATCH (r:Relation {dataset: $d}) RETURN r.rid AS rid, r.name AS name, r.type AS type ORDER BY rid",
        {"d": dataset},
    )
    facts = store.run(
        "MATCH (h:Entity {dataset: $d})-[e]->(t:Entity) RETURN h.eid AS h, e.rid AS r, t.eid AS t, type(e) AS type, "
        "e.dataset AS dataset, e.conf_train AS conf_train, e.conf_valid AS conf_valid, e.conf_test AS conf_test "
        "ORDER BY r, h, t",
        {"d": dataset},
    )
    marker = store.run(
        "MATCH (d:Dataset {name: $d}) RETURN d.complete AS complete, d.key AS key, d.facts AS facts",
        {"d": dataset},
    )
    return {"entities": ents, "relations": rels, "facts": facts, "marker": marker}


def expected_facts(kg) -> list[dict]:
    """The facts as ingest must store them, from the loader tables (None where absent)."""
    types = list(kg.relation_names())
    out = []
    for row in kg.facts_with_splits().itertuples(index=False):
        d = {"h": int(row.h), "r": int(row.r), "t": int(row.t)}
        for k in ("conf_train", "conf_valid", "conf_test"):
            v = getattr(row, k)
            d[k] = None if v != v else float(v)
        d["type"] = types[d["r"]]
        out.append(d)
    return sorted(out, key=lambda d: (d["r"], d["h"], d["t"]))
