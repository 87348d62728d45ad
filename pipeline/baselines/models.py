"""LogicE+NE and ConE+NE as torch modules: parameters, the NE-conditioned projection, and batched scoring.

Both follow the originals' projection (a relation embedding and one shared MLP, as in the LogicE and ConE
code bases), with the SRC paper's number embedding added to the input state:
``S' = MLP([S + g(alpha) + g(beta); r])``, so every atom's necessity and importance reach the model.
Operators are the pure functions of :mod:`.logice` / :mod:`.cone`. A state is a tuple of (B, d) tensors:
``(truth,)`` for LogicE, ``(axis, arg)`` for ConE. Scores (logits) are ``gamma - modulus * distance`` with
the distance averaged over dimensions (in [0, 1]) and a learned modulus, as ConE's learned modulus.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import pipeline.baselines.cone as cone
import pipeline.baselines.logice as logice
from pipeline.baselines.number_embedding import number_embedding
from pipeline.baselines.plan import Plan, PlanParams
from pipeline.core.gather import rows
from pipeline.core.registry import Registry

State = tuple[torch.Tensor, ...]

# How a disjunction (a query with several conjunctions, 2u/up) is answered:
#   dnf     answer each conjunction and take the max of their scores (the QE papers' DNF, used by the
#           Query2Box, BetaE and ConE code for union), so an entity near ANY branch ranks high;
#   conorm  one embedding by the t-conorm of the branches' embeddings (LogicE only): the product t-conorm
#           of two sharp truth vectors is near 1 wherever either is, so no entity lies near it.
UNIONS = ("dnf", "conorm")


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class QueryEmbeddingModel(nn.Module):
    """Shared machinery: walking a plan, scoring candidates, config round-trip."""

    name = "base"
    method = "base"
    unions: tuple[str, ...] = ("dnf",)  # the union modes (UNIONS) this model has operators for

    def __init__(
        self,
        n_entities: int,
        n_relations: int,
        dim: int = 400,
        hidden: int = 800,
        gamma: float = 12.0,
        union: str = "dnf",
    ) -> None:
        super().__init__()
        self.n_entities, self.n_relations = int(n_entities), int(n_relations)
        self.dim, self.hidden, self.gamma = int(dim), int(hidden), float(gamma)
        self.set_union(union)
        # learned like ConE's modulus; started so that a distance of 1/3 (random vectors) scores -gamma
        self.log_modulus = nn.Parameter(torch.tensor(math.log(6.0 * self.gamma)))

    # --------------------------------------------------------------------------------------- config
    def config(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "n_entities": self.n_entities,
            "n_relations": self.n_relations,
            "dim": self.dim,
            "hidden": self.hidden,
            "gamma": self.gamma,
            "union": self.union,
            **self.extra_config(),
        }

    def set_union(self, union: str) -> None:
        """Choose how disjunctions are answered (an answering choice: no train type has a union, so a trained
        model can be answered either way)."""
        if union not in self.unions:
            raise ValueError(
                f"{self.method} has no {union!r} union; it answers disjunctions by {' or '.join(self.unions)}"
            )
        self.union = union

    def extra_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> QueryEmbeddingModel:
        kwargs = {k: v for k, v in cfg.items() if k != "model"}
        return cls(**kwargs)

    # ----------------------------------------------------------------------------- model operators
    def entity(self, ids: torch.Tensor) -> State:
        raise NotImplementedError

    def universe(self, batch: int) -> State:
        raise NotImplementedError

    def project(self, state: State, relation: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> State:
        raise NotImplementedError

    def intersect(self, states: list[State]) -> State:
        raise NotImplementedError

    def negate(self, state: State) -> State:
        raise NotImplementedError

    def unite(self, states: list[State]) -> State:
        raise NotImplementedError

    def distance(self, state: State, candidates: torch.Tensor | None) -> torch.Tensor:
        """(B, C) distances in [0, 1] to candidates (B, C) entity ids, or (B, n_entities) when None."""
        raise NotImplementedError

    def number_code(self, alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
        """g(alpha) + g(beta): (B, dim)."""
        return number_embedding(alpha, self.dim) + number_embedding(beta, self.dim)

    # ------------------------------------------------------------------------------------- plans
    def embed(self, node: Plan, p: PlanParams) -> State:
        """The state of one plan node for a batch of same-plan queries."""
        kind = node[0]
        if kind == "ent":
            return self.entity(p.anchor[:, node[1]])
        if kind == "all":
            return self.universe(p.batch_size)
        if kind == "proj":
            i = node[1]
            return self.project(self.embed(node[2], p), p.relation[:, i], p.alpha[:, i], p.beta[:, i])
        if kind == "not":
            return self.negate(self.embed(node[1], p))
        if kind == "and":
            return self.intersect([self.embed(n, p) for n in node[1]])
        if kind == "or":
            return self.unite([self.embed(n, p) for n in node[1]])
        raise ValueError(f"unknown plan node {kind!r}")

    def logits(self, plan: Plan, p: PlanParams, candidates: torch.Tensor | None = None) -> torch.Tensor:
        """Scores (B, C) of candidates (B, C), or (B, n_entities) when None; higher = better answer."""
        if plan[0] == "or" and self.union == "dnf":
            return torch.stack([self.logits(c, p, candidates) for c in plan[1]]).max(dim=0).values
        dist = self.distance(self.embed(plan, p), candidates)
        return self.gamma - self.log_modulus.exp() * dist


def _blocked(
    score: Callable[[slice, slice], torch.Tensor],
    n_queries: int,
    n_entities: int,
    dim: int,
    like: torch.Tensor,
) -> torch.Tensor:
    """All-entity distances (n_queries, n_entities) from ``score(query rows, entity columns)`` over blocks of
    about 2^18 (query, entity, dimension) terms on a CPU: the elementwise temporaries of a block stay in
    cache, where whole (queries x entities x d) tensors made scoring memory-bound (measured on PPI5k, d =
    128: ConE 450 -> 39 ms, LogicE 120 -> 15 ms for the same values bit for bit). On a GPU, blocks of 2^26
    terms keep kernel launches few."""
    out = like.new_empty(n_queries, n_entities)
    elements = 1 << (18 if like.device.type == "cpu" else 26)
    q_step = max(1, min(n_queries, 16))
    e_step = max(1, elements // (q_step * dim))
    for i in range(0, n_queries, q_step):
        rows = slice(i, i + q_step)
        for j in range(0, n_entities, e_step):
            cols = slice(j, j + e_step)
            out[rows, cols] = score(rows, cols)
    return out


class LogicENEModel(QueryEmbeddingModel):
    """LogicE+NE: truth vectors in [0, 1]^d, t-norm intersection, 1 - x negation, DNF (or t-conorm) union."""

    name = "logice_ne"
    method = "LogicE+NE"
    unions = ("dnf", "conorm")

    def __init__(
        self,
        n_entities: int,
        n_relations: int,
        dim: int = 400,
        hidden: int = 800,
        gamma: float = 12.0,
        union: str = "dnf",
        tnorm: str = "product",
    ) -> None:
        super().__init__(n_entities, n_relations, dim, hidden, gamma, union)
        if tnorm not in logice.TNORMS:
            raise ValueError(f"unknown t-norm {tnorm!r}; known: {', '.join(logice.TNORMS)}")
        self.tnorm = tnorm
        self.entity_logit = nn.Parameter(torch.empty(self.n_entities, self.dim).uniform_(-3.0, 3.0))
        self.relation_emb = nn.Parameter(torch.empty(self.n_relations, self.dim).uniform_(-1.0, 1.0))
        self.proj = _mlp([2 * self.dim, self.hidden, self.hidden, self.dim])

    def extra_config(self) -> dict[str, Any]:
        return {"tnorm": self.tnorm}

    def entity_truth(self) -> torch.Tensor:
        return torch.sigmoid(self.entity_logit)

    def entity(self, ids: torch.Tensor) -> State:
        return (torch.sigmoid(rows(self.entity_logit, ids)),)

    def universe(self, batch: int) -> State:
        return (torch.ones(batch, self.dim, device=self.entity_logit.device),)

    def project(self, state: State, relation: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> State:
        x = torch.cat([state[0] + self.number_code(alpha, beta), rows(self.relation_emb, relation)], dim=-1)
        return (torch.sigmoid(self.proj(x)),)

    def intersect(self, states: list[State]) -> State:
        return (logice.t_norm([s[0] for s in states], self.tnorm),)

    def negate(self, state: State) -> State:
        return (logice.negation(state[0]),)

    def unite(self, states: list[State]) -> State:
        return (logice.t_conorm([s[0] for s in states], self.tnorm),)

    def distance(self, state: State, candidates: torch.Tensor | None) -> torch.Tensor:
        if candidates is not None:
            ent = torch.sigmoid(rows(self.entity_logit, candidates))  # (B, C, d)
            return logice.l1_distance(ent, state[0].unsqueeze(1))
        ent, q = self.entity_truth(), state[0]
        return _blocked(
            lambda rows, cols: logice.l1_distance(ent[cols].unsqueeze(0), q[rows].unsqueeze(1)),
            q.shape[0],
            self.n_entities,
            self.dim,
            q,
        )


class ConENEModel(QueryEmbeddingModel):
    """ConE+NE: sector cones (axis, half-aperture) per dimension; DNF union (max over conjunctions)."""

    name = "cone_ne"
    method = "ConE+NE"
    unions = ("dnf",)  # a union of cones is not a cone: ConE answers disjunctions by DNF only

    def __init__(
        self,
        n_entities: int,
        n_relations: int,
        dim: int = 400,
        hidden: int = 800,
        gamma: float = 12.0,
        union: str = "dnf",
        inside_weight: float = 0.02,
    ) -> None:
        super().__init__(n_entities, n_relations, dim, hidden, gamma, union)
        self.inside_weight = float(inside_weight)
        self.entity_raw = nn.Parameter(torch.empty(self.n_entities, self.dim).uniform_(-1.0, 1.0))
        self.relation_axis = nn.Parameter(torch.empty(self.n_relations, self.dim).uniform_(-1.0, 1.0))
        self.relation_arg = nn.Parameter(torch.empty(self.n_relations, self.dim).uniform_(-1.0, 1.0))
        self.proj = _mlp([2 * self.dim, self.hidden, self.hidden, 2 * self.dim])
        self.attention = _mlp([2 * self.dim, self.dim, self.dim])
        self.gate_in = nn.Linear(2 * self.dim, self.dim)
        self.gate_out = nn.Linear(self.dim, self.dim)

    def extra_config(self) -> dict[str, Any]:
        return {"inside_weight": self.inside_weight}

    def entity_axes(self) -> torch.Tensor:
        return cone.to_axis(self.entity_raw)

    def entity(self, ids: torch.Tensor) -> State:
        axis = cone.to_axis(rows(self.entity_raw, ids))
        return axis, torch.zeros_like(axis)

    def universe(self, batch: int) -> State:
        zeros = torch.zeros(batch, self.dim, device=self.entity_raw.device)
        return zeros, torch.full_like(zeros, cone.PI)

    def project(self, state: State, relation: torch.Tensor, alpha: torch.Tensor, beta: torch.Tensor) -> State:
        ne = self.number_code(alpha, beta)
        x = torch.cat(
            [state[0] + rows(self.relation_axis, relation) + ne, state[1] + rows(self.relation_arg, relation) + ne],
            dim=-1,
        )
        ax, ar = self.proj(x).chunk(2, dim=-1)
        return cone.to_axis(ax), cone.to_arg(ar)

    def intersect(self, states: list[State]) -> State:
        axes = torch.stack([s[0] for s in states])
        args = torch.stack([s[1] for s in states])
        feats = torch.cat([axes - args, axes + args], dim=-1)  # (k, B, 2d): the cone's two boundaries
        attention = torch.softmax(self.attention(feats), dim=0)
        gate = torch.sigmoid(self.gate_out(torch.relu(self.gate_in(feats)).mean(dim=0)))
        return cone.intersection(axes, args, attention, gate)

    def negate(self, state: State) -> State:
        return cone.negation(state[0], state[1])

    def distance(self, state: State, candidates: torch.Tensor | None) -> torch.Tensor:
        w = self.inside_weight
        if candidates is not None:
            return cone.point_distance(rows(self.entity_raw, candidates), state[0], state[1], w)
        sv, cv = cone.half_angles(self.entity_axes())
        axis, arg = state[0].unsqueeze(1), state[1].unsqueeze(1)
        return _blocked(
            lambda rows, cols: cone.distance_from_halves(
                (sv[cols].unsqueeze(0), cv[cols].unsqueeze(0)), axis[rows], arg[rows], w
            ),
            axis.shape[0],
            self.n_entities,
            self.dim,
            axis,
        )


QE_MODELS: Registry[type[QueryEmbeddingModel]] = Registry(
    "query-embedding model",
    (LogicENEModel, ConENEModel),
    row=lambda cls: {
        "name": cls.name,
        "method": cls.method,
        "description": (cls.__doc__ or "").strip().splitlines()[0],
    },
)


def get_qe_model_class(name: str) -> type[QueryEmbeddingModel]:
    """The model class registered under name (logice_ne | cone_ne); UnknownNameError otherwise."""
    return QE_MODELS.get(name)
