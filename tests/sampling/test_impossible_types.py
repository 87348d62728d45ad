"""Query types a graph cannot hold: the shapes each type needs, checked before any
walk; the default types skip them with a note and a warning; types named by the caller fail with the reason.
"""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

import pipeline as pl
from pipeline.sampling.sampler import SamplingError
from pipeline.sampling.shapes import missing_shape
from pipeline.softquery import QUERY_TYPES


def _facts(rows: list[tuple[int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["h", "r", "t"])


def _missing(rows: list[tuple[int, int, int]], n: int = 6) -> dict[str, str]:
    facts = _facts(rows)
    return {name: why for name, qt in QUERY_TYPES.items() if (why := missing_shape(qt, facts, n)) is not None}


def test_a_chain_without_multi_edges_or_fan_in_lacks_exactly_those_shapes():
    # 0 -r0-> 1 -r1-> 2 -r0-> 3: every entity has at most one incoming fact, no pair has two relations
    got = _missing([(0, 0, 1), (1, 1, 2), (2, 0, 3)])
    assert got == {
        "2i": "an entity with 2 different incoming facts",
        "2in": "an entity with 2 different incoming facts",
        "2m": "an entity pair joined by 2 different relations",
        "2u": "an entity with 2 different incoming facts",
        "3in": "an entity with 3 different incoming facts",
        "ip": "an entity with 2 different incoming facts",
        "im": "an entity with 2 different incoming facts",
        "inp": "an entity with 2 different incoming facts",
    }  # 1p, 2p, 2il (its ?x may be the anchor's entity) and up stay possible


def test_the_needs_are_joined_not_only_counted():
    # 3 has two incoming facts and 1 -> 2 is joined by two relations, but nothing leads into 1:
    # 2m's ?x needs an incoming fact AND the two relations to ?y
    rows = [(1, 0, 2), (1, 1, 2), (4, 0, 3), (5, 1, 3)]
    assert missing_shape(QUERY_TYPES["2m"], _facts(rows), 6) == (
        "an entity pair joined by 2 different relations from an entity with an incoming fact into an entity "
        "with an incoming fact"
    )
    rows.append((0, 0, 1))  # now 0 -> 1 => 2 (two relations)
    assert missing_shape(QUERY_TYPES["2m"], _facts(rows), 6) is None
    assert missing_shape(QUERY_TYPES["im"], _facts(rows), 6) is not None  # im's ?x needs two
    rows.append((3, 1, 1))
    assert missing_shape(QUERY_TYPES["im"], _facts(rows), 6) is None


def test_every_type_is_possible_on_a_graph_with_all_shapes(ppi5k):
    graph = ppi5k.graph("train")
    assert {n: missing_shape(qt, graph, ppi5k.n_entities) for n, qt in QUERY_TYPES.items()} == dict.fromkeys(
        QUERY_TYPES
    )


def test_default_types_skip_what_the_graph_cannot_hold(women, tmp_path, capsys):
    """The issue's call: it failed with 'query type 2m: only 0 of 5 useful queries after 10000 walks'."""
    qs = pl.sample("women", split="test", alpha="normal", beta="random", per_type=5, seed=0, out=tmp_path,
                   progress=False, browse=False)
    err = capsys.readouterr().err
    by_type = qs.frame.groupby("type").size().to_dict()
    assert "2m" not in by_type and "im" not in by_type and by_type and set(by_type.values()) == {5}
    reports = {r["type"]: r for r in qs.summary["types"]}
    assert list(reports) == list(QUERY_TYPES)  # every default type reported, in the paper's order
    for name in ("2m", "im"):
        assert reports[name]["kept"] == 0 and reports[name]["attempts"] == 0  # not a single walk
        assert reports[name]["note"] == (f"skipped: {name} needs an entity pair joined by 2 different relations, "
                                         "which the test graph has not")
        assert f"warning: sample test: query type {name}: skipped" in err
    assert all(r["note"] == "" for n, r in reports.items() if n not in ("2m", "im"))
    assert qs.meta["types"] == [t for t in QUERY_TYPES if t not in ("2m", "im")]
    again = pl.sample("women", split="test", alpha="normal", beta="random", per_type=5, seed=0,
                      out=tmp_path / "again", progress=False, browse=False)
    pd.testing.assert_frame_equal(again.frame, qs.frame)  # the same seed, the same set


def test_named_types_fail_with_the_reason_and_what_to_do(women, tmp_path):
    with pytest.raises(SamplingError) as err:
        pl.sample("women", split="test", alpha="zero", beta="equal", per_type=5, seed=0, types="1p,2m,im",
                  out=tmp_path, progress=False, browse=False)
    assert str(err.value) == (
        "query types 2m, im cannot exist on the test graph of 'women': 2m and im need an entity pair joined by 2 "
        "different relations, which it has not; leave them out of types= (without types=, the split's default "
        "types are sampled and those the graph cannot hold are skipped)"
    )
    res = CliRunner().invoke(pl_cli(), ["sample", "women", "--out", str(tmp_path), "--types", "2m", "--per-type", "2"])
    assert res.exit_code == 2 and "leave it out of --types (without --types," in res.output
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_named_type_short_of_queries_says_what_to_do(women, tmp_path):
    # within what the graph can hold (50 distinct 1p queries), but not that many useful ones
    with pytest.raises(SamplingError, match=r"query type 1p: only \d+ of 50 useful queries after .* walks .*; "
                       r"ask for fewer with per_type=, or leave types= unset"):
        pl.sample("women", split="test", alpha="zero", beta="equal", per_type=50, seed=0, types=["1p"],
                  out=tmp_path, progress=False, browse=False)


def test_more_queries_than_the_graph_holds_are_refused_before_any_walk(women, tmp_path):
    """The 1p queries of the women graph are its (head, relation) pairs: 50. Asking for 500 walked 25,000
    times before saying it found fewer; now it is one line at once, naming the bound."""
    with pytest.raises(SamplingError, match=r"^per_type=500: the test graph of 'women' holds at most 50 distinct "
                                            r"1p queries \(alpha zero, beta equal"):
        pl.sample("women", split="test", alpha="zero", beta="equal", per_type=500, seed=0, types=["1p"],
                  out=tmp_path, progress=False, browse=False)
    assert not list(tmp_path.iterdir())


def test_default_types_keep_a_short_type_with_a_note(women, tmp_path, capsys):
    qs = pl.sample("women", split="test", alpha="zero", beta="equal", per_type=100, seed=0, out=tmp_path,
                   progress=False, browse=False)
    err = capsys.readouterr().err
    short = [r for r in qs.summary["types"] if 0 < r["kept"] < 100]
    assert short, "expected a type that fills only partly at 100 per type on a 50-fact test split"
    for r in short:
        assert r["note"].startswith(f"only {r['kept']} of 100 useful queries after {r['attempts']} walks")
        assert f"query type {r['type']}: only {r['kept']} of 100" in err
        assert (qs.frame["type"] == r["type"]).sum() == r["kept"]


def pl_cli():
    from pipeline.cli import cli

    return cli
