"""Training settings checked at the door: every source of a TrainConfig (flags, a
replayed config.json, the Python API) passes one check, so a value out of range is one line naming the
setting, never clamped and never a traceback; a run's sealed config.json, edited, is refused by `train
--config` as by export and --resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.errors import ArtifactError, CorruptArtifactError, PipelineError
from pipeline.models.config import TrainConfig, default_config, train_config
from pipeline.models.runs import CONFIG_FILE, write_run_json


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("dim", -5, "dim: -5 is out of range"), ("dim", 0, "dim: 0 is out of range"),
        ("dim", "16", "dim: expected an integer, got '16'"), ("dim", 16.0, "dim: expected an integer"),
        ("dim", True, "dim: expected an integer"), ("epochs", -1, "epochs: -1 is out of range"),
        ("epochs", None, "epochs: expected an integer, got None"), ("negatives", -1, "negatives: -1"),
        ("batch_size", 0, "batch_size: 0 is out of range"), ("batch_size", -3, "batch_size: -3"),
        ("lr", float("nan"), "lr: nan is not a finite number"), ("lr", -1.0, "lr: -1 is out of range"),
        ("lr", 0.0, "lr: 0 is out of range"), ("seed", -1, "seed: -1 is out of range"),
        ("seed", 10**22, "seed: 10000000000000000000000 is out of range"), ("psl", "yes", "psl: expected true"),
        ("patience", 0, "patience: 0"), ("psl_weight", float("inf"), "psl_weight: inf"),
    ],
)  # fmt: skip
def test_a_setting_out_of_range_is_one_error_naming_it(field, value, message):
    base = default_config("ppi5k", "ukge_logi").to_dict()
    with pytest.raises(PipelineError, match=message.replace("(", r"\(")):
        TrainConfig.from_dict({**base, field: value})
    with pytest.raises(PipelineError, match=message.split(":")[0]):
        dataclasses.replace(default_config("ppi5k", "ukge_logi"), **{field: value})


def test_bad_config_files_are_one_line(tmp_path: Path):
    path = tmp_path / "c.json"
    for doc, needle in (({}, "missing field(s) dataset, model"), ([], "not a JSON object"),
                        ({"dataset": "ppi5k", "model": "ukge_logi", "dim": "16"}, "dim: expected an integer"),
                        ({"dataset": "ppi5k", "model": "ukge_logi", "epochs": None}, "epochs: expected an integer")):
        path.write_text(json.dumps(doc))
        res = CliRunner().invoke(cli, ["train", "ppi5k", "--config", str(path)])
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and needle in lines[0] and str(path) in lines[0], res.output


@pytest.mark.parametrize("flags", [["--dim", "-5"], ["--negatives", "-1"], ["--batch-size", "0"], ["--lr", "nan"],
                                   ["--lr", "-1"], ["--device", "garbage"], ["--epochs", "-1"], ["--seed", "-1"],
                                   ["--seed", "12345678901234567890123"]])
def test_bad_train_flags_are_one_line(tmp_path: Path, flags):
    res = CliRunner().invoke(cli, ["train", "ppi5k", "--model", "ukge_logi", "--out", str(tmp_path / "r"), *flags])
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert not (tmp_path / "r" / "model.pt").exists()


def test_cuda_on_a_build_without_it_is_one_line():
    import torch

    from pipeline.core.config import select_device

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(PipelineError, match="--device cuda: torch .* use --device cpu"):
        select_device("cuda")
    assert select_device("cpu") == "cpu" and select_device(None) == "cpu"


def test_an_edited_sealed_config_is_refused_by_train_config(tmp_path: Path):
    """`pipeline train --config RUN/config.json` replayed an edited sealed config (dim 16 ->
    17) while export and --resume refused it."""
    run = tmp_path / "run"
    run.mkdir()
    cfg = default_config("ppi5k", "ukge_logi", dim=16, epochs=3)
    write_run_json(run / CONFIG_FILE, cfg.to_dict())  # sealed by the run's checksums.json
    assert train_config("ppi5k", None, run / CONFIG_FILE) == cfg
    text = (run / CONFIG_FILE).read_text()
    (run / CONFIG_FILE).write_text(text.replace('"dim": 16', '"dim": 17'))
    with pytest.raises(CorruptArtifactError, match=str(run / CONFIG_FILE)):
        train_config("ppi5k", None, run / CONFIG_FILE)
    res = CliRunner().invoke(cli, ["train", "ppi5k", "--config", str(run / CONFIG_FILE)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and str(run / CONFIG_FILE) in res.stderr
    # a config file of the user's own (no run directory around it) is theirs to edit
    own = tmp_path / "mine.json"
    own.write_text(text.replace('"dim": 16', '"dim": 17'))
    assert train_config("ppi5k", None, own).dim == 17
    assert isinstance(CorruptArtifactError(own, "x"), ArtifactError)
