"""Tie-aware metrics of design section 1: hand-computed cases with ties, a brute-force oracle over every
order of every tie group, scipy for tau-b and rho, and the invariants (constant predictions, the true
utilities, relabelling the entities)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.errors import UnknownNameError
from pipeline.core.metrics import (
    METRICS,
    PAPER_DRAWS,
    PAPER_SEED,
    Ranked,
    ap_of_ranks,
    average_precision,
    doubly_tied_pairs,
    evaluate_query,
    expected_inverse_rank,
    get_metric,
    harmonic,
    kendall_tau,
    metric_columns,
    ndcg,
    ndcg_of_ranks,
    paper_protocol,
    paper_truth_order,
    rank_entities,
    ranks_of,
    spearman_rho,
    tie_groups,
    truth_discounts,
)
from pipeline.sampling.truth import cut_answers
from tests.cases import MetricCase

L3 = math.log2(3)
L5 = math.log2(5)
NEG = -math.inf


def ranked(truth: list[float], predicted: list[float], n_answers: int | None = None) -> Ranked:
    """A query over len(truth) entities whose answers are the first n_answers (default: every positive)
    entities, listed best first by truth."""
    t = np.asarray(truth, dtype=np.float64)
    ans = np.argsort(-t, kind="stable")[: n_answers if n_answers is not None else int((t > 0).sum())]
    return Ranked.from_utilities(t, np.asarray(predicted, dtype=np.float64), ans)


# --------------------------------------------------------------------------------- hand-computed cases

# (truth utilities of all entities, predicted utilities, {metric: value}); answers = the positive truths.
HAND: list[tuple[list[float], list[float], dict[str, float]]] = [
    # perfect, no ties
    ([3, 2, 1, 0], [0.9, 0.5, 0.1, 0.0], {"ndcg": 1.0, "map": 1.0, "tau": 1.0, "rho": 1.0}),
    # a_1 and a_2 swapped, a_3 in place: predicted ranks 2, 1, 3
    (
        [3, 2, 1, 0],
        [0.5, 0.9, 0.1, 0.0],
        {"ndcg": (1 / 2 + 1 / L3 + (1 / 3) / 2) / (1 + 1 / (2 * L3) + (1 / 3) / 2), "map": 1.0, "tau": 1 / 3, "rho": 0.5},
    ),
    # a_1, a_2 tied in prediction at the top (ranks 1-2 in either order), a_3 last of 4:
    # E[1/R] = 3/4 for both; tau-b: pairs (1,2) tied in p only, (1,3), (2,3) concordant -> 2 / sqrt(3 * 2)
    # rho: ranks of t (3, 2, 1), of p (2.5, 2.5, 1) -> Pearson = 0.866...
    # MAP: ranks 1-2 are both answers (hits 1/1 + 2/2), rank 3 is not -> (1 + 1 + 0) / 3
    (
        [3, 2, 1, 0],
        [0.5, 0.5, -1.0, 0.0],
        {
            "ndcg": (0.75 + 0.75 / L3 + (1 / 4) / 2) / (1 + 1 / (2 * L3) + (1 / 3) / 2),
            "map": 2 / 3,
            "tau": 2 / math.sqrt(6),
            "rho": math.sqrt(3) / 2,
        },
    ),
    # the truth tied: a_1, a_2 at 2.0 share the discount (1 + 1/log2 3)/2; perfect prediction scores 1,
    # and so does a prediction that breaks the truth's tie either way
    ([2, 2, 1, 0], [0.7, 0.7, 0.2, 0.0], {"ndcg": 1.0, "map": 1.0, "tau": 1.0, "rho": 1.0}),
    ([2, 2, 1, 0], [0.6, 0.7, 0.2, 0.0], {"ndcg": 1.0, "map": 1.0, "tau": 2 / math.sqrt(6), "rho": math.sqrt(3) / 2}),
    # constant predictions over 4 entities, 2 answers: tau/rho undefined; MAP and NDCG of a random ranking:
    # E[1/R] = H(4)/4 = 25/48 for each; MAP = (1/2)[ (2/4)(1)/1 + (2/4)(1 + 1/3)/2 ] = 5/12
    (
        [2, 1, 0, 0],
        [0.3, 0.3, 0.3, 0.3],
        {"ndcg": (25 / 48) * (1 + 1 / L3) / (1 + 1 / (2 * L3)), "map": 5 / 12, "tau": NEG, "rho": NEG},
    ),
    # one answer: correlations undefined
    ([1, 0, 0], [0.1, 0.5, 0.2], {"ndcg": 1 / 3, "map": 0.0, "tau": NEG, "rho": NEG}),
]


def test_every_registered_metric_has_hand_computed_cases() -> None:
    """The meta-test: a metric added to the registry without a hand-computed case fails here."""
    for _, _, expected in HAND:
        assert set(expected) == set(METRICS)


@pytest.mark.parametrize(("truth", "pred", "expected"), HAND)
def test_hand_computed(truth: list[float], pred: list[float], expected: dict[str, float]) -> None:
    got = evaluate_query(ranked(truth, pred))
    for name, value in expected.items():
        if value == NEG:  # undefined
            assert math.isnan(got[name]), name
        else:
            assert got[name] == pytest.approx(value, abs=1e-12), name


def test_metric_columns_equal_query_by_query() -> None:
    qs = [ranked(t, p) for t, p, _ in HAND] + [Ranked(np.zeros(0), np.zeros(0), *(np.zeros(0, np.int64),) * 3)]
    cols = metric_columns(qs, paper=True)
    for i, q in enumerate(qs[:-1]):
        for name, value in evaluate_query(q).items():
            assert cols[name][i] == pytest.approx(value, nan_ok=True)
        for name, value in paper_protocol(q, key=i).items():  # keys default to the positions
            assert cols[f"paper_{name}"][i] == pytest.approx(value, nan_ok=True)
    assert all(math.isnan(cols[name][-1]) for name in METRICS)


# --------------------------------------------------------------------------------------- tie groups


def test_tie_groups_hand_example() -> None:
    u = torch.tensor([0.5, NEG, 0.9, 0.5, math.nan])
    first, ties = tie_groups(u)
    # 0.9 alone at rank 1; the two 0.5 share ranks 2-3; -inf and NaN (as -inf) share ranks 4-5
    assert first.tolist() == [2, 4, 1, 2, 4]
    assert ties.tolist() == [2, 2, 1, 2, 2]
    assert rank_entities(u).tolist() == [2, 4, 1, 3, 5]  # the id order: listing and paper protocol only


values = st.sampled_from([NEG, 0.0, 0.1, 0.25, 0.5, 1.0, 2.0, math.nan])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(values, min_size=6, max_size=6), min_size=1, max_size=4))
def test_tie_groups_agree_with_numpy_oracle(rows: list[list[float]]) -> None:
    u = np.array(rows)
    first, ties = tie_groups(torch.tensor(u))
    v = np.where(np.isnan(u), NEG, u)
    for b in range(len(rows)):
        assert first[b].tolist() == [1 + int(np.sum(v[b] > x)) for x in v[b]]
        assert ties[b].tolist() == [int(np.sum(v[b] == x)) for x in v[b]]
    assert rank_entities(torch.tensor(u)).tolist() == [ranks_of(r, np.arange(6)).tolist() for r in u]


def test_harmonic_and_expected_inverse_rank_exact() -> None:
    for n in (0, 1, 2, 7, 100, 15000):
        assert float(harmonic(n)) == pytest.approx(sum(1 / k for k in range(1, n + 1)), rel=1e-13, abs=1e-15)
    assert float(expected_inverse_rank(np.array([3]), np.array([2]))[0]) == pytest.approx((1 / 3 + 1 / 4) / 2)
    assert truth_discounts(np.array([2.0, 2.0, 1.0])).tolist() == pytest.approx(
        [(1 + 1 / L3) / 2, (1 + 1 / L3) / 2, 1 / 2]
    )


# ---------------------------------------------------------------------------------- brute-force oracle


def _orders(values: np.ndarray) -> list[np.ndarray]:
    """Every strict order of the indices consistent with values descending (ties in every order)."""
    groups = [np.flatnonzero(values == v) for v in sorted(set(values.tolist()), reverse=True)]
    out = []
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        out.append(np.concatenate([np.asarray(p, dtype=np.int64) for p in perms]))
    return out


def _brute(truth: np.ndarray, pred: np.ndarray, answers: np.ndarray) -> dict[str, float]:
    """MAP and NDCG as expectations over every order of the predicted ties (and, for NDCG, of the truth's
    ties), the NDCG normalised by the same expectation with the truth as the prediction."""
    aps, dcg = [], []
    for order in _orders(pred):
        rank = np.empty(len(pred), dtype=np.int64)
        rank[order] = np.arange(1, len(pred) + 1)
        aps.append(ap_of_ranks(rank[answers]))
        for t_order in _orders(truth[answers]):
            dcg.append(np.sum((1 / rank[answers[t_order]]) / np.log2(np.arange(2, len(answers) + 2))))
    ideal = []
    for order in _orders(truth):
        rank = np.empty(len(truth), dtype=np.int64)
        rank[order] = np.arange(1, len(truth) + 1)
        for t_order in _orders(truth[answers]):
            ideal.append(np.sum((1 / rank[answers[t_order]]) / np.log2(np.arange(2, len(answers) + 2))))
    return {"map": float(np.mean(aps)), "ndcg": float(np.mean(dcg) / np.mean(ideal))}


small = st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(small, st.data())
def test_map_and_ndcg_equal_brute_force_expectations(truth: list[float], data: st.DataObject) -> None:
    t = np.asarray(truth, dtype=np.float64)
    if not (t > 0).any():
        t[0] = 1.0
    p = np.asarray(data.draw(st.lists(st.sampled_from([NEG, 0.0, 0.3, 0.6]), min_size=len(t), max_size=len(t))))
    answers = np.argsort(-t, kind="stable")[: int((t > 0).sum())]
    q = Ranked.from_utilities(t, p, answers)
    expected = _brute(t, p, answers)
    assert average_precision(q) == pytest.approx(expected["map"], abs=1e-12)
    assert ndcg(q) == pytest.approx(expected["ndcg"], abs=1e-12)


def _tau_b_pairs(t: np.ndarray, p: np.ndarray) -> float:
    """Kendall's tau-b by counting every pair (the oracle of pipeline.core.metrics.kendall_tau)."""
    conc = disc = tied_t = tied_p = 0
    for i, j in itertools.combinations(range(len(t)), 2):
        st_, sp = np.sign(t[i] - t[j]) if t[i] != t[j] else 0, (1 if p[i] > p[j] else -1) if p[i] != p[j] else 0
        tied_t += st_ == 0
        tied_p += sp == 0
        conc += st_ * sp > 0
        disc += st_ * sp < 0
    pairs = len(t) * (len(t) - 1) // 2
    return (conc - disc) / math.sqrt((pairs - tied_t) * (pairs - tied_p))


def _doubly_tied_pairs(t: np.ndarray, p: np.ndarray) -> int:
    return sum(t[i] == t[j] and p[i] == p[j] for i, j in itertools.combinations(range(len(t)), 2))


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from([NEG, 0.0, 0.1, 0.5, 0.9])), min_size=2, max_size=30))
def test_correlations_agree_with_scipy(pairs: list[tuple[int, float]]) -> None:
    t = np.array([a for a, _ in pairs], dtype=np.float64) + 1.0
    p = np.array([b for _, b in pairs], dtype=np.float64)
    q = Ranked(t, p, np.ones(len(t), np.int64), np.ones(len(t), np.int64))
    constant = np.all(t == t[0]) or np.all(p == p[0])
    pf = np.where(np.isinf(p), -10.0, p)  # scipy's ranks of -inf: the same as any value below the rest
    tau_ref = math.nan if constant else _tau_b_pairs(t, p)
    rho_ref = scipy.stats.spearmanr(t, pf).statistic
    assert doubly_tied_pairs(q) == (_doubly_tied_pairs(t, p), len(t) * (len(t) - 1) // 2)
    for ours, ref in ((kendall_tau(q), tau_ref), (spearman_rho(q), rho_ref)):
        if constant:
            assert math.isnan(ours)
        else:
            assert ours == pytest.approx(ref, abs=1e-9)


def test_long_tied_answer_lists() -> None:
    """A truth tie group of many answers (up to every entity on CN15k): tau-b and the doubly tied pairs
    against counting every pair."""
    rng = np.random.default_rng(3)
    t = rng.integers(0, 5, 400).astype(np.float64)
    p = rng.integers(0, 4, 400).astype(np.float64) + 0.5 * t
    p[:30] = -math.inf
    q = Ranked(t, p, np.ones(400, np.int64), np.ones(400, np.int64))
    assert kendall_tau(q) == pytest.approx(_tau_b_pairs(t, p), abs=1e-12)
    assert doubly_tied_pairs(q)[0] == _doubly_tied_pairs(t, p)


# -------------------------------------------------------------------------------------------- invariants


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([NEG, 0.0, 0.2, 0.5, 0.5, 1.0, 1.5]), min_size=2, max_size=40), st.data())
def test_invariants_over_random_queries(truth: list[float], data: st.DataObject) -> None:
    """The true utilities score 1 on every defined metric; constant predictions leave tau/rho undefined
    and score a random ranking's MAP/NDCG; relabelling the entities changes no metric."""
    t = np.asarray(truth, dtype=np.float64)
    n_ans = int(((t > 0) & np.isfinite(t)).sum())
    if n_ans == 0:
        return
    answers = np.argsort(-t, kind="stable")[:n_ans]
    perfect = evaluate_query(Ranked.from_utilities(t, t, answers))
    assert perfect["map"] == pytest.approx(1.0) and perfect["ndcg"] == pytest.approx(1.0)
    for name in ("tau", "rho"):
        assert math.isnan(perfect[name]) == (n_ans < 2 or np.all(t[answers] == t[answers][0]))
        if not math.isnan(perfect[name]):
            assert perfect[name] == pytest.approx(1.0)

    n = len(t)
    const = evaluate_query(Ranked.from_utilities(t, np.full(n, 0.25), answers))
    assert math.isnan(const["tau"]) and math.isnan(const["rho"])
    # a random ranking: every answer equally likely at every rank
    assert const["ndcg"] == pytest.approx(ndcg(Ranked.from_utilities(t, np.zeros(n), answers)))
    k = np.arange(1, n_ans + 1)
    random_ap = np.sum((n_ans / n) * (1 + (k - 1) * (n_ans - 1) / max(n - 1, 1)) / k) / n_ans
    assert const["map"] == pytest.approx(random_ap)

    p = np.asarray(data.draw(st.lists(st.sampled_from([NEG, 0.0, 0.3, 0.3, 0.7]), min_size=n, max_size=n)))
    perm = np.asarray(data.draw(st.permutations(list(range(n)))))  # entity e gets id perm[e]
    before = evaluate_query(Ranked.from_utilities(t, p, answers))
    t2, p2 = np.empty(n), np.empty(n)
    t2[perm], p2[perm] = t, p
    after = evaluate_query(Ranked.from_utilities(t2, p2, perm[answers]))
    for name in METRICS:
        assert after[name] == pytest.approx(before[name], nan_ok=True), name


def test_constant_prediction_scores_exactly_a_random_ranking_by_enumeration() -> None:
    """MAP of constant predictions = the mean AP over all N! rankings (N = 6, 3 answers)."""
    n, answers = 6, np.array([0, 1, 2])
    t = np.array([3.0, 2.0, 1.0, 0.0, 0.0, 0.0])
    mean_ap = np.mean([ap_of_ranks(np.asarray(perm)[answers] + 1) for perm in itertools.permutations(range(n))])
    q = Ranked.from_utilities(t, np.full(n, 0.7), answers)
    assert average_precision(q) == pytest.approx(mean_ap, abs=1e-12)


# ------------------------------------------------------------------------------------ the truth's cut


def test_cut_keeps_the_whole_tie_group() -> None:
    u = torch.tensor([0.5, 0.9, 0.5, 0.5, 0.2, -1.0, 0.5])
    ids, vals = cut_answers(u, k=2)
    # 0.9 first, then every 0.5 (the group crossing the cut), never only the lowest ids
    assert ids.tolist() == [1, 0, 2, 3, 6]
    assert vals.tolist() == [pytest.approx(0.9), 0.5, 0.5, 0.5, 0.5]
    assert cut_answers(u, k=1)[0].tolist() == [1]  # no tie at the cut: exactly k
    assert cut_answers(u, k=10)[0].tolist() == [1, 0, 2, 3, 6, 4]  # fewer answers than k


# ------------------------------------------------------------------------------------ paper protocol


def test_paper_protocol_hand_example() -> None:
    """The id bias once measured: a constant predictor against a truth whose ties were kept by id
    scores every pair discordant when the truth is read in our stored order reversed (the rule before)."""
    t = np.array([1.0, 1.0, 1.0, 0.0, 0.0])
    q = Ranked.from_utilities(t, np.zeros(5), np.array([0, 1, 2]))
    paper = paper_protocol(q, tie_order="reversed")
    # truth order reversed within the tie: (2, 1, 0) with id ranks (3, 2, 1): every pair discordant
    assert paper["tau"] == pytest.approx(-1.0) and paper["map"] == pytest.approx(1.0)
    assert paper["ndcg"] == pytest.approx(ndcg_of_ranks(np.array([3, 2, 1])))
    ours = evaluate_query(q)
    assert math.isnan(ours["tau"]) and ours["map"] < 0.75
    assert doubly_tied_pairs(q) == (3, 3)


def test_paper_protocol_single_answer_left_out_of_tau_rho() -> None:
    """The authors' evaluation adds tau and rho only for queries with more than one answer and divides by
    their number: a single-answer query is left out (NaN), not counted as 0; MAP and NDCG count it."""
    one = Ranked.from_utilities(np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([0]))
    for order in ("shuffled", "reversed"):
        got = paper_protocol(one, tie_order=order)
        assert math.isnan(got["tau"]) and math.isnan(got["rho"])
        assert got["map"] == 0.0 and got["ndcg"] == pytest.approx(0.5)  # predicted at rank 2 of 2
    assert math.isnan(evaluate_query(one)["tau"])
    with pytest.raises(ValueError, match="tie_order"):
        paper_protocol(one, tie_order="by id")


def test_paper_protocol_ties_read_in_a_seeded_random_order() -> None:
    """A fully doubly tied query (every answer tied in truth and prediction): read in our id order it is
    all discordant (tau -1); in the published files' order, unrelated to ids, it is concordant about as
    often as discordant; the order is a function of the query's key alone (the same twice)."""
    n = 12
    q = Ranked.from_utilities(np.r_[np.ones(n), 0.0], np.zeros(n + 1), np.arange(n))
    assert paper_protocol(q, tie_order="reversed")["tau"] == pytest.approx(-1.0)
    taus = [paper_protocol(q, key=k, draws=1)["tau"] for k in range(300)]
    assert abs(float(np.mean(taus))) < 0.05 and min(taus) > -1.0
    # the mean over PAPER_DRAWS orders is that expectation, for each key alone
    assert all(abs(paper_protocol(q, key=k)["tau"]) < 0.15 for k in range(20))
    assert paper_protocol(q, key=7) == paper_protocol(q, key=7)
    assert paper_protocol(q, key=7) != paper_protocol(q, key=8)
    cols = metric_columns([q, q], paper=True, keys=[7, 8])
    assert cols["paper_tau"][0] == paper_protocol(q, key=7)["tau"]
    assert cols["paper_tau"][1] == paper_protocol(q, key=8)["tau"]
    # ties are shuffled only within a group of equal true utilities: distinct values keep their order
    order = paper_truth_order(np.array([3.0, 2.0, 2.0, 2.0, 1.0]), np.random.default_rng(0))
    assert order[0] == 0 and order[-1] == 4 and sorted(order[1:4]) == [1, 2, 3]


def _authors_evaluation(utility: np.ndarray, file_answers: list[int]) -> dict[str, float]:
    """An independent re-statement of the authors' per-query evaluation: file_answers as their query file
    stores them (ascending by true value, at most 100), read reversed; ranks from a descending argsort of
    the predicted utilities (ties by index, as torch's stable sort); tau and rho by scipy between the
    positions 1..n and the ranks (only when n > 1); NDCG and MAP over the first n predictions."""
    u = torch.as_tensor(np.nan_to_num(utility, neginf=-1e30))
    argsort = torch.argsort(u, descending=True, stable=True)
    ranking = torch.empty_like(argsort)
    ranking[argsort] = torch.arange(len(u))
    ans = list(reversed(file_answers))
    n = len(ans)
    rank = ranking[torch.tensor(ans)].numpy().astype(np.float64) + 1
    pos = np.arange(1, n + 1, dtype=np.float64)
    dcg = np.sum((1.0 / rank) / np.log2(pos + 1))
    idcg = np.sum(1.0 / (pos * np.log2(pos + 1)))
    exist = np.isin(argsort[:n].numpy(), ans)
    out = {"map": float(np.mean(np.cumsum(exist) / pos * exist)), "ndcg": float(dcg / idcg),
           "tau": math.nan, "rho": math.nan}
    if n > 1:
        out["tau"] = float(scipy.stats.kendalltau(pos, rank)[0])
        out["rho"] = float(scipy.stats.spearmanr(pos, rank)[0])
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 3), min_size=2, max_size=9),
    st.lists(st.integers(-1, 2), min_size=9, max_size=9),
    st.integers(0, 2**31),
)
def test_paper_protocol_is_the_authors_code_on_a_file_in_that_order(
    levels: list[int], pred: list[int], key: int
) -> None:
    """paper_protocol equals the authors' evaluation run on a query file whose ties are stored in the
    order paper_truth_order draws for the key (so the only choice we make is that order), averaged over
    PAPER_DRAWS such orders."""
    t = np.array([float(v) for v in levels] + [0.0] * (9 - len(levels)))
    p = np.array([NEG if v < 0 else float(v) for v in pred])
    ans = np.argsort(-t, kind="stable")[: int((t > 0).sum())]
    if len(ans) == 0:
        return
    q = Ranked.from_utilities(t, p, ans)
    rng = np.random.default_rng([PAPER_SEED, key])
    draws = []
    for _ in range(PAPER_DRAWS):
        order = paper_truth_order(t[ans], rng)
        file_answers = [int(a) for a in ans[order]][::-1]  # the file lists ascending by value
        draws.append(_authors_evaluation(p, file_answers))
    one = paper_protocol(q, key=key, draws=1)
    got = paper_protocol(q, key=key)  # the mean over PAPER_DRAWS orders (one where the truth has no tie)
    tied = len(set(t[ans].tolist())) < len(ans)
    for name in ("tau", "rho", "map", "ndcg"):
        assert one[name] == pytest.approx(draws[0][name], abs=1e-12, nan_ok=True), name
        want = float(np.mean([d[name] for d in draws])) if tied else draws[0][name]
        assert got[name] == pytest.approx(want, abs=1e-12, nan_ok=True), name


# ------------------------------------------------------------------------------------- metric classes


class TestKendallTau(MetricCase):
    name = "tau"


class TestSpearmanRho(MetricCase):
    name = "rho"


class TestMAP(MetricCase):
    name = "map"


class TestNDCG(MetricCase):
    name = "ndcg"


def test_lookup_by_name_and_synonym() -> None:
    assert get_metric("NDCG") is METRICS["ndcg"]
    assert get_metric("kendall_tau") is METRICS["tau"]
    with pytest.raises(UnknownNameError, match="did you mean ndcg"):
        get_metric("ndgc")


def test_ls_metrics_lists_the_registry() -> None:
    from pipeline.cli import cli

    result = CliRunner().invoke(cli, ["ls", "metrics"])
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.output.splitlines()[2:]]
    assert names == ["tau", "rho", "map", "ndcg"]


def test_bad_rankings_are_rejected() -> None:
    with pytest.raises(ValueError, match="first"):
        Ranked(np.ones(2), np.ones(2), np.array([0, 1]), np.array([1, 1]))
    with pytest.raises(ValueError, match="predicted"):
        Ranked(np.ones(2), np.ones(3), np.array([1, 1]), np.array([1, 1]))
