"""SRC (design section 2) as an answering method: the exact engine over a neural adjacency export (or any
in-memory graph), with a calibration (none, D, L or D+L; :mod:`pipeline.methods.src.calibrations`).

:meth:`SRC.from_options` loads the export, fits what the calibration needs (L on the train queries, delta on
the valid queries: :mod:`pipeline.methods.src.fitting`) or reuses a saved fit keyed by content (model hash,
threshold, query set checksums, settings), and returns a method whose :meth:`SRC.utilities` run the engine
with alpha lowered by delta. ``pipeline query`` answers through the same class (:meth:`SRC.search`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from pipeline.core.errors import ArtifactError, PipelineError, option
from pipeline.engine import Adjacency, SearchResult, as_adjacency, solve
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.methods.base import BuildInputs, Capabilities, Method, MethodOptions
from pipeline.methods.src.calibrations import CALIBRATIONS, DELTA_GRID
from pipeline.methods.src.delta import lower_alphas
from pipeline.methods.src.fitting import FitSettings, l_config, l_key_parts
from pipeline.softquery.model import Query

# the selection score of a built SRC on the valid queries (made by the answering stage; higher is better)
Score = Callable[["SRC"], float]


@dataclass
class SRC(Method):
    """SRC on one export. ``delta`` lowers every atom's alpha (calibration D; 0 = none); ``adjacency`` is
    already calibrated by L when the calibration uses L; ``cycle_cap``: at most this many candidates per
    enumerated cycle variable (None: exact; a capped answer is a lower bound, :meth:`search` says so)."""

    name: ClassVar[str] = "src"
    description: ClassVar[str] = "exact max-plus search over a neural adjacency export (SRC), calibrated by none|D|L|D+L"
    capabilities: ClassVar[Capabilities] = Capabilities(
        "adjacency", "DIR", calibration=True, explain=True, any_shape=True
    )

    adjacency: Adjacency | None  # None: built for remote actors only (SRC.load(load=False))
    manifest: dict[str, Any]
    calibration: str = "none"
    delta: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    cycle_cap: int | None = None

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
        """(the export, the data set version it was made from) for the answering stage's version check
        (:mod:`pipeline.core.versions`); None over an in-memory graph (:meth:`over`: no file to check)."""
        from pipeline.core.versions import KEY

        if not self.manifest.get("path"):
            return None
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
        return replace(self, delta=float(delta))

    def with_adjacency(self, adjacency: Adjacency) -> SRC:
        """The same method over another (e.g. calibrated) index, uncalibrated otherwise: delta 0, no info."""
        return replace(self, adjacency=adjacency, delta=0.0, info={})

    def queries_as_answered(self, queries: Sequence[Query]) -> list[Query]:
        """The queries as the engine answers them: alphas lowered by delta (calibration D)."""
        return [lower_alphas(q, self.delta) for q in queries]

    def search(self, queries: Sequence[Query]) -> SearchResult:
        """Utilities and, per query, whether a cycle cap made them lower bounds (the engine's result)."""
        if self.adjacency is None:
            raise PipelineError("this SRC did not load its export (built for an executor's actors): answer through them")
        with torch.no_grad():
            return solve(self.queries_as_answered(queries), self.adjacency, self.cycle_cap)

    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        return self.search(queries).utility

    def utilities_of(self, variants: Sequence[Method], queries: Sequence[Query]) -> list[torch.Tensor]:
        """Every variant's utilities of the same queries; variants that are this SRC with other deltas (the
        same index, the same cycle cap) are answered in one engine pass, each delta's lowered queries as
        rows of the same batches (each row is computed alone: the values are those of one call per
        delta, tests/calibration/test_selection.py)."""
        same = all(isinstance(v, SRC) and v.adjacency is self.adjacency and v.cycle_cap == self.cycle_cap
                   for v in variants)
        if not same or len(variants) < 2 or self.adjacency is None:
            return super().utilities_of(variants, queries)
        rows = [q for v in variants for q in v.queries_as_answered(queries)]  # type: ignore[attr-defined]
        with torch.no_grad():
            util = solve(rows, self.adjacency, self.cycle_cap).utility
        return list(util.split(len(queries)))

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
            # a cycle cap makes the utilities of cyclic queries lower bounds: recorded with the answers
            **({"cycle_cap": self.cycle_cap} if self.cycle_cap is not None else {}),
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
            "cycle_cap": self.cycle_cap,
        }
        return rebuild, (recipe,)

    # ------------------------------------------------------------------------------------- calibrating
    def apply_saved(
        self,
        *,
        l_dir: str | Path | None = None,
        delta: float | None = None,
        delta_file: str | Path | None = None,
        run_dir: str | Path | None = None,
    ) -> SRC:
        """This SRC calibrated by a saved L folder (its adjacency corrected; the export's pair cache of those
        confidences attached) and a delta (given, or read from a saved D file): the one place a saved
        calibration is applied (``pipeline answer`` after fitting or reusing, an executor's actors,
        ``pipeline query --calibration``). run_dir: the backbone's run that L's features come from (default:
        the run the L folder lies in, ``RUN/calibration/L-<key>``). Fits nothing; L's model is checked by
        content hash."""
        from pipeline.formats.calibration import read_delta
        from pipeline.formats.pair_cache import for_calibrated
        from pipeline.methods.src.affine import (
            calibrated_adjacency,
            feature_tables,
            is_identity,
            load_calibration,
        )
        from pipeline.models import load_run

        if self.adjacency is None:
            raise PipelineError("this SRC did not load its export; a calibration applies to a loaded one")
        if delta_file is not None:
            delta = read_delta(Path(delta_file))
        adj, info = self.adjacency, dict(self.info)
        if l_dir is not None:
            folder = Path(l_dir)
            run_path = Path(run_dir) if run_dir else folder.parent.parent
            if not (run_path / "config.json").exists():
                raise PipelineError(f"{folder}: calibration L needs its backbone's run directory; {run_path} is not one")
            model = load_run(run_path, device=str(adj.device))
            if self.manifest.get("model_hash") and model.content_hash() != self.manifest["model_hash"]:
                raise ArtifactError(f"{run_path}: its model is not the one of this export (content hash differs)")
            tables = feature_tables(model, adj.device)
            calib = load_calibration(folder, model, tables, adj.device, self.manifest.get("threshold"))
            if calib is None:
                raise ArtifactError(f"{folder}: holds no saved calibration L (L.pt); answer again to refit it")
            # an L that kept its identity changes nothing: the export's own index and pair cache, exactly
            if not is_identity(calib):
                with torch.no_grad():
                    adj = calibrated_adjacency(adj, calib, tables)
                if self.manifest.get("path"):
                    adj.use_pair_cache(for_calibrated(self.manifest["path"], folder))
            info.update(l_key=folder.name.removeprefix("L-"), l_dir=str(folder), l_run=str(run_path))
        return replace(self, adjacency=adj, delta=self.delta if delta is None else float(delta), info=info)

    def fit_l(self, train: QuerySet, score: Score | None, fit: FitSettings) -> SRC:
        """Calibration L: a saved fit with the key of ``fit.key_parts`` (:func:`~.fitting.l_key_parts`), else
        a new fit on the ``train`` query set (alpha 0), selected by ``score`` on the valid queries (max over
        the delta grid under D+L), saved; then applied (:meth:`apply_saved`)."""
        from loaders import load
        from pipeline.core.kg import observed_graph
        from pipeline.core.provenance import stable_key
        from pipeline.engine import search_batch
        from pipeline.methods.src.affine import feature_tables, fit_affine, load_calibration, save_affine
        from pipeline.models import load_run

        run_path, calib_dir = fit.run_path, fit.calib_dir
        assert calib_dir is not None and self.adjacency is not None
        if not (run_path / "config.json").exists():
            raise PipelineError(f"calibration L needs the backbone's run directory; {run_path} is not one "
                                f"(use {option('run')})")
        model = load_run(run_path, device=fit.device)
        if model.content_hash() != self.manifest["model_hash"]:
            raise ArtifactError(f"{run_path}: its model is not the one exported to {self.manifest['path']} "
                                "(content hash differs)")
        parts = fit.key_parts
        l_key = stable_key(**parts)
        folder = calib_dir / f"L-{l_key}"
        adj = self.adjacency
        tables = feature_tables(model, adj.device)
        threshold = self.manifest.get("threshold")
        try:
            saved = load_calibration(folder, model, tables, adj.device, threshold)
        except ArtifactError:
            saved = None  # an edited or damaged saved L (its seal says so): fitted again and replaced, as D is
        if saved is None:
            cfg = l_config(fit)
            kg = fit.kg if fit.kg is not None else load(self.dataset)
            # the targets: utilities on the train graph, or on the valid graph (train + valid facts)
            truth = as_adjacency(observed_graph(kg, cfg.targets, device=fit.device))
            deltas = DELTA_GRID if CALIBRATIONS[self.calibration].uses_delta else (0.0,)

            def valid_score(calibrated: Adjacency) -> float | dict[float, float]:
                assert score is not None
                trial = self.with_adjacency(calibrated)
                got = scores_of(score, [trial.with_delta(d) for d in deltas])  # every delta in one pass
                return dict(zip(deltas, got, strict=True)) if len(deltas) > 1 else got[0]

            calib, history = fit_affine(model, adj, train.queries(), truth, search_batch,
                                        valid_score if score is not None else None, cfg, fit.progress, threshold)
            save_affine(calib, folder, {"key": l_key, "inputs": parts, "history": history})
        return self.apply_saved(l_dir=folder, run_dir=run_path)

    def choose_delta(self, score: Score, fit: FitSettings) -> SRC:
        """Calibration D: this SRC with the delta of the grid whose ``score`` (on the valid queries) is best,
        saved under ``fit.calib_dir`` and reused by content key (a saved delta that no longer reads back,
        e.g. edited by hand, is chosen again and replaced)."""
        from pipeline.core.provenance import stable_key
        from pipeline.formats.calibration import delta_path, read_delta, write_delta
        from pipeline.methods.src.delta import best_delta

        parts = {**fit.key_parts, "l_key": self.info.get("l_key"), "grid": DELTA_GRID}
        d_file = delta_path(fit.calib_dir, stable_key(**parts)) if fit.calib_dir is not None else None
        if d_file is not None and d_file.exists():
            try:
                return self.with_delta(read_delta(d_file))
            except ArtifactError:
                pass  # a damaged or edited cache entry: choose again and replace it
        scores = dict(zip(DELTA_GRID, scores_of(score, [self.with_delta(d) for d in DELTA_GRID]), strict=True))
        delta = best_delta(scores)
        if d_file is not None:
            write_delta(d_file, delta, scores, parts)
        return self.with_delta(delta)

    # ------------------------------------------------------------------------------------------ building
    @classmethod
    def over(cls, graph: Any, dataset: str, delta: float = 0.0, backbone: str | None = None) -> SRC:
        """SRC on an in-memory graph (observed or predicted GraphTensors/Adjacency), uncalibrated or with
        a fixed delta: for tests, notebooks and ground truth."""
        manifest = {"dataset": dataset, "model": backbone, "model_hash": None, "threshold": None}
        return cls(as_adjacency(graph), manifest, "D" if delta else "none", float(delta))

    @classmethod
    def load(
        cls,
        adjacency_dir: str | Path,
        dataset: str,
        *,
        device: str | None = None,
        kg: Any = None,
        load: bool = True,
    ) -> SRC:
        """SRC on the export at ``adjacency_dir`` (of ``dataset``), uncalibrated. kg: the loaded data set
        (its sizes check the export; default: the registered data set's). load=False: read and check the
        manifest but leave the export unloaded, for answering on an executor's actors, which each load it
        (the driver then holds no copy)."""
        from loaders import get_spec
        from pipeline.core import config
        from pipeline.formats.engine_index import load_engine_index

        sizes = (kg.n_entities, kg.n_relations) if kg is not None else _registered_sizes(get_spec, dataset)
        if not load:
            from pipeline.formats.adjacency import checked_manifest

            return cls(None, {**checked_manifest(adjacency_dir, dataset, *sizes), "path": str(adjacency_dir)})
        adj, manifest = load_engine_index(adjacency_dir, dataset, config.select_device(device), *sizes)
        return cls(adj, {**manifest, "path": str(adjacency_dir)})

    @classmethod
    def from_options(cls, options: MethodOptions, inputs: BuildInputs) -> SRC:
        """SRC on the export ``options.adjacency``, calibrated by ``options.calibration``.

        D needs ``inputs.valid`` and ``inputs.score`` (a built method's selection score on the valid queries:
        delta is chosen with it); L needs ``inputs.train`` (fitted there, alpha = 0) and selects with the score
        when given; L's features come from the export's run unless ``options.run`` names another copy. The
        answering stage (:func:`pipeline.stages.answer.answer_queries`) passes the score; this module never
        answers a query set."""
        from pipeline.core import config

        assert options.adjacency is not None
        calib = CALIBRATIONS[options.calibration]
        valid, train, score = inputs.valid, inputs.train, inputs.score
        # L's settings given without L were refused when the options were made (pipeline.methods.options.USES_L)
        if calib.uses_delta and (valid is None or score is None):
            raise PipelineError(f"--calibration {calib.name} chooses delta on a valid query set: give --valid-queries")
        if calib.uses_l and train is None:
            raise PipelineError(f"--calibration {calib.name} trains L on a train query set: give --train-queries")
        dev = config.select_device(options.device)
        method = cls.load(options.adjacency, inputs.dataset, device=dev, kg=options.kg,
                          load=calib.name != "none" or inputs.load)
        method = replace(method, calibration=calib.name, info={"seed": options.seed} if calib.uses_l else {},
                         cycle_cap=options.cycle_cap)
        if calib.name == "none":
            return method
        run_path = Path(options.run or method.manifest.get("run_dir", ""))
        base = {"model_hash": method.manifest["model_hash"], "threshold": method.manifest["threshold"],
                "valid": checksum(valid.frame) if valid is not None else None}
        fit = FitSettings(run_path=run_path, calib_dir=run_path / "calibration", key_parts=base, device=dev,
                          seed=options.seed, l_options=options, progress=inputs.progress, kg=options.kg)
        if calib.uses_l:
            assert train is not None
            fit = replace(fit, key_parts=l_key_parts(base, train, fit, calib.uses_delta))
            method = method.fit_l(train, score if valid is not None else None, fit)
        if calib.uses_delta:
            assert score is not None
            fit = replace(fit, calib_dir=fit.calib_dir if run_path.name else None)
            method = method.choose_delta(score, fit)
        return method


def scores_of(score: Score, methods: Sequence[SRC]) -> list[float]:
    """The selection score of each method: in one pass when the scorer answers many together (the
    answering stage's :class:`~pipeline.stages.selection.ValidScorer`), else one call each."""
    many = getattr(score, "many", None)
    return [float(v) for v in (many(methods) if many is not None else [score(m) for m in methods])]


def rebuild(recipe: dict[str, Any], device: str | None = None) -> SRC:
    """SRC from :meth:`SRC.portable`'s recipe, in another process: load the export on this worker's
    device (a GPU actor's GPU), apply the saved L, lower alpha by the driver's delta. Fits nothing."""
    from pipeline.core import config
    from pipeline.formats.engine_index import load_engine_index

    adj, manifest = load_engine_index(recipe["path"], recipe["dataset"], config.select_device(device))
    info = recipe["info"]
    method = SRC(adj, {**manifest, "path": recipe["path"]}, recipe["calibration"], 0.0, info)
    uses_l = CALIBRATIONS[recipe["calibration"]].uses_l
    method = method.apply_saved(l_dir=info["l_dir"] if uses_l else None, run_dir=info.get("l_run"),
                                delta=float(recipe["delta"]))
    return replace(method, cycle_cap=recipe.get("cycle_cap"))


def _registered_sizes(get_spec: Any, dataset: str) -> tuple[int | None, int | None]:
    """(entities, relations) of a registered data set, for checking an export against it."""
    try:
        spec = get_spec(dataset)
    except PipelineError:
        return None, None
    return spec.n_entities, spec.n_relations
