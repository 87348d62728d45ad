"""`stats` reads counts and alpha levels back from the store: hand-computed on a tiny KG, and against
numpy on the loader tables of the real data sets."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.errors import PipelineError
from pipeline.store.ingest import ingest
from pipeline.store.stats import dataset_stats
from tests.store.kgs import make_kg


def test_stats_of_the_tiny_kg_by_hand(fresh_store):
    ingest(make_kg("tiny"), fresh_store, progress=False)
    st = dataset_stats(fresh_store, "tiny")
    assert (st.dataset, st.entities, st.relations) == ("tiny", 5, 2)
    # distinct facts: train {(0,0,1), (0,0,2), (1,1,2)}; val adds (2,1,3); test adds (3,1,4), (4,0,4)
    assert st.facts == {"train": 3, "valid": 4, "test": 6}
    r0, r1 = st.per_relation
    assert (r0.name, r0.train, r0.valid, r0.test) == ("rel0", 2, 2, 3)
    assert (r1.name, r1.train, r1.valid, r1.test) == ("rel1", 1, 2, 3)
    # alpha levels count every published row, duplicates kept: rel0 rows 0.75, 0.25, 0.5, 0.875, 1.0
    # sorted 0.25, 0.5, 0.75, 0.875, 1.0 -> p25 = 0.5, p50 = 0.75, p75 = 0.875 (the merged facts would give
    # 0.5625, 0.625, 0.8125); rel1 rows 0.9, 0.4, 0.25 -> p25 = 0.325, p50 = 0.4, p75 = 0.65
    assert (r0.p25, r0.p50, r0.p75) == (0.5, 0.75, 0.875)
    assert (r1.p25, r1.p50, r1.p75) == (0.325, 0.4, 0.65)
    assert st.alpha_levels()["normal"] == [0.75, 0.4]


def test_relation_without_facts_has_no_percentiles(fresh_store):
    ingest(make_kg("gap", relation_names=("rel0", "rel1", "unused")), fresh_store, progress=False)
    st = dataset_stats(fresh_store, "gap")
    assert st.relations == 3
    assert (st.per_relation[2].test, st.per_relation[2].p50) == (0, None)
    assert st.alpha_levels()["high"][2] == 0.0


def test_missing_or_incomplete_dataset_is_an_error(fresh_store):
    with pytest.raises(PipelineError, match="not in the store"):
        dataset_stats(fresh_store, "ppi5k")  # registered, never loaded
    fresh_store.run("CREATE (:Dataset {name: 'half', complete: false})")
    with pytest.raises(PipelineError, match="did not complete"):
        dataset_stats(fresh_store, "half")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ppi5k", "cn15k"])
def test_stats_agree_with_numpy_on_real_data(request, falkordb_store, name):
    kg = request.getfixturevalue(name)
    store = falkordb_store.fresh()
    try:
        ingest(kg, store, progress=False)
        st = dataset_stats(store, name)
    finally:
        store.drop()
        store.close()
    assert (st.entities, st.relations) == (kg.n_entities, kg.n_relations)
    assert st.facts == {g: len(kg.graph(g)) for g in ("train", "valid", "test")}
    test_graph = kg.graph("test")
    for r in st.per_relation:
        assert r.test == int((test_graph["r"] == r.rid).sum())
        rows = kg.rows.loc[kg.rows["r"] == r.rid, "conf"].to_numpy()  # every published row, duplicates kept
        want = np.round(np.percentile(rows, [25, 50, 75]), 4)  # numpy's default: linear interpolation
        assert [r.p25, r.p50, r.p75] == want.tolist(), r.name


def test_an_unknown_name_is_not_told_to_ingest(fresh_store):
    from pipeline.core.errors import UnknownNameError

    ingest(make_kg("my_graph"), fresh_store, progress=False)
    with pytest.raises(UnknownNameError) as err:
        dataset_stats(fresh_store, "nope")
    msg = str(err.value)
    assert msg.startswith("unknown data set 'nope'") and "pipeline ingest" not in msg
    assert "my_graph" in msg and "ppi5k" in msg  # lists what the store holds and what is registered
    # close matches among both the data sets in the store and the registered ones
    for typo, hint in (("my_grph", "did you mean my_graph?"), ("ppi5", "did you mean ppi5k")):
        with pytest.raises(UnknownNameError, match=hint):
            dataset_stats(fresh_store, typo)


def test_a_registered_but_absent_data_set_is_told_to_ingest(fresh_store):
    with pytest.raises(PipelineError, match=r"'cn15k' is not in the store .*; run `pipeline ingest cn15k`"):
        dataset_stats(fresh_store, "cn15k")
    with pytest.raises(PipelineError, match="pipeline ingest cn15k"):  # registry lookups ignore case
        dataset_stats(fresh_store, "CN15K")
