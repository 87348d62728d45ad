"""Hypothesis: for random small uncertain KGs, what ingest writes and what stats reads back agree with the
loader tables (merged means per nested graph) and with numpy's percentiles of the raw rows, on both load paths."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.store.ingest import ingest
from pipeline.store.stats import dataset_stats
from tests.store.kgs import expected_facts, make_kg, snapshot

# confidences k/16 (k = 1..16)
fact = st.tuples(
    st.integers(0, 5),
    st.integers(0, 2),
    st.integers(0, 5),
    st.integers(1, 16).map(lambda k: k / 16),
    st.sampled_from(["train", "val", "test"]),
)


@settings(max_examples=12, deadline=None)
@given(facts=st.lists(fact, min_size=1, max_size=25), bulk=st.booleans())
def test_ingest_and_stats_match_the_tables(falkordb_store, facts, bulk):
    # at most 2 rows per (h, r, t): means of two k/16 values are k/32, printed exactly in 15 digits
    rows_per_triple: dict[tuple, int] = {}
    kept = []
    for f in facts:
        n = rows_per_triple.get(f[:3], 0)
        if n < 2:
            rows_per_triple[f[:3]] = n + 1
            kept.append(f)
    facts = kept
    kg = make_kg("prop", facts=facts, n_entities=6, relation_names=("r0", "r1", "r2"))
    store = falkordb_store.fresh()
    store.bulk = bulk
    try:
        ingest(kg, store, batch_size=4, progress=False)
        snap = snapshot(store, "prop")
        st_ = dataset_stats(store, "prop")
    finally:
        store.drop()
        store.close()
    keys = ("h", "r", "t", "type", "conf_train", "conf_valid", "conf_test")
    assert [{k: f[k] for k in keys} for f in snap["facts"]] == expected_facts(kg)
    assert st_.facts == {g: len(kg.graph(g)) for g in ("train", "valid", "test")}
    for r in st_.per_relation:
        conf = kg.rows.loc[kg.rows["r"] == r.rid, "conf"].to_numpy()  # every row, duplicates kept
        if len(conf) == 0:
            assert (r.test, r.p25, r.p50, r.p75) == (0, None, None, None)
            continue
        assert [r.p25, r.p50, r.p75] == np.round(np.percentile(conf, [25, 50, 75]), 4).tolist()
