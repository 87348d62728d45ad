"""SRC (design section 2) as an answering method: the exact engine over a neural adjacency export, with a
calibration (none, D, L or D+L; :mod:`pipeline.methods.calibration`).

:meth:`SRC.build` loads the export, fits what the calibration needs (L on the train queries, delta on the
valid queries) or reuses a saved fit keyed by content (model hash, threshold, query set checksums,
settings), and returns a method whose :meth:`utilities` run the engine with alpha lowered by delta.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from pipeline.core.checks import check_int
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.engine import Adjacency, as_adjacency, search_batch
from pipeline.formats import pair_cache as paircache
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.methods.base import BuildInputs, Capabilities, Method, MethodOptions
from pipeline.methods.calibration import CALIBRATIONS, lower_alphas
from pipeline.query.model import Query


@dataclass
class SRC(Method):
    """SRC on one export. ``delta`` lowers every atom's alpha (calibration D; 0 = none); ``adjacency`` is
    already calibrated by L when the calibration uses L."""

    name: ClassVar[str] = "src"
    description: ClassVar[str] = "exact max-plus search over a neural adjacency export (SRC), calibrated by none|D|L|D+L"
    capabilities: ClassVar[Capabilities] = Capabilities(
        "adjacency", "--adjacency DIR", calibration=True, explain=True, any_shape=True
    )

    adjacency: Adjacency | None  # None: built for remote actors only (SRC.build(load=False))
    manifest: dict[str, Any]
    calibration: str = "none"
    delta: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def dataset(self) -> str:  # type: ignore[override]
        return str(self.manifest["dataset"])

    @property
    def n_entities(self) -> int:  # type: ignore[override]
        return self.adjacency.n_entities if self.adjacency is not None else int(self.manifest["n_entities"])

    @property
    def label(self) -> str:  # type: ignore[override]
        backbone = self.manifest.get("model")
        variant = CALIBRATIONS[self.calibration].label
        return f"{backbone} {variant}" if backbone else variant

    @property
    def device(self) -> torch.device:
        return self.adjacency.device if self.adjacency is not None else torch.device("cpu")

    def made_from(self) -> tuple[str, str | None] | None:
        from pipeline.core.versions import KEY

        if not self.manifest.get("path"):
            return None  # over an in-memory graph (SRC.over): no file to check
        return f"the export {self.manifest['path']}", self.manifest.get(KEY)

    def relation_sizes(self) -> list[int] | None:
        """Facts per relation of the export (from the index's row pointers: nothing is read per fact)."""
        if self.adjacency is None:
            return None
        n = self.adjacency.n_entities
        starts = self.adjacency.fwd.ptr[::n]
        return starts.diff().tolist()

    def with_delta(self, delta: float) -> SRC:
        """The same method with another delta (for choosing delta on the valid queries)."""
        return SRC(self.adjacency, self.manifest, self.calibration, delta, self.info)

    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        if self.adjacency is None:
            raise PipelineError("this SRC did not load its export (built for an executor's actors): answer through them")
        with torch.no_grad():
            # a cycle cap (--cycle-cap, recorded with the method's settings) makes cyclic queries' utilities
            # lower bounds; without one, a query whose cycles need too much work is refused by the engine
            return search_batch([lower_alphas(q, self.delta) for q in queries], self.adjacency,
                                self.info.get("cycle_cap"))

    def settings(self) -> dict[str, Any]:
        return {
            "method_name": self.name,
            "backbone": self.manifest.get("model"),
            "calibration": self.calibration,
            "adjacency": self.manifest.get("path"),
            "model_hash": self.manifest["model_hash"],
            "threshold": self.manifest["threshold"],
            "device": str(self.device) if self.adjacency is not None else "each actor's",
            **({"delta": self.delta} if CALIBRATIONS[self.calibration].uses_delta else {}),
            **self.info,
        }

    def portable(self) -> tuple[Any, tuple[Any, ...]]:
        """An actor reopens the export (and the saved L, if any) instead of receiving the arrays: the
        recipe is the export's path, the calibration's saved files and delta, all fitted on the driver."""
        if not self.manifest.get("path") or (CALIBRATIONS[self.calibration].uses_l and "l_dir" not in self.info):
            return super().portable()  # an in-memory graph (SRC.over): pickled as is
        recipe = {
            "path": str(self.manifest["path"]),
            "dataset": self.dataset,
            "calibration": self.calibration,
            "delta": self.delta,
            "info": dict(self.info),
        }
        return rebuild, (recipe,)

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def over(cls, graph: Any, dataset: str, delta: float = 0.0, backbone: str | None = None) -> SRC:
        """SRC on an in-memory graph (observed or predicted GraphTensors/Adjacency), uncalibrated or with
        a fixed delta: for tests, notebooks and ground truth."""
        manifest = {"dataset": dataset, "model": backbone, "model_hash": None, "threshold": None}
        return cls(as_adjacency(graph), manifest, "D" if delta else "none", float(delta))

    @classmethod
    def build(
        cls,
        adjacency_dir: str | Path,
        dataset: str,
        calibration: str = "none",
        *,
        valid: QuerySet | None = None,
        train: QuerySet | None = None,
        score: Callable[[Method], float] | None = None,
        run_dir: str | Path | None = None,
        device: str | None = None,
        seed: int = 0,
        l_epochs: int = 20,
        progress: bool = True,
        kg: Any = None,
        load: bool = True,
        cycle_cap: int | None = None,
    ) -> SRC:
        """SRC on the export at ``adjacency_dir`` (of ``dataset``), calibrated.

        D needs ``valid`` and ``score`` (a built method's selection score on ``valid``: delta is chosen
        with it); L needs ``train`` (fitted there, alpha = 0) and selects with ``score`` when given; L's
        features come from the export's run unless ``run_dir`` names another copy. The answering stage
        (:func:`pipeline.stages.answer.answer_queries`) passes ``score``; this module never answers a query set.
        kg: the loaded data set whose train graph gives L its targets (default: loaded by name).
        load=False (calibration none only): read and check the manifest but leave the export unloaded, for
        answering on an executor's actors, which each load it (the driver then holds no copy)."""
        from loaders import get_spec
        from pipeline.core import config
        from pipeline.formats.engine_index import load_engine_index
        from pipeline.methods.calibration import FitSettings, choose_saved_delta, fit_l

        calib = CALIBRATIONS[calibration]
        dev = config.select_device(device)
        sizes = (kg.n_entities, kg.n_relations) if kg is not None else _registered_sizes(get_spec, dataset)
        if not load and calib.name == "none":
            from pipeline.formats.adjacency import checked_manifest

            info = {"cycle_cap": check_int(cycle_cap, "--cycle-cap", 1)} if cycle_cap is not None else {}
            return cls(None, {**checked_manifest(adjacency_dir, dataset, *sizes), "path": str(adjacency_dir)}, info=info)
        adj, manifest = load_engine_index(adjacency_dir, dataset, dev, *sizes)
        manifest = {**manifest, "path": str(adjacency_dir)}
        info = {"seed": seed} if calib.uses_l else {}
        if cycle_cap is not None:
            info["cycle_cap"] = check_int(cycle_cap, "--cycle-cap", 1)
        method = cls(adj, manifest, calib.name, info=info)
        if calib.uses_delta and (valid is None or score is None):
            raise PipelineError(f"--calibration {calib.name} chooses delta on a valid query set: give --valid-queries")
        if calib.uses_l and train is None:
            raise PipelineError(f"--calibration {calib.name} trains L on a train query set: give --train-queries")
        run_path = Path(run_dir or manifest.get("run_dir", ""))
        key_parts: dict[str, Any] = {
            "model_hash": manifest["model_hash"],
            "threshold": manifest["threshold"],
            "valid": checksum(valid.frame) if valid is not None else None,
        }
        calib_dir = run_path / "calibration"
        if calib.uses_l:
            assert train is not None
            fit = FitSettings(run_path=run_path, calib_dir=calib_dir, key_parts=key_parts, device=dev, seed=seed,
                              l_epochs=l_epochs, progress=progress, kg=kg)
            method = fit_l(method, train, valid, score if valid is not None else None, fit)
        if calib.uses_delta:
            assert score is not None
            fit = FitSettings(run_path=run_path, calib_dir=calib_dir if run_path.name else None,
                              key_parts=key_parts, progress=progress)
            method = choose_saved_delta(method, score, fit)
        return method

    @classmethod
    def from_options(cls, options: MethodOptions, inputs: BuildInputs) -> SRC:
        assert options.adjacency is not None
        return cls.build(
            options.adjacency, inputs.dataset, options.calibration, valid=inputs.valid, train=inputs.train,
            score=inputs.score, run_dir=options.run_dir, device=options.device, seed=options.seed,
            l_epochs=options.l_epochs, progress=inputs.progress, kg=options.kg,
            load=options.calibration != "none" or inputs.load, cycle_cap=options.cycle_cap,
        )


def rebuild(recipe: dict[str, Any], device: str | None = None) -> SRC:
    """SRC from :meth:`SRC.portable`'s recipe, in another process: load the export on this worker's
    device (a GPU actor's GPU), apply the saved L, lower alpha by the driver's delta. Fits nothing."""
    from pipeline.core import config
    from pipeline.formats.engine_index import load_engine_index

    dev = config.select_device(device)
    adj, manifest = load_engine_index(recipe["path"], recipe["dataset"], dev)
    manifest = {**manifest, "path": recipe["path"]}
    info = recipe["info"]
    if CALIBRATIONS[recipe["calibration"]].uses_l:
        from pipeline.methods.calibration import calibrated_adjacency, feature_tables, load_affine
        from pipeline.models import load_run

        model = load_run(info["l_run"], device=dev)
        tables = feature_tables(model, adj.device)
        calib = load_affine(Path(info["l_dir"]), tables[0].shape[1], tables[1].shape[1], adj.device)
        if calib is None:
            raise ArtifactError(f"{info['l_dir']}: the saved calibration L is gone; answer again to refit it")
        with torch.no_grad():
            adj = calibrated_adjacency(adj, calib, tables)
        adj.use_pair_cache(paircache.for_calibrated(recipe["path"], Path(info["l_dir"])))
    return SRC(adj, manifest, recipe["calibration"], float(recipe["delta"]), info)


def _registered_sizes(get_spec: Any, dataset: str) -> tuple[int | None, int | None]:
    """(entities, relations) of a registered data set, for checking an export against it."""
    try:
        spec = get_spec(dataset)
    except PipelineError:
        return None, None
    return spec.n_entities, spec.n_relations
