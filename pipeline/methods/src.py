"""SRC (design section 2) as an answering method: the exact engine over a neural adjacency export, with a
calibration (none, D, L or D+L; :mod:`pipeline.calibration`).

:meth:`SRC.build` loads the export, fits what the calibration needs (L on the train queries, delta on the
valid queries) or reuses a saved fit keyed by content (model hash, threshold, query set checksums,
settings), and returns a method whose :meth:`utilities` run the engine with alpha lowered by delta.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from pipeline import atomic
from pipeline.calibration import CALIBRATIONS, DELTA_GRID, L_VERSION, lower_alphas
from pipeline.engine import Adjacency, as_adjacency, evaluate_batch
from pipeline.errors import ArtifactError, PipelineError
from pipeline.formats import pair_cache as paircache
from pipeline.formats.queryset import QuerySet, checksum
from pipeline.methods.base import Method
from pipeline.provenance import stable_key
from pipeline.query.model import Query


@dataclass
class SRC(Method):
    """SRC on one export. ``delta`` lowers every atom's alpha (calibration D; 0 = none); ``adjacency`` is
    already calibrated by L when the calibration uses L."""

    name: ClassVar[str] = "src"
    description: ClassVar[str] = "exact max-plus search over a neural adjacency export (SRC), calibrated by none|D|L|D+L"

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

    def with_delta(self, delta: float) -> SRC:
        """The same method with another delta (for choosing delta on the valid queries)."""
        return SRC(self.adjacency, self.manifest, self.calibration, delta, self.info)

    def utilities(self, queries: Sequence[Query]) -> torch.Tensor:
        if self.adjacency is None:
            raise PipelineError("this SRC did not load its export (built for an executor's actors): answer through them")
        with torch.no_grad():
            return evaluate_batch([lower_alphas(q, self.delta) for q in queries], self.adjacency)

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
        valid: QuerySet | None = None,
        train: QuerySet | None = None,
        run_dir: str | Path | None = None,
        device: str | None = None,
        seed: int = 0,
        l_epochs: int = 20,
        progress: bool = True,
        kg: Any = None,
        load: bool = True,
    ) -> SRC:
        """SRC on the export at ``adjacency_dir`` (of ``dataset``), calibrated.

        D needs ``valid`` (delta chosen there); L needs ``train`` (fitted there, alpha = 0) and selects on
        ``valid`` when given; L's features come from the export's run unless ``run_dir`` names another copy.
        kg: the loaded data set whose train graph gives L its targets (default: loaded by name).
        load=False (calibration none only): read and check the manifest but leave the export unloaded, for
        answering on an executor's actors, which each load it (the driver then holds no copy)."""
        from loaders import get_spec
        from pipeline import config
        from pipeline.formats.engine_index import load_engine_index

        calib = CALIBRATIONS[calibration]
        dev = config.select_device(device)
        sizes = (kg.n_entities, kg.n_relations) if kg is not None else _registered_sizes(get_spec, dataset)
        if not load and calib.name == "none":
            from pipeline.formats.adjacency import checked_manifest

            return cls(None, {**checked_manifest(adjacency_dir, dataset, *sizes), "path": str(adjacency_dir)})
        adj, manifest = load_engine_index(adjacency_dir, dataset, dev, *sizes)
        manifest = {**manifest, "path": str(adjacency_dir)}
        method = cls(adj, manifest, calib.name, info={"seed": seed} if calib.uses_l else {})
        if calib.uses_delta and valid is None:
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
            method = _fit_l(method, train, valid, run_path, calib_dir, key_parts, dev, seed, l_epochs, progress, kg)
        if calib.uses_delta:
            assert valid is not None
            method = _choose_delta(method, valid, calib_dir if run_path.name else None, key_parts, progress)
        return method


def rebuild(recipe: dict[str, Any], device: str | None = None) -> SRC:
    """SRC from :meth:`SRC.portable`'s recipe, in another process: load the export on this worker's
    device (a GPU actor's GPU), apply the saved L, lower alpha by the driver's delta. Fits nothing."""
    from pipeline import config
    from pipeline.formats.engine_index import load_engine_index

    dev = config.select_device(device)
    adj, manifest = load_engine_index(recipe["path"], recipe["dataset"], dev)
    manifest = {**manifest, "path": recipe["path"]}
    info = recipe["info"]
    if CALIBRATIONS[recipe["calibration"]].uses_l:
        from pipeline.calibration import calibrated_adjacency, feature_tables, load_affine
        from pipeline.models import load_run

        model = load_run(info["l_run"], device=dev)
        tables = feature_tables(model, adj.device)
        calib = load_affine(Path(info["l_dir"]), tables[0].shape[1], tables[1].shape[1], adj.device)
        if calib is None:
            raise ArtifactError(f"{info['l_dir']}: the saved calibration L is gone; answer again to refit it")
        with torch.no_grad():
            adj = calibrated_adjacency(adj, calib, tables)
        adj.use_pair_cache(_l_pair_cache(recipe["path"], Path(info["l_dir"])))
    return SRC(adj, manifest, recipe["calibration"], float(recipe["delta"]), info)


def _l_pair_cache(export: str | Path, l_dir: Path) -> paircache.PairCache | None:
    """The pair cache of an export's confidences calibrated by the saved L in ``l_dir``: keyed by the
    export and the bytes of L's files (a refit with other weights never reads the old pairs)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in l_dir.rglob("*") if p.is_file()):
        h.update(f.relative_to(l_dir).as_posix().encode() + b"\0" + f.read_bytes())
    return paircache.for_export(export, salt=f"L:{h.hexdigest()}")


def _registered_sizes(get_spec: Any, dataset: str) -> tuple[int | None, int | None]:
    """(entities, relations) of a registered data set, for checking an export against it."""
    try:
        spec = get_spec(dataset)
    except PipelineError:
        return None, None
    return spec.n_entities, spec.n_relations


def _fit_l(
    method: SRC,
    train: QuerySet,
    valid: QuerySet | None,
    run_path: Path,
    calib_dir: Path,
    key_parts: dict[str, Any],
    dev: str,
    seed: int,
    l_epochs: int,
    progress: bool,
    kg: Any,
) -> SRC:
    """Apply calibration L to the method's adjacency: a saved fit with the same key, else a new fit."""
    from pipeline.answer import answer_query_set, selection_score
    from pipeline.calibration import (
        LConfig,
        calibrated_adjacency,
        feature_tables,
        fit_affine,
        load_affine,
        save_affine,
    )
    from pipeline.models import load_run

    if not (run_path / "config.json").exists():
        raise PipelineError(f"calibration L needs the backbone's run directory; {run_path} is not one (use --run)")
    model = load_run(run_path, device=dev)
    if model.content_hash() != method.manifest["model_hash"]:
        raise ArtifactError(
            f"{run_path}: its model is not the one exported to {method.manifest['path']} (content hash differs)"
        )
    lcfg = LConfig(epochs=l_epochs, seed=seed)
    uses_delta = CALIBRATIONS[method.calibration].uses_delta
    # L alone is selected on the valid score at delta 0; under D+L on the best valid score over the delta
    # grid (L and delta are chosen together: an L that lowers confidences is only useful with a delta that
    # lowers the thresholds with them). Two selections, two saved calibrations.
    key_parts.update(
        train=checksum(train.frame),
        l_config=lcfg.__dict__,
        l_select="max-over-delta-grid" if uses_delta else "delta-0",
        l_version=L_VERSION,
    )
    l_key = stable_key(**key_parts)
    adj = method.adjacency
    tables = feature_tables(model, adj.device)
    calib = load_affine(calib_dir / f"L-{l_key}", tables[0].shape[1], tables[1].shape[1], adj.device)
    if calib is None:
        from loaders import load
        from pipeline.kg import observed_graph

        truth = as_adjacency(observed_graph(kg if kg is not None else load(method.dataset), "train", device=dev))
        deltas = DELTA_GRID if uses_delta else (0.0,)

        def valid_score(a: Any) -> float:
            assert valid is not None
            trial = SRC(a, method.manifest, method.calibration)
            return max(selection_score(answer_query_set(valid, trial.with_delta(d), progress=False)[0]) for d in deltas)

        calib, history = fit_affine(
            model, adj, train.queries(), truth, evaluate_batch, valid_score if valid is not None else None, lcfg, progress
        )
        save_affine(calib, calib_dir / f"L-{l_key}", {"key": l_key, "inputs": key_parts, "history": history})
    with torch.no_grad():
        adj = calibrated_adjacency(adj, calib, tables)
    adj.use_pair_cache(_l_pair_cache(method.manifest["path"], calib_dir / f"L-{l_key}"))
    info = {**method.info, "l_key": l_key, "l_dir": str(calib_dir / f"L-{l_key}"), "l_run": str(run_path)}
    return SRC(adj, method.manifest, method.calibration, method.delta, info)


def _choose_delta(
    method: SRC, valid: QuerySet, calib_dir: Path | None, key_parts: dict[str, Any], progress: bool
) -> SRC:
    """Calibration D: the delta of the grid with the best valid score (saved and reused by content key)."""
    from pipeline.answer import answer_query_set, selection_score
    from pipeline.calibration import choose_delta

    d_key = stable_key(**{**key_parts, "l_key": method.info.get("l_key"), "grid": DELTA_GRID})
    d_file = calib_dir / f"D-{d_key}.json" if calib_dir is not None else None
    if d_file is not None and d_file.exists():
        try:
            delta = float(json.loads(d_file.read_text())["delta"])
        except (ValueError, KeyError) as exc:
            raise ArtifactError(f"{d_file}: unreadable saved delta ({exc}); delete it to choose again") from None
    else:
        delta, scores = choose_delta(
            lambda d: selection_score(answer_query_set(valid, method.with_delta(d), progress=False)[0]),
            progress=progress,
        )
        if d_file is not None:
            atomic.write_json(d_file, {"delta": delta, "scores": scores, "inputs": key_parts})
    return method.with_delta(delta)


def answer_src(
    queries: str | Path,
    adjacency: str | Path,
    calibration: str = "none",
    out_dir: str | Path | None = None,
    valid_queries: str | Path | None = None,
    train_queries: str | Path | None = None,
    run_dir: str | Path | None = None,
    device: str | None = None,
    seed: int = 0,
    l_epochs: int = 20,
    progress: bool = True,
    kg: Any = None,
    allow_split_mismatch: bool = False,
    explain: int = 0,
    executor: Any = None,
) -> dict[str, Any]:
    """`pipeline answer QUERIES --adjacency DIR --calibration C` from Python: read the query sets (checking
    their roles), build SRC, answer and write the answers file. Returns the report of
    :func:`pipeline.answer.run_answer`. explain > 0: names in the answers file and the top-`explain`
    witnesses beside it (report["witnesses"], pipeline.explain_answers). executor: where the answering
    batches run (pipeline.executors; calibration is fitted here, on the driver, before)."""
    from pipeline.answer import check_role, run_answer
    from pipeline.formats.queryset import read_query_set

    qs = read_query_set(queries)
    dataset = qs.meta["dataset"]
    valid = read_query_set(valid_queries) if valid_queries else None
    train = read_query_set(train_queries) if train_queries else None
    check_role(valid, "--valid-queries", dataset, allow_split_mismatch)
    check_role(train, "--train-queries", dataset, allow_split_mismatch)
    # remote actors each load the export; the driver needs it only to fit a calibration or explain
    load = calibration != "none" or bool(explain) or executor is None or executor.in_process or executor.shares_memory
    method = SRC.build(adjacency, dataset, calibration, valid, train, run_dir, device, seed, l_epochs, progress, kg, load)
    report = run_answer(qs, method, out_dir, {"valid": valid, "train": train}, progress, executor)
    if explain:
        from pipeline.explain_answers import explain_answers_file

        report["witnesses"] = explain_answers_file(report["path"], qs, method, explain, progress)
    return report
