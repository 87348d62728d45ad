"""Design section 1 on the real data: mean merging, negatives, nested graphs (checked against plain pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.conftest import SHARED_DATA


def _raw(name: str, split: str) -> pd.DataFrame:
    return pd.read_csv(
        SHARED_DATA / name / f"{split}.tsv", sep="\t", header=None, names=["h", "r", "t", "conf"]
    )


def test_cn15k_test_negatives_are_not_facts(cn15k) -> None:
    raw = _raw("cn15k", "test")
    assert len(cn15k.test_negatives) == int((raw["conf"] == 0).sum()) == 17_077
    graph = cn15k.graph("test")
    assert (graph["conf"] > 0).all()
    neg = cn15k.test_negatives.merge(graph, on=["h", "r", "t"], how="inner")
    # a negative may coincide with a fact from another split; it never adds a zero-confidence fact
    assert (neg["conf"] > 0).all()


def test_graphs_are_nested_and_merged_by_mean_over_included_splits(ppi5k) -> None:
    raws = {s: _raw("ppi5k", s) for s in ("train", "val", "test")}
    for graph, splits in {
        "train": ["train"],
        "valid": ["train", "val"],
        "test": ["train", "val", "test"],
    }.items():
        expected = (
            pd.concat([raws[s] for s in splits]).groupby(["h", "r", "t"], as_index=False)["conf"].mean()
        )
        got = ppi5k.graph(graph)
        merged = expected.merge(got, on=["h", "r", "t"], how="outer", suffixes=("_e", "_g"), indicator=True)
        assert (merged["_merge"] == "both").all(), graph
        np.testing.assert_allclose(merged["conf_g"], merged["conf_e"], rtol=0, atol=1e-12)
    keys = {
        g: set(map(tuple, ppi5k.graph(g)[["h", "r", "t"]].to_numpy())) for g in ("train", "valid", "test")
    }
    assert keys["train"] <= keys["valid"] <= keys["test"]


def test_duplicates_with_conflicting_confidences_take_the_mean(cn15k) -> None:
    raw = _raw("cn15k", "train")
    dup = raw[raw.duplicated(["h", "r", "t"], keep=False)]
    conflicting = dup.groupby(["h", "r", "t"])["conf"].nunique()
    key = conflicting[conflicting > 1].index[0]
    rows = raw[(raw["h"] == key[0]) & (raw["r"] == key[1]) & (raw["t"] == key[2])]
    g = cn15k.graph("train")
    got = g[(g["h"] == key[0]) & (g["r"] == key[1]) & (g["t"] == key[2])]["conf"].item()
    assert got == rows["conf"].mean()
    assert rows["conf"].nunique() > 1


def test_facts_with_splits_carries_each_nested_confidence(ppi5k) -> None:
    table = ppi5k.facts_with_splits()
    assert len(table) == len(ppi5k.graph("test"))
    assert table["conf_train"].notna().sum() == len(ppi5k.graph("train"))
    assert table["conf_valid"].notna().sum() == len(ppi5k.graph("valid"))
    # present in train -> present in valid (nesting)
    assert not (table["conf_train"].notna() & table["conf_valid"].isna()).any()


def test_id_maps_keep_names_and_crlf_is_stripped(cn15k, ppi5k) -> None:
    assert cn15k.entities.loc[0, "name"] == "pricing"
    assert cn15k.relations.loc[0, "name"] == "relatedto"
    assert ppi5k.relations["name"].tolist()[:2] == ["binding", "expression"]
    assert not any("\r" in n for n in cn15k.entity_names() + ppi5k.entity_names())
    assert (cn15k.entities["eid"].to_numpy() == np.arange(15_000)).all()
