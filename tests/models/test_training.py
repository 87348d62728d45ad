"""Training on tiny KGs: the loss falls, seeds reproduce, resume replays an uninterrupted run, run
directories hold what they promise, and bad input fails with a typed error."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from loaders.base import KGData
from pipeline.cli import cli
from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.models import default_config, load_run, read_run, train
from pipeline.models.training import batch_loss
from pipeline.models.ukge import UKGELogi
from tests.models.toy import toy_kg

FAST = {"dim": 8, "batch_size": 32, "lr": 0.01}
TRAINED = ["ukge_logi", "ukge_rect", "beurre"]


def test_every_registered_model_has_a_training_test() -> None:
    from pipeline.models import BACKBONES

    assert sorted(BACKBONES) == sorted(TRAINED), "a registered model is missing from the training tests"


def cfg_for(model: str, epochs: int, **kw):
    return default_config("toy", model, epochs=epochs, **{**FAST, **kw})


@pytest.mark.parametrize("model", TRAINED)
def test_loss_decreases_on_a_learnable_kg(model: str, tmp_path: Path) -> None:
    kg = toy_kg()
    res = train(kg, cfg_for(model, 6), tmp_path / model, progress=False)
    losses = [h["loss"] for h in res["history"]]
    assert losses[-1] < 0.9 * losses[0]
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False))
    # the selected epoch is the one of lowest valid MSE
    best = min(res["history"], key=lambda h: h["selection_mse"])
    assert res["best_epoch"] == best["epoch"]
    assert res["valid"]["mse"] == pytest.approx(best["valid_mse"], rel=1e-6)
    assert res["valid_negatives"]["mse"] == pytest.approx(best["valid_neg_mse"], rel=1e-6)
    assert best["selection_mse"] == pytest.approx((best["valid_mse"] + best["valid_neg_mse"]) / 2)


def test_batch_loss_by_hand() -> None:
    m = UKGELogi(3, 1, dim=2, l2=0.0)
    with torch.no_grad():
        m.ent.zero_()  # plausibility 0 everywhere -> every prediction is sigmoid(b) = sigmoid(0) = 0.5
    h, r, t, c = torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([1, 2]), torch.tensor([0.9, 0.3])
    neg = torch.tensor([[2], [0]])
    loss, parts = batch_loss(m, h, r, t, c, (neg, neg))
    assert parts["pos"] == pytest.approx(((0.5 - 0.9) ** 2 + (0.5 - 0.3) ** 2) / 2)
    assert parts["neg"] == pytest.approx(0.25)
    psl = (h, r, t, torch.tensor([0.7, 0.2]))  # only the fact predicted below its soft target counts
    _, parts = batch_loss(m, h, r, t, c, (neg, neg), psl, psl_weight=0.2)
    assert parts["psl"] == pytest.approx(0.2 * ((0.7 - 0.5) ** 2 + 0.0) / 2)


def test_negative_weight_scales_the_negatives_term_by_hand(tmp_path: Path) -> None:
    m = UKGELogi(3, 1, dim=2, l2=0.0)
    with torch.no_grad():
        m.ent.zero_()  # every prediction 0.5
    h, r, t, c = torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([1, 2]), torch.tensor([0.9, 0.3])
    neg = torch.tensor([[2], [0]])
    pos = ((0.5 - 0.9) ** 2 + (0.5 - 0.3) ** 2) / 2
    assert batch_loss(m, h, r, t, c, (neg, neg))[0].item() == pytest.approx(pos + 0.25)
    loss, parts = batch_loss(m, h, r, t, c, (neg, neg), negative_weight=0.1)
    assert loss.item() == pytest.approx(pos + 0.1 * 0.25)
    assert parts["neg"] == pytest.approx(0.25)  # the part shown is the negatives' own mean
    # a lighter weight on the negatives leaves the model predicting more for every pair, negatives too
    kg = toy_kg()
    full = train(kg, cfg_for("ukge_logi", 6), tmp_path / "w1", progress=False)
    light = train(kg, cfg_for("ukge_logi", 6, negative_weight=0.1), tmp_path / "w01", progress=False)
    assert light["valid_negatives"]["mse"] > full["valid_negatives"]["mse"]
    assert read_run(tmp_path / "w01").config["negative_weight"] == 0.1
    with pytest.raises(PipelineError, match="negative_weight"):
        cfg_for("ukge_logi", 1, negative_weight=-1.0)


def test_select_last_keeps_the_final_epoch_without_early_stopping(tmp_path: Path) -> None:
    kg = toy_kg()
    # lr 0.5 overshoots, so the selection MSE does not fall every epoch; patience 1 would stop early
    cfg = cfg_for("ukge_logi", 6, lr=0.5, patience=1, select_on="last")
    res = train(kg, cfg, tmp_path / "a", progress=False)
    assert res["epochs_run"] == 6 and res["best_epoch"] == 6
    last = res["history"][-1]
    assert res["valid"]["mse"] == pytest.approx(last["valid_mse"], rel=1e-6)
    ck = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=False)
    saved = torch.load(tmp_path / "a" / "model.pt", weights_only=True)["state_dict"]
    assert all(torch.equal(saved[k], ck["model"][k]) for k in saved)
    early = train(kg, cfg_for("ukge_logi", 6, lr=0.5, patience=1), tmp_path / "b", progress=False)
    sel = [h["selection_mse"] for h in early["history"]]
    assert early["epochs_run"] < 6 and early["best_epoch"] == 1 + sel.index(min(sel))
    with pytest.raises(PipelineError, match="select_on must be one of"):
        cfg_for("ukge_logi", 1, select_on="best")


def test_same_seed_same_weights_other_seed_differs(tmp_path: Path) -> None:
    kg = toy_kg()
    a = train(kg, cfg_for("ukge_logi", 2, seed=7), tmp_path / "a", progress=False)
    b = train(kg, cfg_for("ukge_logi", 2, seed=7), tmp_path / "b", progress=False)
    c = train(kg, cfg_for("ukge_logi", 2, seed=8), tmp_path / "c", progress=False)
    assert a["model_hash"] == b["model_hash"] != c["model_hash"]
    assert load_run(tmp_path / "a").content_hash() == a["model_hash"]
    assert [h["loss"] for h in a["history"]] == [h["loss"] for h in b["history"]]


@pytest.mark.parametrize("model", ["ukge_rect", "beurre"])
def test_resume_equals_uninterrupted(model: str, tmp_path: Path) -> None:
    kg = toy_kg()
    full = train(kg, cfg_for(model, 4, psl=True), tmp_path / "full", progress=False)
    train(kg, cfg_for(model, 2, psl=True), tmp_path / "part", progress=False)
    resumed = train(kg, cfg_for(model, 4, psl=True), tmp_path / "part", resume=True, progress=False)
    assert resumed["epochs_run"] == 4
    assert [h["loss"] for h in resumed["history"]] == [h["loss"] for h in full["history"]]
    assert resumed["model_hash"] == full["model_hash"]
    # a different config cannot resume that run
    with pytest.raises(ArtifactError, match="differs in lr"):
        train(kg, cfg_for(model, 5, psl=True, lr=0.5), tmp_path / "part", resume=True, progress=False)


def test_run_directory_contents(tmp_path: Path) -> None:
    kg = toy_kg()
    res = train(kg, cfg_for("beurre", 2), tmp_path / "run", progress=False)
    run = read_run(tmp_path / "run")
    assert run.config["model"] == "beurre" and run.config["seed"] == 0 and run.config["dim"] == 8
    meta = run.metadata
    assert meta["seed"] == 0 and meta["data_checksums"] == {"toy": "seed0"}
    assert meta["versions"]["torch"] == torch.__version__ and "git" in meta
    assert {"valid", "test", "test_negatives"} <= set(run.results)
    assert run.results["test"]["n"] == len(kg.split_facts("test"))
    assert res["test_negatives"]["n"] == 10
    state = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert set(state) == {"config", "state_dict", "sha256"}  # a state dict + config (+ its checksum), never a pickled module
    model = load_run(tmp_path / "run")
    from pipeline.models.evaluation import confidence_errors

    assert confidence_errors(model, kg.split_facts("test"))["mse"] == pytest.approx(res["test"]["mse"])


def test_bad_run_directories(tmp_path: Path) -> None:
    kg = toy_kg()
    train(kg, cfg_for("ukge_logi", 1), tmp_path / "run", progress=False)
    with pytest.raises(ArtifactError, match="data set 'toy', not 'cn15k'"):
        load_run(tmp_path / "run", dataset="cn15k")
    data = (tmp_path / "run" / "model.pt").read_bytes()
    (tmp_path / "run" / "model.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match="model.pt: not a readable model file"):
        load_run(tmp_path / "run")
    with pytest.raises(ArtifactError, match="not a run directory"):
        load_run(tmp_path / "nothing")
    (tmp_path / "run" / "config.json").write_text("{trunc")
    with pytest.raises(ArtifactError, match="config.json: checksum mismatch"):
        load_run(tmp_path / "run")
    (tmp_path / "run" / "checksums.json").unlink()  # a run written before checksums, or its list removed
    with pytest.raises(ArtifactError, match="checksums.json: the run's list of checksums is missing"):
        load_run(tmp_path / "run")


def test_psl_needs_softlogic_and_dataset_must_match(tmp_path: Path) -> None:
    kg = toy_kg(softlogic=False)
    with pytest.raises(PipelineError, match="^psl= needs the soft-logic facts"):
        train(kg, cfg_for("ukge_logi", 1, psl=True), tmp_path / "r", progress=False)
    with pytest.raises(PipelineError, match="data set 'other'"):
        train(kg, default_config("other", "ukge_logi", epochs=1), tmp_path / "r", progress=False)


def test_cli_train_errors_are_one_line() -> None:
    from pipeline.cli import cli

    res = CliRunner().invoke(cli, ["train", "ppi5k", "--model", "transe"])
    assert res.exit_code == 2
    assert res.output.strip().startswith("error: unknown model 'transe'") and "\n" not in res.output.strip()


def _slice(kg: KGData, n_entities: int) -> KGData:
    """The facts among the first n_entities entities of a real data set, as a data set of its own."""
    keep = lambda df: df[(df["h"] < n_entities) & (df["t"] < n_entities)].reset_index(drop=True)  # noqa: E731
    return KGData(
        kg.name,
        kg.entities.iloc[:n_entities],
        kg.relations,
        keep(kg.rows),
        keep(kg.test_negatives),
        keep(kg.softlogic) if kg.softlogic is not None else None,
        kg.checksums,
    )


@pytest.mark.slow
def test_real_slice_beats_the_constant_predictor(ppi5k, tmp_path: Path) -> None:
    kg = _slice(ppi5k, 600)
    assert len(kg.graph("train")) > 1000
    res = train(
        kg,
        default_config("ppi5k", "ukge_logi", epochs=4, dim=32, batch_size=256, lr=0.01, psl=True),
        tmp_path / "run",
        progress=False,
    )
    test = kg.split_facts("test")
    baseline = float(((test["conf"] - kg.graph("train")["conf"].mean()) ** 2).mean())
    assert res["test"]["mse"] < 0.8 * baseline
    assert json.loads((tmp_path / "run" / "metadata.json").read_text())["data_checksums"] == ppi5k.checksums
    assert isinstance(kg.rows, pd.DataFrame)


@pytest.mark.slow
def test_cli_train_twice_gives_the_same_run(ppi5k, tmp_path: Path) -> None:
    from pipeline.cli import cli

    args = [
        "train",
        "ppi5k",
        "--model",
        "ukge_rect",
        "--epochs",
        "1",
        "--dim",
        "8",
        "--batch-size",
        "4096",
        "--json",
    ]
    docs = []
    for name in ("a", "b"):
        res = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        docs.append(json.loads(res.stdout))  # --json: one document on stdout, progress on stderr
    assert docs[0]["model_hash"] == docs[1]["model_hash"]
    assert docs[0]["test"] == docs[1]["test"] and docs[0]["test"]["n"] == len(ppi5k.split_facts("test"))
    # the link-prediction figures rank every test row (21,720, duplicates included), the same twice
    ranked = docs[0]["link_prediction"]["test"]
    assert ranked["rows"] == 21720 and ranked["tail"] == docs[1]["link_prediction"]["test"]["tail"]
    assert (tmp_path / "a" / "model.pt").exists() and (tmp_path / "a" / "checkpoint.pt").exists()
    # the same command again into a finished run reuses it (a re-run cell); another setting is
    # refused naming it; --overwrite starts over to the same model
    stamp = (tmp_path / "a" / "model.pt").stat().st_mtime_ns
    again = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a")])
    assert again.exit_code == 0 and json.loads(again.stdout) == {**docs[0], "reused": True}
    assert (tmp_path / "a" / "model.pt").stat().st_mtime_ns == stamp  # nothing trained, nothing written
    other = [a if a != "8" else "16" for a in args]  # --dim 16
    again = CliRunner().invoke(cli, [*other, "--out", str(tmp_path / "a")])
    assert again.exit_code == 2 and again.output == (
        f"error: {tmp_path / 'a'} holds a run with other settings (--dim 16 here, 8 there): --overwrite starts "
        "over (deleting it), or give another --out\n")
    again = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a"), "--overwrite"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["model_hash"] == docs[0]["model_hash"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_training_matches_cpu(tmp_path: Path) -> None:
    """A CUDA run draws its batches from CUDA's generator (other draws than the CPU's, the same
    distribution: pipeline.models.training's docstring): the same seed gives the same model twice on the
    GPU, and its test MSE lies within the spread of CPU runs over seeds (widened by 10%)."""
    kg = toy_kg()
    cpu = [
        train(kg, cfg_for("ukge_logi", 3, device="cpu", seed=s), tmp_path / f"cpu{s}", progress=False)["test"]["mse"]
        for s in range(4)
    ]
    gpu = train(kg, cfg_for("ukge_logi", 3, device="cuda"), tmp_path / "gpu", progress=False)
    again = train(kg, cfg_for("ukge_logi", 3, device="cuda"), tmp_path / "gpu2", progress=False)
    assert gpu["device"] == "cuda" and gpu["model_hash"] == again["model_hash"]
    assert 0.9 * min(cpu) <= gpu["test"]["mse"] <= 1.1 * max(cpu)


def test_a_fresh_run_never_deletes_an_earlier_run_unless_told(tmp_path: Path) -> None:
    kg = toy_kg()
    first = train(kg, cfg_for("ukge_logi", 1), tmp_path / "run", progress=False)
    checkpoint = (tmp_path / "run" / "checkpoint.pt").read_bytes()
    with pytest.raises(PipelineError, match=r"holds a run with other settings \(model='ukge_rect' here, "
                       r"'ukge_logi' there\): overwrite=True starts over \(deleting it\), or give another out="):
        train(kg, cfg_for("ukge_rect", 1), tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "checkpoint.pt").read_bytes() == checkpoint
    again = train(kg, cfg_for("ukge_logi", 1), tmp_path / "run", progress=False, overwrite=True)
    assert again["model_hash"] == first["model_hash"]


def test_cli_train_never_starts_over_a_run_silently(tmp_path: Path) -> None:
    """A run directory holding a checkpoint (an interrupted run) or a model is refused without --resume or
    --overwrite, in one line naming the directory, and its files are left as they were."""
    from pipeline.cli import cli

    for held in ("checkpoint.pt", "model.pt"):
        run = tmp_path / held.split(".")[0]
        run.mkdir()
        (run / held).write_bytes(b"twelve epochs of training")
        res = CliRunner().invoke(cli, ["train", "ppi5k", "--model", "ukge_logi", "--out", str(run)])
        assert res.exit_code == 2, res.output
        line = res.output.strip()
        assert "\n" not in line and str(run) in line and held in line
        assert "without a readable config.json: --overwrite starts over" in line
        assert (run / held).read_bytes() == b"twelve epochs of training"
    res = CliRunner().invoke(cli, ["train", "ppi5k", "--model", "ukge_logi", "--resume", "--overwrite"])
    assert res.exit_code == 2 and "exclude each other" in res.output


def test_train_config_replays_a_saved_config(tmp_path: Path) -> None:
    """`pipeline train --config RUN/config.json` replays the run's settings exactly; options given besides
    override them; a config of another data set or model, or a broken file, is one clear error."""
    from pipeline.models.config import train_config

    cfg = default_config("ppi5k", "beurre", dim=12, epochs=7, lr=0.05, seed=3, select_on="last")
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps(cfg.to_dict()))
    assert train_config("ppi5k", None, saved) == cfg
    assert train_config("ppi5k", "beurre", saved, epochs=9) == dataclasses.replace(cfg, epochs=9)
    assert train_config("ppi5k", "ukge_logi", None, epochs=None).dim == 128  # no --config: the defaults
    with pytest.raises(PipelineError, match="a config for data set 'ppi5k', not 'cn15k'"):
        train_config("cn15k", None, saved)
    with pytest.raises(PipelineError, match="a config for model 'beurre', not 'ukge_rect'"):
        train_config("ppi5k", "ukge_rect", saved)
    saved.write_text("{not json")
    res = CliRunner().invoke(cli, ["train", "ppi5k", "--config", str(saved)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "not valid JSON" in res.output
    res = CliRunner().invoke(cli, ["train", "ppi5k"])
    assert res.exit_code == 2 and "give --model" in res.output


# ------------------------------------------------------------------- the loop without host round trips
def _earlier_epoch(model, opt, facts, psl, cfg, epoch: int) -> float:
    """The training loop as it was before the GPU work, written out: draws on a CPU generator copied to the
    device each step, the loss read on the host each step. The reference the device-drawn loop must equal
    on the CPU, draw for draw."""
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch + 1)
    n, dev, k = len(facts), facts.h.device, cfg.negatives
    perm = torch.randperm(n, generator=g).to(dev)
    n_batches = (n + cfg.batch_size - 1) // cfg.batch_size
    total = 0.0
    model.train()
    for i in range(n_batches):
        idx = perm[i * cfg.batch_size : (i + 1) * cfg.batch_size]
        b = len(idx)
        neg_h = torch.randint(model.n_entities, (b, k), generator=g).to(dev)
        neg_t = torch.randint(model.n_entities, (b, k), generator=g).to(dev)
        psl_batch = None
        if psl is not None:
            j = torch.randint(len(psl), (min(cfg.batch_size, len(psl)),), generator=g).to(dev)
            psl_batch = (psl.h[j], psl.r[j], psl.t[j], psl.c[j])
        loss, _ = batch_loss(
            model, facts.h[idx], facts.r[idx], facts.t[idx], facts.c[idx], (neg_h, neg_t), psl_batch, cfg.psl_weight
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
    return total / max(1, n_batches)


def _epoch_setup(model_name: str, psl: bool, **kw):
    from pipeline.models.training import Facts, build_model

    kg = toy_kg()
    cfg = cfg_for(model_name, 2, psl=psl, **kw)
    model = build_model(cfg, kg.n_entities, kg.n_relations)
    facts = Facts.from_frame(kg.graph("train"), "cpu")
    soft = Facts.from_frame(kg.softlogic, "cpu") if psl else None
    return cfg, model, torch.optim.Adam(model.parameters(), lr=cfg.lr), facts, soft


@pytest.mark.parametrize(("model_name", "psl"), [("ukge_logi", False), ("ukge_rect", True), ("beurre", True)])
def test_a_cpu_epoch_draws_what_the_earlier_loop_drew(model_name: str, psl: bool) -> None:
    """On the CPU the device generator is the CPU generator: the same permutation, negatives and soft-logic
    batches in the same order, so the same losses and weights, bit for bit, as the loop before the GPU work
    (seeded CPU runs made before it are reproduced)."""
    from pipeline.models.training import run_epoch

    cfg, model, opt, facts, soft = _epoch_setup(model_name, psl)
    _, ref, ref_opt, _, _ = _epoch_setup(model_name, psl)
    for epoch in range(2):
        got = run_epoch(model, opt, facts, soft, cfg, epoch, progress=False)
        want = _earlier_epoch(ref, ref_opt, facts, soft, cfg, epoch)
        assert got == want
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values(), strict=True))


def _host_traffic(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of host reads (float, int, bool, item, tolist, numpy) and of device moves (cpu, cuda, and
    `to` given a device: counted even where the tensor is already there, as on a CPU-only machine; a cast
    of dtype is none). Not counted: torch.optim's reads of its step counters, which torch keeps on the host
    even for CUDA parameters (reading them never waits for the device)."""
    import sys

    counts = {"reads": 0, "copies": 0}

    def names_a_device(a: tuple, kw: dict) -> bool:
        return "device" in kw or any(isinstance(x, (str, torch.device)) for x in a)

    for name, kind in [
        ("__float__", "reads"), ("__int__", "reads"), ("__bool__", "reads"), ("item", "reads"),
        ("tolist", "reads"), ("numpy", "reads"), ("to", "copies"), ("cpu", "copies"), ("cuda", "copies"),
    ]:
        original = getattr(torch.Tensor, name)

        def counting(self, *a, _original=original, _name=name, _kind=kind, **kw):
            if "/torch/optim/" not in sys._getframe(1).f_code.co_filename.replace("\\", "/") and (
                _name != "to" or names_a_device(a, kw)
            ):
                counts[_kind] += 1
            return _original(self, *a, **kw)

        monkeypatch.setattr(torch.Tensor, name, counting)
    return counts


@pytest.mark.parametrize("model_name", TRAINED)
def test_an_epoch_reads_the_loss_once_and_copies_nothing(model_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No per-step host round trip: an epoch of 3 steps and one of 24 both read one number on the host (the
    epoch's loss, at the end) and copy no tensor between devices, soft-logic batches included."""
    from pipeline.models.training import run_epoch

    seen = []
    for batch_size in (64, 8):
        cfg, model, opt, facts, soft = _epoch_setup(model_name, True, batch_size=batch_size)
        with monkeypatch.context() as m:
            counts = _host_traffic(m)
            run_epoch(model, opt, facts, soft, cfg, 0, progress=False)
        seen.append((-(-len(facts) // batch_size), dict(counts)))
    (few, a), (many, b) = seen
    assert few < 5 and many > 20
    assert a == b == {"reads": 1, "copies": 0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_epoch_never_waits_for_the_host() -> None:
    """On CUDA an epoch's steps run with no synchronisation (torch's sync debug mode turns any into an
    error); the one read is the epoch's loss, after them. The same seed draws the same batches twice on
    the device (the same weights)."""
    from pipeline.models.training import Facts, build_model, epoch_loss_sum

    kg = toy_kg()
    cfg = cfg_for("ukge_logi", 1, psl=True, device="cuda")
    states = []
    for _ in range(2):
        model = build_model(cfg, kg.n_entities, kg.n_relations).to("cuda")
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        facts = Facts.from_frame(kg.graph("train"), "cuda")
        soft = Facts.from_frame(kg.softlogic, "cuda")
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            total = epoch_loss_sum(model, opt, facts, soft, cfg, 0, progress=False)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert float(total) > 0
        states.append({k: v.detach().cpu() for k, v in model.state_dict().items()})
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
