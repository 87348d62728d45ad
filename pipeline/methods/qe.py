"""The query-embedding baselines (LogicE+NE, ConE+NE; :mod:`pipeline.baselines`) as answering methods.

A run of ``pipeline train-qe`` is the method's whole state: :meth:`QueryEmbedding.build` loads its selected
model and :meth:`utilities` scores every entity for a batch of queries (the model's logits; the ranking is
all the metrics read), so ``pipeline answer QUERIES --model RUN_DIR`` writes the same answers file as SRC.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch

from pipeline.core.errors import ArtifactError
from pipeline.methods.base import BuildInputs, Capabilities, Method, MethodOptions
from pipeline.query.model import Query


class QueryEmbedding(Method):
    """A trained query-embedding model. ``name`` (registry key) is the baseline's model name."""

    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities("model_run", "--model RUN_DIR", union=True)

    def __init__(self, model: Any, run_config: dict[str, Any], run_dir: str | Path) -> None:
        self.model, self.run_config, self.run_dir = model, run_config, str(run_dir)

    @property
    def dataset(self) -> str:  # type: ignore[override]
        return str(self.run_config["dataset"])

    @property
    def n_entities(self) -> int:  # type: ignore[override]
        return int(self.model.n_entities)

    @property
    def label(self) -> str:  # type: ignore[override]
        # the default DNF union is the plain row; the t-conorm variant gets its own row (and answers file)
        return str(self.model.method) + ("" if self.model.union == "dnf" else f" {self.model.union}")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @classmethod
    def build(cls, run_dir: str | Path, device: str | None = None, union: str | None = None) -> QueryEmbedding:
        """The method of a ``train-qe`` run directory (its best valid epoch), of the registered class that
        trained it; union (dnf | conorm, see pipeline.baselines.models.UNIONS) overrides how it answers
        disjunctions."""
        from pipeline.baselines.runs import load_qe_run
        from pipeline.core import config
        from pipeline.core.errors import PipelineError, option

        model, run_cfg = load_qe_run(run_dir, device=config.select_device(device))
        if union is not None:
            try:
                model.set_union(union)
            except ValueError as exc:
                raise PipelineError(f"{option('union', union)}: {exc}") from None
        by_name = {c.name: c for c in QueryEmbedding.__subclasses__()}
        method_cls = by_name.get(str(run_cfg["model"]), QueryEmbedding)
        if cls is not QueryEmbedding and method_cls is not cls:
            raise ArtifactError(f"{run_dir}: a {run_cfg['model']} run, not {cls.name}")
        return method_cls(model, run_cfg, run_dir)

    @classmethod
    def from_options(cls, options: MethodOptions, inputs: BuildInputs) -> QueryEmbedding:
        assert options.model_run is not None
        return cls.build(options.model_run, options.device, union=options.union)

    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        from pipeline.baselines.plan import group_by_plan

        out = torch.empty(len(queries), self.n_entities, device=self.device)
        self.model.eval()
        with torch.no_grad():
            for plan, (pos, params) in group_by_plan(list(queries)).items():
                out[torch.as_tensor(pos, device=self.device)] = self.model.logits(plan, params.to(self.device)).float()
        return out

    def settings(self) -> dict[str, Any]:
        return {
            "method_name": self.name,
            "run_dir": self.run_dir,
            "model": self.run_config["model"],
            "union": self.model.union,
            "device": str(self.device),
            "seed": self.run_config.get("seed"),
        }


class LogicENE(QueryEmbedding):
    name = "logice_ne"
    description = "LogicE with number embedding (query embedding in [0,1]^d, t-norms), from a train-qe run"


class ConENE(QueryEmbedding):
    name = "cone_ne"
    description = "ConE with number embedding (sector cones, attention intersection), from a train-qe run"
