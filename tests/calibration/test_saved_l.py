"""A saved calibration L is sealed like the D file: L.json edited, or without its digest, and L.pt without its
digest or with non-finite weights, are refused by `pipeline query --calibration` (one line naming the file)
and fitted again by `pipeline answer`; a fit that diverges keeps its last finite check, never NaN weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pipeline.core import checksums
from pipeline.core.errors import ArtifactError
from pipeline.methods.src.method import SRC
from tests.answer.src_entry import answer_src


@pytest.fixture(scope="module")
def fitted(toy_pipeline: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One fit of L on the toy pipeline (a few steps): its report (l_dir under the run's calibration/)."""
    p = toy_pipeline
    out = tmp_path_factory.mktemp("saved_l")
    rep = answer_src(p["test"], p["export"], "L", out / "a", train_queries=p["train"], valid_queries=p["valid"],
                     progress=False, kg=p["kg"], seed=0, l_steps=3, l_lr=0.05)
    return {**rep, "out": out}


def _copy(fitted: dict, name: str) -> Path:
    src = Path(fitted["l_dir"])
    dst = src.parent / f"L-{name}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst


def _apply(toy_pipeline: dict, l_dir: Path) -> SRC:
    return SRC.load(toy_pipeline["export"], "toy", kg=toy_pipeline["kg"]).apply_saved(l_dir=l_dir)


def test_the_saved_l_applies(toy_pipeline: dict, fitted: dict) -> None:
    assert _apply(toy_pipeline, Path(fitted["l_dir"])).info["l_dir"] == fitted["l_dir"]


def test_an_edited_l_json_is_refused(toy_pipeline: dict, fitted: dict) -> None:
    """L.json's recorded form edited (its terms): before, the L was applied as the edit said."""
    l_dir = _copy(fitted, "edited")
    doc = json.loads((l_dir / "L.json").read_text())
    doc["history"]["config"]["terms"] = "relation"
    (l_dir / "L.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=r"L-edited/L.json: the saved calibration L was edited after it was written"):
        _apply(toy_pipeline, l_dir)


def test_an_l_json_without_its_digest_is_refused(toy_pipeline: dict, fitted: dict) -> None:
    l_dir = _copy(fitted, "nodigest")
    doc = json.loads((l_dir / "L.json").read_text())
    doc.pop("digest")
    (l_dir / "L.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=r"L-nodigest/L.json: the digest of the saved calibration L is missing"):
        _apply(toy_pipeline, l_dir)


def test_an_l_pt_without_its_digest_or_with_non_finite_weights_is_refused(toy_pipeline: dict, fitted: dict) -> None:
    l_dir = _copy(fitted, "state")
    state = torch.load(l_dir / "L.pt", weights_only=True)
    body = {k: v for k, v in state.items() if k != checksums.OBJECT_KEY}
    torch.save({k: v + 0.5 for k, v in body.items()}, l_dir / "L.pt")
    with pytest.raises(ArtifactError, match=r"L-state/L.pt: its checksum .* is missing"):
        _apply(toy_pipeline, l_dir)
    # sealed, but NaN: what a diverged fit would have saved
    torch.save(checksums.seal_object({k: torch.full_like(v, float("nan")) for k, v in body.items()}), l_dir / "L.pt")
    with pytest.raises(ArtifactError, match="diverged weights"):
        _apply(toy_pipeline, l_dir)


def test_answer_fits_an_edited_saved_l_again(toy_pipeline: dict, fitted: dict) -> None:
    """The same answer again finds its saved L edited: fitted again and replaced, as an edited D is chosen
    again (the answers are those of the first fit)."""
    import pandas as pd

    p = toy_pipeline
    l_json = Path(fitted["l_dir"]) / "L.json"
    doc = json.loads(l_json.read_text())
    doc["history"]["config"]["terms"] = "relation"
    l_json.write_text(json.dumps(doc))
    rep = answer_src(p["test"], p["export"], "L", fitted["out"] / "b", train_queries=p["train"],
                     valid_queries=p["valid"], progress=False, kg=p["kg"], seed=0, l_steps=3, l_lr=0.05)
    assert rep["l_dir"] == fitted["l_dir"]
    assert json.loads(l_json.read_text())["history"]["config"]["terms"] == "all"  # written again, sealed
    _apply(p, Path(fitted["l_dir"]))
    first, again = (pd.read_parquet(Path(r["path"])) for r in (fitted, rep))
    pd.testing.assert_frame_equal(first, again)


def test_a_diverging_fit_keeps_a_sane_check(toy_pipeline: dict) -> None:
    """At a rate of 1e30 (what `--l-lr 1e30` trained before the door refused it) the weights jump to ~1e30
    at the first step: rho and lambda no longer resolve a confidence in float32. The fit stops there and
    keeps the best check before it (here the identity); before, it trained on and kept weights near 1e30."""
    from pipeline.engine import Adjacency, search_batch
    from pipeline.formats.adjacency import load_adjacency
    from pipeline.formats.queryset import read_query_set
    from pipeline.methods.src.affine import feature_tables, fit_affine, is_identity, sane
    from pipeline.methods.src.recipe import LConfig
    from pipeline.models import load_run

    p = toy_pipeline
    graph, _ = load_adjacency(p["export"])
    adj = Adjacency.from_graph(graph)
    from pipeline.core.kg import observed_graph

    truth = Adjacency.from_graph(observed_graph(p["kg"], "train"))
    model = load_run(p["run"])
    calib, history = fit_affine(model, adj, read_query_set(p["train"]).queries(), truth, search_batch,
                                None, LConfig(lr=1e30, steps=40, check_every=1), progress=False)
    assert history["diverged"]["step"] == 1 and list(history["epochs"]) == ["0"]
    assert is_identity(calib) and sane(calib, feature_tables(model))
