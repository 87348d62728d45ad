"""Evaluation tables from answers files: exact values on hand-made answers, docs merging, the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli import cli
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.answers import rows_from_utilities as answer_rows
from pipeline.stages.evaluate import (
    PAPER,
    evaluate_answers,
    markdown_table,
    method_order,
    ordered_types,
    plot_methods,
    query_metrics,
    summarise,
    update_results,
)
from tests.results_pages import render

L3 = math.log2(3)
INF = -math.inf

# Three queries over 6 entities. q1 (1p) is predicted perfectly; q2 (1p) has its two answers swapped;
# q3 (2p) has one answer, predicted third.
UTIL = torch.tensor(
    [
        [0.9, 0.5, INF, 0.0, INF, INF],
        [0.2, 0.7, 0.3, INF, 0.1, INF],
        [0.4, 0.4, 0.1, 0.8, INF, 0.0],
    ]
)
TRUTH = [
    (np.array([0, 1]), np.array([1.0, 0.5])),
    (np.array([1, 2]), np.array([0.9, 0.6])),
    (np.array([1]), np.array([0.3])),
]


def _answers(
    tmp_path: Path, method: str = "SRC", backbone: str = "ukge_logi", util: torch.Tensor = UTIL
) -> Path:
    frame = answer_rows(["q1", "q2", "q3"], ["1p", "1p", "2p"], util, TRUTH, k=3)
    meta = {"dataset": "toy", "method": method, "backbone": backbone, "query_set": "toy.parquet"}
    return write_answers(frame, tmp_path / f"{backbone}-{method}.parquet", meta)


def test_answer_rows_hold_top_k_and_every_truth(tmp_path: Path) -> None:
    ans = read_answers(_answers(tmp_path))
    f = ans.frame
    q3 = f[f["query_id"] == "q3"].set_index("entity")
    # q3 top 3: entity 3 (0.8), then 0 and 1 tie at 0.4 -> by id; the truth (1) is already among them.
    assert sorted(q3.index) == [0, 1, 3]
    assert q3.loc[1, "rank"] == 3 and q3.loc[1, "truth_rank"] == 1 and q3.loc[0, "truth_rank"] == 0
    q1 = f[f["query_id"] == "q1"].set_index("entity")
    assert q1.loc[[0, 1, 3], "rank"].tolist() == [1, 2, 3]
    assert math.isnan(q1.loc[3, "truth_utility"]) and q1.loc[1, "truth_utility"] == 0.5
    # A truth outside the top k is still written, with its rank among all entities.
    few = answer_rows(["q"], ["1p"], UTIL[:1], [(np.array([4]), np.array([0.2]))], k=1)
    assert few.set_index("entity").loc[4, "rank"] == 5  # -inf entities 2, 4, 5 last, by id
    assert ans.meta["method"] == "SRC" and ans.label == "ukge_logi SRC"


def test_per_query_and_per_type_values_by_hand(tmp_path: Path) -> None:
    per_query = query_metrics(read_answers(_answers(tmp_path)).frame).set_index("query_id")
    # q2: truth (1, 2); predicted order 1 (0.7), 2 (0.3), 0 (0.2): R = (1, 2), perfect.
    assert per_query.loc["q2", "ndcg"] == pytest.approx(1.0)
    # q3: one answer, tied with entity 0 at 0.4 behind entity 3: ranks 2-3 in either order, so
    # NDCG = E[1/R] = (1/2 + 1/3)/2 = 5/12 (never 1/2 or 1/3 by entity id), AP 0 (no hit in the top 1),
    # correlations undefined.
    assert per_query.loc["q3", "ndcg"] == pytest.approx(5 / 12)
    assert per_query.loc["q3", "map"] == 0.0 and math.isnan(per_query.loc["q3", "tau"])
    summary = summarise(per_query.reset_index())
    assert summary["ndcg"] == {
        "1p": 100.0,
        "2p": pytest.approx(500 / 12, abs=1e-4),
        "avg": pytest.approx((100 + 500 / 12) / 2, abs=1e-4),
    }
    # tau is defined for the 1p queries only, so the average is theirs.
    assert summary["tau"] == {"1p": 100.0, "avg": 100.0}


def test_swapped_answers_give_hand_values(tmp_path: Path) -> None:
    util = UTIL.clone()
    util[1] = torch.tensor([0.2, 0.3, 0.7, INF, 0.1, INF])  # q2: entity 2 first, then 1: R = (2, 1)
    summary = summarise(query_metrics(read_answers(_answers(tmp_path, util=util)).frame))
    ndcg_q2 = (0.5 + 1 / L3) / (1 + 0.5 / L3)
    assert summary["ndcg"]["1p"] == pytest.approx(100 * (1 + ndcg_q2) / 2, abs=1e-4)
    assert summary["tau"]["1p"] == pytest.approx(0.0) and summary["rho"]["1p"] == pytest.approx(0.0)
    assert summary["map"]["1p"] == pytest.approx(100.0)


def test_types_follow_the_paper_order() -> None:
    assert ordered_types({"up", "1p", "zz", "2in", "2i"}) == ["1p", "2i", "2in", "up", "zz"]
    table = markdown_table({"ndcg": {"2p": 50.0, "1p": 100.0, "avg": 75.0}})
    assert table.splitlines()[0] == "| metric | 1p | 2p | avg |"
    assert table.splitlines()[2] == "| NDCG | 100.0 | 50.0 | 75.0 |"


def test_methods_follow_backbone_then_calibration_order() -> None:
    names = ["ukge_logi SRC(D+L)", "beurre SRC(L)", "ukge_logi SRC", "ukge_logi SRC(L)", "ukge_logi SRC(D)", "x"]
    assert method_order(names) == [
        "x",
        "beurre SRC(L)",
        "ukge_logi SRC",
        "ukge_logi SRC(D)",
        "ukge_logi SRC(L)",
        "ukge_logi SRC(D+L)",
    ]


def test_docs_results_merge_and_the_page_renders_them(tmp_path: Path) -> None:
    """update_results writes the data only (no page); a method evaluated again replaces its own entry, and the
    results page's tables render what was written."""
    docs = tmp_path / "docs"
    docs.mkdir()
    a = _answers(tmp_path, "SRC")
    b = _answers(tmp_path, "SRC(D)")
    update_results(evaluate_answers(a), docs)
    update_results(evaluate_answers(tmp_path), docs)  # both files; SRC again replaces, never duplicates
    results = json.loads((docs / "results.json").read_text())
    assert set(results["toy"]) == {"ukge_logi SRC", "ukge_logi SRC(D)"}
    assert results["toy"]["ukge_logi SRC"]["ndcg"]["1p"] == 100.0
    protocol = json.loads((docs / "results_protocol.json").read_text())
    assert set(protocol["toy"]["ukge_logi SRC"]) == {
        "paper_protocol", "paper_single_as_zero", "paper_truth", "undefined", "doubly_tied", "random"}
    assert json.loads((docs / "results_counts.json").read_text())["toy"]["ukge_logi SRC"] == {"1p": 2, "2p": 1}
    assert not (docs / "results.md").exists()
    summary = results["toy"]["ukge_logi SRC(D)"]
    main = render("results.main", docs).splitlines()
    row = next(line for line in main if "| ukge_logi SRC(D) |" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["toy", "ukge_logi SRC(D)"]
    assert cells[2:6] == [f"{summary[m]['avg']:.1f}" for m in ("tau", "rho", "map", "ndcg")]
    pp = protocol["toy"]["ukge_logi SRC(D)"]["paper_protocol"]
    assert cells[6] == " / ".join(f"{pp[m]['avg']:.1f}" for m in ("tau", "rho", "map", "ndcg"))
    assert main.index(next(x for x in main if "| ukge_logi SRC |" in x)) < main.index(row)  # SRC before SRC(D)
    assert b.exists()


def test_backbones_are_recorded_beside_the_tables_and_are_not_a_data_set(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    a = _answers(tmp_path, "SRC")
    good = {"model": "ukge_logi", "valid_mse": 0.04, "mean_valid_mse": 0.053, "test_mse": 0.05,
            "test_neg_mse": 0.2, "test_negatives": "sampled: one corruption per test fact (seed 0)"}
    update_results(evaluate_answers(a), docs, {"toy": good})
    other = {**good, "model": "ukge_rect", "valid_mse": 0.06, "test_neg_mse": 0.3, "test_negatives": "published"}
    update_results([], docs, {"ppi5k": other})  # another data set's backbone joins, the first stays
    update_results(evaluate_answers(a), docs)  # tables without a backbone keep the recorded ones
    results = json.loads((docs / "results.json").read_text())
    assert results["backbones"] == {"toy": good, "ppi5k": other}
    assert set(results) == {"toy", "backbones"}
    table = render("results.backbones", docs)
    assert "| PPI5k | ukge_rect, ? epochs, kept ? (?) | 0.0600 | 0.0530 | no | 0.0500 | - | 0.3000 (published) |" in table
    assert "| toy | ukge_logi, ? epochs, kept ? (?) | 0.0400 | 0.0530 | yes | 0.0500 | - | 0.2000 (sampled) |" in table
    assert table.index("| PPI5k |") < table.index("| toy |")  # the paper's data sets first
    assert "backbones" not in render("results.main", docs)


def test_paper_comparison_is_in_the_docs(tmp_path: Path) -> None:
    frame = answer_rows(["q1"], ["1p"], UTIL[:1], TRUTH[:1], k=3)
    path = write_answers(
        frame, tmp_path / "a.parquet", {"dataset": "ppi5k", "method": "SRC(D+L)", "query_set": "x"}
    )
    update_results(evaluate_answers(path), tmp_path)
    main = render("results.main", tmp_path)
    row = next(line for line in main.splitlines() if line.startswith("| PPI5k | SRC(D+L) |"))
    assert row.endswith("| 58.2 / 68.7 / 64.1 / 70.1 |")  # the paper's row beside ours
    assert PAPER["cn15k"]["SRC(D+L)"]["ndcg"] == 23.2
    headline = render("results.headline", tmp_path)
    assert "| paper SRC(D+L) (its protocol) | 58.2 | 68.7 | 64.1 | 70.1 |" in headline


def test_plot_is_a_png(tmp_path: Path) -> None:
    out = plot_methods(
        {"a": {"ndcg": {"1p": 50.0, "avg": 50.0}}, "b": {"ndcg": {"1p": 70.0, "avg": 70.0}}},
        tmp_path / "p.png",
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_evaluate_table_json_and_files(tmp_path: Path) -> None:
    path = _answers(tmp_path)
    res = CliRunner().invoke(cli, ["evaluate", str(path), "--plot", str(tmp_path / "p.png")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("toy  ukge_logi SRC  (3 queries: 1p 2, 2p 1)")
    assert lines[1].split() == ["metric", "1p", "2p", "avg"]
    assert lines[5].split() == ["MAP", "100.0", "0.0", "50.0"]
    assert lines[6].split() == ["NDCG", "100.0", "41.7", "70.8"]  # q3's answer tied at ranks 2-3: 5/12
    assert lines[7] == "tau undefined on 1 queries (one answer, or constant true or predicted utilities)"
    # the paper protocol breaks q3's tie by id (entity 0 first): rank 3, NDCG 1/3
    assert lines[9].startswith("paper protocol") and "ndcg 66.7" in lines[9]
    assert (tmp_path / "ukge_logi-SRC.metrics.json").exists() and (tmp_path / "p.png").exists()
    assert "Paper protocol" in (tmp_path / "ukge_logi-SRC.metrics.md").read_text()
    res = CliRunner().invoke(cli, ["evaluate", str(path), "--json"])
    doc = json.loads(res.output)
    assert doc[0]["summary"]["map"]["2p"] == 0.0
    assert doc[0]["undefined"]["tau"] == {"2p": 1, "all": 1}
    assert doc[0]["paper_protocol"]["ndcg"]["2p"] == pytest.approx(100 / 3, abs=1e-4)
    # q1's answers (0, 1) and q2's (1, 2) are tied in neither truth nor prediction
    assert doc[0]["doubly_tied"] == {"tied_pairs": 0, "pairs": 2, "share": 0.0, "share_all": 0.0}


def test_cli_evaluate_bad_input_is_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "x.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(bogus)
    res = CliRunner().invoke(cli, ["evaluate", str(bogus)])
    assert res.exit_code == 2
    assert res.output.strip().count("\n") == 0 and "not an answers file" in res.output
    res = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such answers file" in res.output


def _random_batch(rng: np.random.Generator, b: int, n: int, levels: int = 0) -> tuple[np.ndarray, list]:
    """b utility rows over n entities (ties, -inf, NaN, both zeros, distinct values; with levels, ties
    at that many values) and up to 6 true answers each (with levels: up to n), best first."""
    util = rng.choice([-math.inf, math.nan, -0.0, 0.0, 0.2, 0.5, 0.7, 1.0], size=(b, n)).astype(np.float32)
    distinct = rng.random((b, n)) < rng.random()  # a drawn share of the entities with values of their own
    util[distinct] = rng.uniform(-1, 2, int(distinct.sum())).astype(np.float32)
    if levels:
        util = np.where(rng.random((b, n)) < 0.9, rng.integers(0, levels, (b, n)) / levels, util).astype(np.float32)
    truth = []
    for _ in range(b):
        ents = rng.choice(n, size=rng.integers(0, (n if levels else min(n, 6)) + 1), replace=False)
        truth.append((ents, np.sort(rng.uniform(0.1, 1, len(ents)))[::-1]))
    return util, truth


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 4), st.integers(3, 30), st.integers(1, 5))
def test_rows_then_metrics_agree_with_direct_ranks(seed: int, b: int, n: int, k: int) -> None:
    """answer_rows keeps only the top k and the truths, yet the metrics equal those computed from the full
    utility vectors (Ranked.from_utilities: the numpy path)."""
    from pipeline.core.metrics import METRICS, Ranked

    rng = np.random.default_rng(seed)
    util, truth = _random_batch(rng, b, n)
    frame = answer_rows([f"q{i}" for i in range(b)], ["1p"] * b, torch.from_numpy(util), truth, k=k)
    per_query = query_metrics(frame).set_index("query_id")
    for i in range(b):
        full = np.full(n, -np.inf)
        full[truth[i][0]] = truth[i][1]
        q = Ranked.from_utilities(full, util[i], truth[i][0])
        for name, m in METRICS.items():
            expected = m(q) if q.n else math.nan
            got = per_query.loc[f"q{i}", name]
            assert (math.isnan(expected) and math.isnan(got)) or got == pytest.approx(expected), name


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 4), st.integers(1, 80), st.integers(1, 40), st.sampled_from([0, 3, 40]))
def test_answer_rows_equal_a_row_by_row_construction(seed: int, b: int, n: int, k: int, levels: int) -> None:
    """answer_rows builds the batch's frame at once; here each row is built on its own from the numpy rank
    oracle: the k best entities by rank, then the truths not among them (by id), with their true rank
    (position in the truth list) and utility. Same rows, values and dtypes. With 40 levels a row's kept
    entities hold more than 8 tied values (ranked_rows orders those ties another way)."""
    from pipeline.core.metrics import ranks_of

    rng = np.random.default_rng(seed)
    util, truth = _random_batch(rng, b, n, levels)
    u64 = np.where(np.isnan(util), -np.inf, util.astype(np.float64))
    ids, types = [f"q{i}" for i in range(b)], [str(rng.choice(["1p", "2p"])) for _ in range(b)]
    frame = answer_rows(ids, types, torch.from_numpy(util), truth, k=k)
    rows = []
    for i in range(b):
        rank = ranks_of(util[i], np.arange(n))
        top = [int(e) for e in np.argsort(rank)[: min(k, n)]]
        true = {int(e): j for j, e in enumerate(truth[i][0])}
        for e in top + sorted(set(true) - set(top)):
            j = true.get(e)
            first = 1 + int(np.sum(u64[i] > u64[i, e]))
            ties = int(np.sum(u64[i] == u64[i, e]))
            rows.append(
                (ids[i], types[i], e, util[i, e], rank[e], first, ties, math.nan if j is None else truth[i][1][j],
                 0 if j is None else j + 1)
            )
    expected = pd.DataFrame(rows, columns=list(frame.columns)).astype(
        {"entity": np.int64, "utility": np.float32, "rank": np.int64, "rank_first": np.int64, "ties": np.int64,
         "truth_utility": np.float64, "truth_rank": np.int32}
    )
    if b == 0:
        assert frame.empty and list(frame.columns) == list(expected.columns)
    else:
        pd.testing.assert_frame_equal(frame, expected)


def test_random_level_equals_an_answered_constant_predictor(tmp_path: Path) -> None:
    """The report's chance level (metrics.chance: one tie group of n_entities) equals what an answers file
    of constant predictions scores through the whole path (answer rows, tie groups, metrics), and leaves
    tau/rho undefined on every query (a model that knows nothing scores the chance level)."""
    from pipeline.stages.evaluate import evaluate_file

    rng = np.random.default_rng(5)
    n, b = 40, 6
    truth = []
    for _ in range(b):
        ents = rng.choice(n, size=int(rng.integers(1, 12)), replace=False)
        truth.append((ents, np.sort(rng.choice([0.2, 0.5, 0.5, 0.9], len(ents)))[::-1]))
    const = torch.full((b, n), 0.3)
    frame = answer_rows([f"q{i}" for i in range(b)], ["2p"] * b, const, truth, k=5)
    meta = {"dataset": "toy", "method": "SRC", "query_set": "toy.parquet", "n_entities": n}
    report = evaluate_file(write_answers(frame, tmp_path / "c.parquet", meta))
    for m in ("map", "ndcg"):
        assert report["summary"][m]["2p"] == pytest.approx(report["random"][m]["2p"], abs=1e-9)
    assert "2p" not in report["summary"]["tau"] and report["undefined"]["tau"]["all"] == b
    # by hand for one query: n answers among N entities, E[1/R] = H(N)/N for each
    per_query = query_metrics(frame, n_entities=n).set_index("query_id")
    k = len(truth[0][0])
    d = 1 / np.log2(np.arange(2, k + 2))
    t = truth[0][1]
    disc = np.array([d[t == v].mean() for v in t])
    expected = (sum(1 / j for j in range(1, n + 1)) / n) * disc.sum() / np.sum(disc / np.arange(1, k + 1))
    assert per_query.loc["q0", "random_ndcg"] == pytest.approx(expected, abs=1e-12)


def test_an_answers_file_of_format_1_says_what_to_rerun(tmp_path: Path) -> None:
    """Format 1 had no tie groups: evaluating it is refused in one line naming the file and the command."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.formats import meta as metafile

    path = tmp_path / "old.parquet"
    raw = metafile.encode("soft-query-answers/1", {"dataset": "toy", "method": "SRC", "query_set": "q"}, ())
    pq.write_table(pa.table({"query_id": ["q1"]}).replace_schema_metadata({metafile.META_KEY: raw}), path)
    res = CliRunner().invoke(cli, ["evaluate", str(path)])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "old.parquet" in res.output and "re-run `pipeline answer`" in res.output


def test_queries_without_a_predicted_answer_are_counted_and_said(tmp_path: Path, capsys) -> None:
    """21 of 50 test queries had no answer over the predicted facts and the table
    averaged them in without a word. The math stays (all entities tied: the chance level); the report counts
    them per type, the markdown says so, and a warning line goes to stderr (CLI and Python alike)."""
    from click.testing import CliRunner

    from pipeline.cli import cli
    from pipeline.stages.evaluate import evaluate_file, protocol_notes

    util = UTIL.clone()
    util[1] = torch.full((6,), INF)  # q2 (1p): nothing predicted at all
    util[2] = torch.tensor([0.0, INF, INF, 0.0, INF, INF])  # q3 (2p): nothing above 0 either
    path = _answers(tmp_path, util=util)
    report = evaluate_file(path)
    assert report["unanswered"] == {"1p": 1, "2p": 1, "all": 2, "of": 3}
    line = ("ukge_logi SRC: 2 of 3 queries have no answer over the predicted facts (1p 1, 2p 1); the metrics rank "
            "their true answers among all entities tied (the chance level)")
    assert capsys.readouterr().err == f"warning: {line}\n"
    assert line + "." in protocol_notes(report)
    per_query = query_metrics(read_answers(path).frame).set_index("query_id")
    assert per_query["answered"].to_dict() == {"q1": True, "q2": False, "q3": False}
    # q2's two answers in one tie group of all 6 entities: E[1/R] = H(6)/6 each, discounted by hand
    h6 = (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 6
    assert per_query.loc["q2", "ndcg"] == pytest.approx(h6 * (1 + 1 / L3) / (1 + 0.5 / L3))
    assert evaluate_file(_answers(tmp_path / "all", util=UTIL))["unanswered"] == {}
    res = CliRunner().invoke(cli, ["evaluate", str(path)])
    assert res.exit_code == 0 and f"warning: {line}" in res.stderr


def test_the_chance_level_stands_beside_map_and_ndcg_and_every_entity_answers_are_flagged(tmp_path: Path, capsys) -> None:
    """A MAP of 100 that means nothing (alpha 0 on a small dense graph: every entity an answer) showed
    without a word: now `pipeline evaluate` and `pl.evaluate` show `MAP chance` / `NDCG chance` rows beside
    the metrics, and name the types where every entity is an answer of some query (a warning line)."""
    import pipeline as pl
    from pipeline.stages.evaluate import evaluate_file

    n = 6
    # q1 (1p): 2 answers of 6 entities, predicted perfectly; q2, q3 (2p): every entity an answer, predicted
    # in reverse: MAP is still 100 (every rank holds an answer), and so is the chance level
    truth = [(np.array([0, 1]), np.array([1.0, 0.5])),
             (np.arange(n), np.linspace(1.0, 0.5, n)), (np.arange(n), np.linspace(1.0, 0.5, n))]
    util = torch.tensor([[0.9, 0.5, INF, 0.0, INF, INF], list(np.linspace(0.1, 0.6, n)), list(np.linspace(0.1, 0.6, n))],
                        dtype=torch.float32)
    frame = answer_rows(["q1", "q2", "q3"], ["1p", "2p", "2p"], util, truth, k=3)
    meta = {"dataset": "toy", "method": "SRC", "backbone": "ukge_logi", "query_set": "toy.parquet", "n_entities": n}
    path = write_answers(frame, tmp_path / "a.parquet", meta)
    report = evaluate_file(path)
    assert report["every_entity"] == {"2p": [2, 2]}
    line = ("ukge_logi SRC: every entity is an answer in some queries (2p 2 of 2): any ranking scores MAP and NDCG "
            "100 there; sample with a higher alpha (or on a larger graph) for metrics that mean something")
    assert capsys.readouterr().err == f"warning: {line}\n"
    table = pl.evaluate(path)
    assert list(table.index) == ["tau", "rho", "MAP", "NDCG", "MAP chance", "NDCG chance"]
    assert table.loc["MAP", "2p"] == pytest.approx(100.0) and table.loc["MAP chance", "2p"] == pytest.approx(100.0)
    # 1p by brute force over the 15 equally likely rank pairs of its 2 answers among 6 entities, the design's
    # MAP = (1/n) sum_{k<=n} hit_k * hits(<=k) / k with n = 2: 4/15
    from itertools import combinations

    def map_at(ranks: tuple[int, ...], k_max: int = 2) -> float:
        return sum(sum(r <= k for r in ranks) / k for k in range(1, k_max + 1) if k in ranks) / k_max

    aps = [map_at(pair) for pair in combinations(range(1, n + 1), 2)]
    assert np.mean(aps) == pytest.approx(4 / 15)
    assert table.loc["MAP chance", "1p"] == pytest.approx(100 * np.mean(aps), abs=1e-4)
    assert table.loc["MAP", "1p"] == pytest.approx(100.0) and table.loc["MAP chance", "1p"] < 50
    assert table.attrs["every_entity"] == {"2p": [2, 2]}
    res = CliRunner().invoke(cli, ["evaluate", str(path)])
    assert res.exit_code == 0 and f"warning: {line}" in res.stderr
    rows = {r.split()[0] + (" chance" if " chance " in r else ""): r for r in res.stdout.splitlines() if r.strip()}
    assert rows["MAP chance"].split()[-3:] == [f"{table.loc['MAP chance', '1p']:.1f}", "100.0",
                                               f"{table.loc['MAP chance', 'avg']:.1f}"]
