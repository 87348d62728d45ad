"""Query plans of the 12 types, the models' scoring paths and the losses on hand-computed inputs."""

from __future__ import annotations

import math

import pytest
import torch

from pipeline.baselines.losses import compute_loss, listwise, weighted_ranking
from pipeline.baselines.models import QE_MODELS, ConENEModel, LogicENEModel, get_qe_model_class
from pipeline.baselines.plan import PlanParams, UnsupportedQuery, group_by_plan, query_plan
from pipeline.core.errors import UnknownNameError
from pipeline.softquery.model import Atom, Const, Query, Var
from tests.cases import BaselineCase

X, Y = Var("x"), Var("y")


def test_plans_of_the_literature_types() -> None:
    two_in = Query.of([Atom(Const(1), 0, Y, 0.2, 0.5, negated=True), Atom(Const(2), 1, Y)])
    plan, numbers = query_plan(two_in)
    assert plan == ("and", (("not", ("proj", 0, ("ent", 0))), ("proj", 1, ("ent", 1))))
    assert numbers == [1, 0, 0.2, 0.5, 2, 1, 0.0, 1.0]
    two_il = Query.of([Atom(Const(1), 0, Y), Atom(X, 1, Y)])
    assert query_plan(two_il)[0] == ("and", (("proj", 0, ("ent", 0)), ("proj", 1, ("all",))))
    two_m = Query.of([Atom(Const(1), 0, X), Atom(X, 1, Y), Atom(X, 2, Y)])
    x = ("proj", 0, ("ent", 0))
    assert query_plan(two_m)[0] == ("and", (("proj", 1, x), ("proj", 2, x)))
    up = Query.of([Atom(Const(1), 0, Y)], [Atom(Const(2), 1, X), Atom(X, 2, Y)])
    assert query_plan(up)[0] == ("or", (("proj", 0, ("ent", 0)), ("proj", 2, ("proj", 1, ("ent", 1)))))


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (Query.of([Atom(Y, 0, Const(3))]), "no atom ends at"),
        (Query.of([Atom(Const(1), 0, Y), Atom(Y, 1, X)]), "point away"),
        (Query.of([Atom(Const(1), 0, Y), Atom(Y, 1, Y)]), "self-loop"),
        (Query.of([Atom(X, 0, Y), Atom(Y, 1, X)]), "cycle"),
    ],
)
def test_shapes_without_an_embedding_form_are_named(query: Query, message: str) -> None:
    with pytest.raises(UnsupportedQuery, match=message):
        group_by_plan([query], ["q-7"])
    with pytest.raises(UnsupportedQuery, match="q-7"):
        group_by_plan([query], ["q-7"])


def test_same_shape_queries_share_one_batch() -> None:
    qs = [Query.of([Atom(Const(e), r, X), Atom(X, 1, Y, 0.1 * e)]) for e, r in ((1, 0), (2, 1), (3, 0))]
    qs.append(Query.of([Atom(Const(4), 0, Y)]))
    groups = group_by_plan(qs)
    assert [pos for pos, _ in groups.values()] == [[0, 1, 2], [3]]
    params = next(iter(groups.values()))[1]
    assert params.anchor.tolist() == [[1, -1], [2, -1], [3, -1]]
    assert params.relation[:, 0].tolist() == [0, 1, 0]
    assert params.alpha[:, 1].tolist() == pytest.approx([0.1, 0.2, 0.3])


@pytest.mark.parametrize("name", ["logice_ne", "cone_ne"])
def test_all_entity_scores_equal_candidate_scores(name: str) -> None:
    """Two independent paths (chunked over all entities, gathered candidates) give the same logits."""
    torch.manual_seed(0)
    model = get_qe_model_class(name)(n_entities=23, n_relations=3, dim=6, hidden=8)
    qs = [
        Query.of([Atom(Const(1), 0, Y, 0.3, 0.7, negated=True), Atom(Const(5), 2, Y)]),
        Query.of([Atom(Const(2), 1, Y)], [Atom(Const(4), 0, X), Atom(X, 1, Y)]),
    ]
    for plan, (_, params) in group_by_plan(qs).items():
        full = model.logits(plan, params)
        cand = torch.arange(23).expand(params.batch_size, 23)
        assert full.shape == (params.batch_size, 23)
        assert torch.allclose(full, model.logits(plan, params, cand), atol=1e-5)


@pytest.mark.parametrize("name", ["logice_ne", "cone_ne"])
def test_all_entity_scores_over_many_cache_blocks(name: str) -> None:
    """All-entity scoring in cache-sized blocks (here 2 blocks of queries x 12 of entities, the last ones
    partial) equals the gathered-candidates path on every entity."""
    torch.manual_seed(1)
    model = get_qe_model_class(name)(n_entities=3000, n_relations=3, dim=64, hidden=16)
    qs = [Query.of([Atom(Const(e), e % 3, Y, 0.1 * (e % 5), 0.5)]) for e in range(20)]
    ((plan, (_, params)),) = group_by_plan(qs).items()
    full = model.logits(plan, params)
    cand = torch.arange(3000).expand(20, 3000)
    assert full.shape == (20, 3000)
    assert torch.allclose(full, model.logits(plan, params, cand), atol=1e-4)


def test_alpha_and_beta_change_the_projection() -> None:
    torch.manual_seed(0)
    model = ConENEModel(n_entities=10, n_relations=2, dim=8, hidden=8)
    a = group_by_plan([Query.of([Atom(Const(1), 0, Y, 0.0, 1.0)])])
    b = group_by_plan([Query.of([Atom(Const(1), 0, Y, 0.5, 0.3)])])
    (pa, (_, xa)), (_, (_, xb)) = next(iter(a.items())), next(iter(b.items()))
    assert not torch.allclose(model.logits(pa, xa), model.logits(pa, xb))


def test_union_by_dnf_is_the_max_and_by_conorm_one_embedding() -> None:
    torch.manual_seed(0)
    q1, q2 = Query.of([Atom(Const(1), 0, Y)]), Query.of([Atom(Const(2), 1, Y)])
    union = Query.of([Atom(Const(1), 0, Y)], [Atom(Const(2), 1, Y)])
    cone_m = ConENEModel(n_entities=12, n_relations=2, dim=4, hidden=8)

    def scores(model: torch.nn.Module, q: Query) -> torch.Tensor:
        plan, (_, p) = next(iter(group_by_plan([q]).items()))
        return model.logits(plan, p)

    assert torch.allclose(scores(cone_m, union), torch.maximum(scores(cone_m, q1), scores(cone_m, q2)))
    logic_m = LogicENEModel(n_entities=12, n_relations=2, dim=4, hidden=8)
    # the t-conorm of two truth vectors is at least as true as each: the union's embedding dominates
    plan, (_, p) = next(iter(group_by_plan([union]).items()))
    u = logic_m.embed(plan, p)[0]
    for branch in plan[1]:
        assert torch.all(u >= logic_m.embed(branch, p)[0] - 1e-6)


def test_universe_negation_and_registry() -> None:
    model = LogicENEModel(n_entities=5, n_relations=1, dim=3, hidden=4)
    assert model.negate(model.universe(2))[0].tolist() == [[0.0] * 3] * 2
    axis, arg = ConENEModel(n_entities=5, n_relations=1, dim=3, hidden=4).universe(1)
    assert arg[0].tolist() == pytest.approx([math.pi] * 3)  # the full circle
    assert set(QE_MODELS) == {"logice_ne", "cone_ne"}
    with pytest.raises(UnknownNameError, match="cone_ne"):
        get_qe_model_class("cone")


def test_losses_hand_values() -> None:
    z = torch.zeros(1, 1)
    ones = torch.ones(1, 1, dtype=torch.bool)
    assert weighted_ranking(z, torch.ones(1, 1), ones, z, ones).item() == pytest.approx(2 * math.log(2))
    # two answers (utilities 3 and 1) and one negative, all scored 0: uniform prediction over 3 items
    pos, util, mask = torch.zeros(1, 2), torch.tensor([[3.0, 1.0]]), torch.ones(1, 2, dtype=torch.bool)
    assert listwise(pos, util, mask, z, ones).item() == pytest.approx(math.log(3))
    # a padded answer and a masked negative do not count
    pad_pos = torch.tensor([[0.0, 5.0]])
    pad_mask = torch.tensor([[True, False]])
    neg2, neg_mask = torch.tensor([[0.0, -9.0]]), torch.tensor([[True, False]])
    assert weighted_ranking(
        pad_pos, torch.tensor([[1.0, 0.0]]), pad_mask, neg2, neg_mask
    ).item() == pytest.approx(2 * math.log(2))
    assert listwise(pad_pos, torch.tensor([[1.0, 0.0]]), pad_mask, neg2, neg_mask).item() == pytest.approx(
        math.log(2)
    )
    # listwise prefers the order that follows the utilities
    good = listwise(torch.tensor([[2.0, 1.0]]), util, mask, z, ones)
    bad = listwise(torch.tensor([[1.0, 2.0]]), util, mask, z, ones)
    assert good < bad
    with pytest.raises(ValueError):
        compute_loss("hinge", pos, util, mask, z, ones)


class TestLogicENE(BaselineCase):
    name = "logice_ne"


class TestConENE(BaselineCase):
    name = "cone_ne"


def test_union_plans_of_2u_and_up() -> None:
    two_u = Query.of([Atom(Const(1), 0, Y)], [Atom(Const(2), 1, Y)])
    assert query_plan(two_u)[0] == ("or", (("proj", 0, ("ent", 0)), ("proj", 1, ("ent", 1))))
    # up as QUERY_TYPES writes it: r1(e1, ?y) | r2(e2, ?x) & r3(?x, ?y)
    up = Query.of([Atom(Const(1), 0, Y)], [Atom(Const(2), 1, X), Atom(X, 2, Y)])
    assert query_plan(up)[0] == ("or", (("proj", 0, ("ent", 0)), ("proj", 2, ("proj", 1, ("ent", 1)))))


def _sharp_logice() -> LogicENEModel:
    """LogicE over 4 entities in d = 2 with truth vectors ~ (1,0), (0,1), (1,1), (0,0) (logits +-20)."""
    model = LogicENEModel(n_entities=4, n_relations=1, dim=2, hidden=4)
    with torch.no_grad():
        model.entity_logit.copy_(20.0 * torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0], [-1.0, -1.0]]))
    return model


def test_dnf_max_and_t_conorm_differ_on_a_hand_made_union() -> None:
    """The union of the branches (1,0) and (0,1). DNF: an entity's distance is its distance to the nearer
    branch, mean |.| = 0, 0, 0.5, 0.5. Product t-conorm: one embedding 1 - (1-a)(1-b) = (1,1), distances
    0.5, 0.5, 0, 1. Logits gamma - m d with gamma 12 and the initial modulus m = 6 gamma = 72."""
    model = _sharp_logice()
    plan = ("or", (("ent", 0), ("ent", 1)))
    p = PlanParams(
        anchor=torch.tensor([[0, 1]]),
        relation=torch.zeros(1, 2, dtype=torch.long),
        alpha=torch.zeros(1, 2),
        beta=torch.ones(1, 2),
    )
    assert model.union == "dnf"  # the default
    assert model.logits(plan, p)[0].tolist() == pytest.approx([12.0, 12.0, -24.0, -24.0], abs=1e-5)
    model.set_union("conorm")
    assert model.logits(plan, p)[0].tolist() == pytest.approx([-24.0, -24.0, 12.0, -60.0], abs=1e-5)
    # the two orders disagree: DNF ranks the branch entities first, the t-conorm the all-true entity
    assert model.config()["union"] == "conorm" and LogicENEModel.from_config(model.config()).union == "conorm"


@pytest.mark.parametrize("name", ["logice_ne", "cone_ne"])
def test_dnf_union_is_the_max_of_the_branch_scores(name: str) -> None:
    torch.manual_seed(1)
    model = get_qe_model_class(name)(n_entities=15, n_relations=3, dim=6, hidden=8)
    branches = [Query.of([Atom(Const(1), 0, Y)]), Query.of([Atom(Const(2), 1, X), Atom(X, 2, Y)])]  # up
    up = Query.of(*(q.conjunctions[0].atoms for q in branches))

    def scores(q: Query) -> torch.Tensor:
        plan, (_, p) = next(iter(group_by_plan([q]).items()))
        return model.logits(plan, p)

    assert torch.allclose(scores(up), torch.maximum(scores(branches[0]), scores(branches[1])), atol=1e-6)


def test_cone_has_no_t_conorm_union() -> None:
    with pytest.raises(ValueError, match="dnf"):
        ConENEModel(n_entities=3, n_relations=1, dim=2, hidden=2, union="conorm")
    with pytest.raises(ValueError, match="no 'max' union"):
        LogicENEModel(n_entities=3, n_relations=1, dim=2, hidden=2).set_union("max")
