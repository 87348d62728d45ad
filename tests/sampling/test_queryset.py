"""Query sets on disk: Parquet round trip of queries, answers and metadata; bad files are ArtifactErrors."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import ArtifactError
from pipeline.formats.queryset import query_to_records, read_query_set, records_to_query, write_query_set
from pipeline.softquery import QUERY_TYPES, to_text

META = {"dataset": "toy", "split": "test", "alpha": "low", "beta": "random", "source": "sampled", "seed": 3}


def _row(i: int, q) -> dict:
    return {
        "id": f"t-{i}",
        "type": "x",
        "text": to_text(q),
        "atoms": query_to_records(q),
        "answers_easy": [4, 2],
        "utilities_easy": [0.5, 0.25],
        "answers_hard": [2, 4, 9],
        "utilities_hard": [0.75, 0.5, 0.125],
        "seed": 3,
    }


@st.composite
def typed_queries(draw):
    qt = QUERY_TYPES[draw(st.sampled_from(sorted(QUERY_TYPES)))]
    rels = draw(st.lists(st.integers(0, 40), min_size=qt.n_atoms, max_size=qt.n_atoms))
    anchors = draw(st.lists(st.integers(0, 10**6), min_size=qt.n_anchors, max_size=qt.n_anchors))
    alphas = draw(st.lists(st.floats(0, 1), min_size=qt.n_atoms, max_size=qt.n_atoms))
    betas = draw(
        st.lists(st.sampled_from([0.1 * k for k in range(1, 11)]), min_size=qt.n_atoms, max_size=qt.n_atoms)
    )
    return qt.build(rels, anchors, alphas, betas)


@given(typed_queries())
def test_records_round_trip(q):
    assert records_to_query(query_to_records(q)) == q


@settings(max_examples=10, deadline=None)
@given(st.lists(typed_queries(), min_size=1, max_size=5))
def test_file_round_trip(tmp_path_factory, queries):
    path = tmp_path_factory.mktemp("qs") / "set.parquet"
    write_query_set([_row(i, q) for i, q in enumerate(queries)], path, META)
    qs = read_query_set(path)
    assert qs.queries() == queries
    assert qs.meta["split"] == "test" and qs.meta["format"] == "soft-query-set/1" and qs.meta["seed"] == 3
    assert list(qs.frame["answers_hard"].iloc[0]) == [2, 4, 9]
    assert list(qs.frame["utilities_hard"].iloc[0]) == [0.75, 0.5, 0.125]
    assert len(qs) == len(queries)
    assert read_query_set(path.parent).frame["id"].tolist() == qs.frame["id"].tolist()  # a folder of one set


def test_bad_files_name_the_problem(tmp_path):
    with pytest.raises(ArtifactError, match="no such query set"):
        read_query_set(tmp_path / "missing.parquet")
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(ArtifactError, match="not a readable Parquet"):
        read_query_set(junk)
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"id": ["a"]}), foreign)
    with pytest.raises(ArtifactError, match="no 'pipeline' metadata"):
        read_query_set(foreign)
    with pytest.raises(ArtifactError, match="expected exactly one query set"):
        read_query_set(tmp_path)
    q = QUERY_TYPES["1p"].build([1], [2])
    bad = _row(0, q)
    bad["atoms"] = [dict(bad["atoms"][0], head_var="x")]  # both a variable and an entity
    write_query_set([bad], tmp_path / "x" / "bad.parquet", META)
    with pytest.raises(ArtifactError, match="exactly one of head_var, head_eid"):
        read_query_set(tmp_path / "x").queries()


@pytest.mark.parametrize("beta", [1e39, float("inf"), float("nan"), -0.5, 1e6 * 1.5])
def test_a_beta_the_query_text_refuses_is_refused_in_a_file_too(tmp_path, beta):
    """Beta 1e39 written by the project's own writer was answered (every utility inf) while
    a typed query refuses it; reading the file now checks every atom as the parser does, naming the query."""
    from pipeline.softquery import parse

    q = parse("#0(#1, ?y, 0.5, 2)")
    row = _row(0, q)
    row["atoms"] = [{**row["atoms"][0], "beta": beta}]
    path = tmp_path / "set.parquet"
    write_query_set([_row(1, q), row], path, META)
    with pytest.raises(ArtifactError, match=r"set\.parquet: query t-0: malformed atom record .*beta"):
        read_query_set(path)
    with pytest.raises(Exception, match="beta 1e39 must be in"):
        parse("#0(#1, ?y, 0.5, 1e39)")  # the typed query's rule, which the file is now held to
