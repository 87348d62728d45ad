"""Running the same training again (a notebook cell re-run): a finished run of the same
config and data is reused (nothing trained or written), an unfinished one resumed to the uninterrupted run's
model, another config or changed data refused naming what differs, in the caller's spelling."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import pipeline.models.training as training
from pipeline.core.errors import PipelineError
from pipeline.models import default_config, train
from tests.models.toy import toy_kg

FAST = {"dim": 8, "batch_size": 32, "lr": 0.01}


def _cfg(**kw):
    return default_config("toy", "ukge_logi", **{**FAST, "epochs": 3, **kw})


def _files(run: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in run.iterdir()}


def test_the_same_call_again_reuses_the_finished_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kg, run = toy_kg(), tmp_path / "run"
    first = train(kg, _cfg(), run, progress=False)
    before = _files(run)
    monkeypatch.setattr(training, "run_epoch", lambda *a, **k: pytest.fail("trained again"))
    again = train(kg, _cfg(), run, progress=False)
    assert again == {**first, "reused": True} and _files(run) == before


def test_an_interrupted_run_is_resumed_by_the_same_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kg = toy_kg()
    whole = train(kg, _cfg(), tmp_path / "whole", progress=False)
    real = training.run_epoch

    def stop_at_third(model, opt, facts, psl, cfg, epoch, progress):
        if epoch == 2:
            raise KeyboardInterrupt  # the kernel interrupted mid-run: two epochs checkpointed
        return real(model, opt, facts, psl, cfg, epoch, progress)

    monkeypatch.setattr(training, "run_epoch", stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        train(kg, _cfg(), tmp_path / "cut", progress=False)
    assert not (tmp_path / "cut" / "model.pt").exists()
    ran = []
    monkeypatch.setattr(training, "run_epoch", lambda *a, **k: ran.append(a[5]) or real(*a, **k))
    resumed = train(kg, _cfg(), tmp_path / "cut", progress=False)
    assert ran == [2] and "reused" not in resumed
    assert resumed["model_hash"] == whole["model_hash"]  # the uninterrupted run's model


def test_another_config_is_refused_naming_the_setting(tmp_path: Path) -> None:
    kg, run = toy_kg(), tmp_path / "run"
    train(kg, _cfg(), run, progress=False)
    before = _files(run)
    with pytest.raises(PipelineError) as err:
        train(kg, _cfg(dim=16, lr=0.02), run, progress=False)
    assert str(err.value) == (
        f"{run} holds a run with other settings (dim=16 here, 8 there; lr=0.02 here, 0.01 there): overwrite=True "
        "starts over (deleting it), or give another out="
    )
    with pytest.raises(PipelineError, match=r"\(epochs=5 here, 3 there\): resume=True continues it with these "
                       r"settings; overwrite=True starts over"):
        train(kg, _cfg(epochs=5), run, progress=False)
    assert _files(run) == before
    assert train(kg, _cfg(epochs=5), run, progress=False, resume=True)["epochs_run"] == 5


def test_changed_data_is_refused(tmp_path: Path) -> None:
    kg, run = toy_kg(), tmp_path / "run"
    train(kg, _cfg(), run, progress=False)
    changed = dataclasses.replace(kg, checksums={**kg.checksums, "train.tsv": "0" * 64})
    with pytest.raises(PipelineError, match=r"holds a run trained on other data: data set 'toy' changed since "
                       r"\(train.tsv\); overwrite=True trains again on the current data"):
        train(changed, _cfg(), run, progress=False)
    with pytest.raises(PipelineError, match="changed since"):
        train(changed, _cfg(), run, progress=False, resume=True)
    assert train(changed, _cfg(), run, progress=False, overwrite=True)["epochs_run"] == 3
