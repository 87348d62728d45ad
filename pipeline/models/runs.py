"""Run directories: everything a table needs to be traced back to its run.

    RUN_DIR/config.json      TrainConfig (data set, model, hyper-parameters, seed)
    RUN_DIR/metadata.json    versions, git hash, data checksums, seed, device, dates
    RUN_DIR/results.json     valid/test MSE and MAE (test negatives too where the data set has them), timings
    RUN_DIR/model.pt         {"config": model config, "state_dict": ...} of the selected (best valid) epoch
    RUN_DIR/checkpoint.pt    last epoch's model + optimiser state, for --resume
    RUN_DIR/checksums.json   the sha256 digest of each JSON document above (sealed), checked when read

Files are written atomically (temp file + rename), so an interrupted run never leaves a half-written one.
The two ``.pt`` files carry the digest of their own content (:func:`pipeline.core.checksums.seal_object`), so a
damaged model is never exported and a damaged checkpoint never resumed; results.json's ``model_hash`` must
be the hash of the model.pt beside it.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pipeline.core import atomic, checksums
from pipeline.core.errors import ArtifactError, CorruptArtifactError
from pipeline.core.provenance import is_sealed, provenance, seal
from pipeline.formats import meta as metafile
from pipeline.models.base import ConfidenceModel

MODEL_FILE, CHECKPOINT_FILE = "model.pt", "checkpoint.pt"
CONFIG_FILE, METADATA_FILE, RESULTS_FILE = "config.json", "metadata.json", "results.json"
CHECKSUMS_FILE = "checksums.json"
CHECKSUMS_FORMAT = "soft-queries/run-checksums/1"


@dataclass(frozen=True)
class Run:
    """A trained backbone's run directory (``pipeline train``, ``pl.train``): its ``path`` and JSON documents
    (``config.json``, ``metadata.json``, ``results.json``); ``metrics`` is the results' MSE/MAE table.

    >>> import dataclasses, pipeline as pl
    >>> [f.name for f in dataclasses.fields(pl.Run)]
    ['path', 'config', 'metadata', 'results']
    """

    path: Path
    config: dict[str, Any] = field(repr=False)
    metadata: dict[str, Any] = field(repr=False)
    results: dict[str, Any] = field(repr=False)

    @property
    def dataset(self) -> str:
        return str(self.config["dataset"])

    @property
    def metrics(self) -> Any:
        """The confidence errors, a DataFrame: index split (valid, test, ...), columns n, MSE, MAE."""
        import pandas as pd

        rows = [{"split": k, "n": v["n"], "MSE": v["mse"], "MAE": v["mae"]} for k, v in self.results.items()
                if isinstance(v, dict) and "mse" in v]
        return pd.DataFrame(rows, columns=["split", "n", "MSE", "MAE"]).set_index("split")

    @property
    def link_prediction(self) -> Any:
        """The link-prediction figures as the unKR benchmark computes them
        (:func:`pipeline.models.link_prediction.link_prediction`), a DataFrame: index (split, direction,
        setting) with direction tail (unKR's tables), head or both and setting filtered or raw; columns
        MRR, MR, hits@1/3/10, tied (the share of targets tied with another entity) and MRR_expected (over
        random orders of ties). Empty when the run has none (trained with ``link_prediction=False``)."""
        import pandas as pd

        from pipeline.models.link_prediction import iter_settings

        cols = {"mrr": "MRR", "mr": "MR", "hits@1": "hits@1", "hits@3": "hits@3", "hits@10": "hits@10",
                "tied": "tied", "mrr_expected": "MRR_expected"}
        rows = [{"split": split, "direction": d, "setting": s, **{v: m[k] for k, v in cols.items()}}
                for split, res in (self.results.get("link_prediction") or {}).items()
                for d, s, m in iter_settings(res)]
        frame = pd.DataFrame(rows, columns=["split", "direction", "setting", *cols.values()])
        return frame.set_index(["split", "direction", "setting"])


# how a run directory whose checksums cannot be checked is made again
TRAIN_AGAIN = "train it again (`pipeline train ... --out` this folder, with --overwrite)"


def _checksums(folder: Path, required: bool = True) -> dict[str, str]:
    """The run directory's recorded JSON digests; CorruptArtifactError when the list is missing (unless
    ``required`` is False: a run being written), edited or damaged."""
    path = folder / CHECKSUMS_FILE
    if not path.exists():
        if required:
            raise checksums.missing(path, "the run's list of checksums", TRAIN_AGAIN)
        return {}
    try:
        doc = metafile.read_json(path)
    except ArtifactError:
        doc = None  # damaged beyond JSON: the same verdict as an edited one
    if not isinstance(doc, dict) or doc.get("format") != CHECKSUMS_FORMAT or not is_sealed(doc):
        raise CorruptArtifactError(path, "not the sealed checksum list of a run directory (edited or damaged)")
    return dict(doc.get("files", {}))


def write_run_json(path: Path, doc: Any) -> None:
    """Write a run's JSON document, then record its digest in the run's checksums.json (both atomically)."""
    path = Path(path)
    atomic.write_json(path, doc)
    try:
        kept = _checksums(path.parent, required=False)
    except ArtifactError:  # a damaged list is replaced: writing must not need the run to be intact
        kept = {}
    files = {**kept, path.name: checksums.file_digest(path)}
    atomic.write_json(path.parent / CHECKSUMS_FILE, seal({"format": CHECKSUMS_FORMAT, "files": files}))


def read_json(path: Path) -> Any:
    """A run's JSON document, checked against the digest checksums.json recorded for it (refused when the
    list, or its entry for this file, is missing)."""
    path = Path(path)
    if path.exists():  # before parsing: a damaged file is reported as damaged, not as bad JSON
        want = _checksums(path.parent).get(path.name)
        if want is None:
            raise checksums.missing(path, f"its checksum (its entry in {CHECKSUMS_FILE})", TRAIN_AGAIN)
        checksums.check_file(path, want)
    return metafile.read_json(path)


def torch_save(path: Path, obj: Any) -> None:
    """Save a document (a dict: sealed with the digest of its content) atomically."""
    doc = checksums.seal_object(obj) if isinstance(obj, dict) else obj
    atomic.write_with(path, lambda tmp: torch.save(doc, tmp))


def torch_load(path: Path) -> Any:
    """A saved document, its digest checked (CorruptArtifactError naming the file on a mismatch)."""
    if not path.exists():
        raise ArtifactError(f"{path}: missing (is {path.parent} a run directory?)")
    try:
        # weights_only: a run directory holds tensors and plain values, never pickled modules
        doc = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign file: torch raises several types
        raise ArtifactError(
            f"{path}: not a readable model file ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    return checksums.verify_object(doc, path, TRAIN_AGAIN)


def save_model(run_dir: Path, model: ConfidenceModel) -> None:
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    torch_save(run_dir / MODEL_FILE, {"config": model.config(), "state_dict": state})


def model_from_doc(doc: Any, path: Path, get_class: Any) -> Any:
    """Rebuild a model from a {"config", "state_dict"} document read from ``path``; ``get_class`` maps the
    config's "model" name to its class (a registry lookup). ArtifactError when the document does not fit."""
    if not isinstance(doc, dict) or "config" not in doc or "state_dict" not in doc:
        raise ArtifactError(f"{path}: not a model file of this project (no config/state_dict)")
    cls = get_class(str(doc["config"].get("model", "?")))
    model = cls.from_config(doc["config"])
    try:
        model.load_state_dict(doc["state_dict"])
    except RuntimeError as exc:
        raise ArtifactError(f"{path}: state dict does not fit its config ({str(exc)[:160]})") from None
    return model


def model_from_file(path: Path) -> ConfidenceModel:
    """Rebuild a model from a {"config", "state_dict"} file (model.pt or a checkpoint's part)."""
    from pipeline.models.registry import get_model_class

    return model_from_doc(torch_load(path), path, get_model_class).eval()


def read_run(run_dir: str | Path) -> Run:
    """The JSON documents of a run directory; ArtifactError if it is not one."""
    path = Path(run_dir)
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a run directory")
    docs = {}
    for name in (CONFIG_FILE, METADATA_FILE, RESULTS_FILE):
        if name == RESULTS_FILE and not (path / name).exists():  # a run still training has none yet
            docs[name] = {}
            continue
        docs[name] = read_json(path / name)
        if not isinstance(docs[name], dict):
            raise ArtifactError(f"{path / name}: not a JSON object (is {path} a run directory?)")
    if "dataset" not in docs[CONFIG_FILE]:
        raise ArtifactError(f"{path / CONFIG_FILE}: no 'dataset' field (is {path} a run directory?)")
    return Run(path, docs[CONFIG_FILE], docs[METADATA_FILE], docs[RESULTS_FILE])


def load_run(
    run_dir: str | Path, device: str | torch.device = "cpu", dataset: str | None = None
) -> ConfidenceModel:
    """The trained model of a run directory (eval mode, on `device`). With `dataset`, a run of another
    data set raises ArtifactError."""
    run = read_run(run_dir)
    if dataset is not None and run.dataset != dataset:
        raise ArtifactError(f"{run.path}: a run on data set '{run.dataset}', not '{dataset}'")
    model = model_from_file(run.path / MODEL_FILE)
    cfg = run.config
    if (model.name != cfg.get("model")) or (model.dim != cfg.get("dim")):
        raise ArtifactError(
            f"{run.path}: model.pt ({model.name}, dim {model.dim}) does not match config.json"
        )
    recorded = run.results.get("model_hash")
    if recorded and model.content_hash() != recorded:
        raise CorruptArtifactError(
            run.path / MODEL_FILE,
            f"not the model {RESULTS_FILE} describes (model hash {model.content_hash()[:12]}…, recorded "
            f"{str(recorded)[:12]}…); a model file was swapped in, train again",
        )
    return model.to(device)


def run_metadata(
    checksums: dict[str, str], seed: int, device: str, cfg: dict[str, Any] | None = None,
    dataset_version: str | None = None,
) -> dict[str, Any]:
    """The run's provenance (:func:`pipeline.core.provenance.provenance`: versions, git hash, config, seed, data
    checksums) plus its device and the content key of the data set version it was trained on."""
    return {
        **provenance(cfg, seed, inputs={"data_checksums": dict(checksums)}),
        "data_checksums": dict(checksums),
        **({"dataset_version": dataset_version} if dataset_version else {}),
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu",
        "torch_threads": torch.get_num_threads(),
    }
