"""Training on a toy query set: the loss falls, a resumed run equals an uninterrupted one, and the answers
file of a baseline evaluates like SRC's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from pipeline.baselines.plan import group_by_plan
from pipeline.baselines.runs import load_qe_run
from pipeline.softquery.model import Atom, Const, Query, Var
from pipeline.stages.train_qe import train_qe
from tests.baselines.toy import toy_config
from tests.cases import BaselineMethodCase

Y, X = Var("y"), Var("x")


@pytest.mark.parametrize(("model", "loss"), [("logice_ne", "weighted"), ("cone_ne", "listwise")])
def test_a_few_epochs_reduce_the_loss(toy: tuple[Path, Path], tmp_path: Path, model: str, loss: str) -> None:
    res = train_qe(toy_config(toy, model, 12, loss), tmp_path / "run", device="cpu", progress=False)
    losses = [h["loss"] for h in res["history"]]
    assert losses[-1] < 0.7 * losses[0]
    for name in ("config.json", "metadata.json", "results.json", "model.pt", "checkpoint.pt"):
        assert (tmp_path / "run" / name).is_file()
    assert res["best_epoch"] >= 1 and res["train_queries"] == 24


def test_resume_equals_an_uninterrupted_run(toy: tuple[Path, Path], tmp_path: Path) -> None:
    train_qe(toy_config(toy, "cone_ne", 2), tmp_path / "a", device="cpu", progress=False)
    resumed = train_qe(toy_config(toy, "cone_ne", 4), tmp_path / "a", device="cpu", progress=False)
    straight = train_qe(toy_config(toy, "cone_ne", 4), tmp_path / "b", device="cpu", progress=False)
    assert [h["loss"] for h in resumed["history"]] == pytest.approx([h["loss"] for h in straight["history"]])
    a = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    other = toy_config(toy, "cone_ne", 4, loss="listwise")
    from pipeline.core.errors import ArtifactError

    with pytest.raises(ArtifactError, match="another configuration"):
        train_qe(other, tmp_path / "a", device="cpu", progress=False)


def test_baseline_answers_evaluate_like_src(toy: tuple[Path, Path], tmp_path: Path) -> None:
    from pipeline.cli import cli
    from pipeline.core.metrics import ranks_of
    from pipeline.formats.answers import read_answers
    from pipeline.formats.queryset import read_query_set
    from pipeline.stages.evaluate import evaluate_answers

    train_qe(toy_config(toy, "logice_ne", 10), tmp_path / "run", device="cpu", progress=False)
    result = CliRunner().invoke(
        cli,
        [
            "answer",
            str(toy[1]),
            "--model",
            str(tmp_path / "run"),
            "--out",
            str(tmp_path / "ans"),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    (report,) = evaluate_answers(tmp_path / "ans")
    assert report["method"] == "LogicE+NE" and report["dataset"] == "ppi5k"
    assert report["counts"] == {"1p": 16, "2i": 8}
    assert set(report["summary"]) == {"tau", "rho", "map", "ndcg"}
    assert report["summary"]["ndcg"]["avg"] > 0
    # the file's ranks agree with an independent ranking of the model's scores over all entities
    ans = read_answers(next((tmp_path / "ans").glob("*.parquet")))
    model, _ = load_qe_run(tmp_path / "run")
    qs = read_query_set(toy[1])
    first = ans.frame[ans.frame["query_id"] == qs.frame["id"][0]]
    plan, (_, params) = next(iter(group_by_plan(qs.queries()[:1]).items()))
    with torch.no_grad():
        util = model.logits(plan, params)[0].numpy()
    assert np.array_equal(first["rank"].to_numpy(), ranks_of(util, first["entity"].to_numpy()))


def test_cli_errors_are_one_line(toy: tuple[Path, Path], tmp_path: Path) -> None:
    from pipeline.cli import cli

    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "train-qe",
            "ppi5k",
            "--model",
            "cone_ne",
            "--train-queries",
            str(tmp_path / "nope.parquet"),
            "--valid-queries",
            str(toy[1]),
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert res.exit_code == 2 and "nope.parquet: no such query set" in res.output
    res = runner.invoke(
        cli,
        [
            "train-qe",
            "cn15k",
            "--model",
            "cone_ne",
            "--train-queries",
            str(toy[0]),
            "--valid-queries",
            str(toy[1]),
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert res.exit_code == 2 and "a query set of 'ppi5k', not 'cn15k'" in res.output
    res = runner.invoke(cli, ["answer", str(toy[1]), "--model", str(tmp_path)])
    assert res.exit_code == 2 and "not a query-embedding run directory" in res.output
    res = runner.invoke(cli, ["answer", str(toy[1])])
    assert res.exit_code == 2 and "--adjacency" in res.output
    assert "Traceback" not in res.output


def test_union_mode_is_chosen_when_answering(toy: tuple[Path, Path], tmp_path: Path) -> None:
    """A LogicE run answers unions by DNF unless --union conorm asks for its t-conorm (its own table row and
    file); ConE has no t-conorm and says so in one line."""
    from pipeline.cli import cli
    from pipeline.methods import METHODS

    train_qe(toy_config(toy, "logice_ne", 1), tmp_path / "run", device="cpu", progress=False)
    assert METHODS["logice_ne"].build(tmp_path / "run", "cpu").label == "LogicE+NE"
    conorm = METHODS["logice_ne"].build(tmp_path / "run", "cpu", union="conorm")
    assert conorm.label == "LogicE+NE conorm" and conorm.settings()["union"] == "conorm"
    args = ["answer", str(toy[1]), "--model", str(tmp_path / "run"), "--out", str(tmp_path / "ans"), "--json"]
    for extra in ([], ["--union", "conorm"]):
        res = CliRunner().invoke(cli, [*args, *extra])
        assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "ans").glob("*.parquet")) == [
        "valid.LogicE+NE.conorm.parquet",
        "valid.LogicE+NE.parquet",
    ]
    train_qe(toy_config(toy, "cone_ne", 1), tmp_path / "cone", device="cpu", progress=False)
    res = CliRunner().invoke(
        cli, ["answer", str(toy[1]), "--model", str(tmp_path / "cone"), "--union", "conorm"]
    )
    assert res.exit_code == 2 and "--union conorm: ConE+NE has no 'conorm' union" in res.output


class TestLogicENEMethod(BaselineMethodCase):
    name = "logice_ne"


class TestConENEMethod(BaselineMethodCase):
    name = "cone_ne"

    def test_a_run_of_another_model_is_refused(self, toy: tuple[Path, Path], tmp_path: Path) -> None:
        from pipeline.core.errors import ArtifactError
        from pipeline.methods import METHODS

        train_qe(toy_config(toy, "logice_ne", 1), tmp_path / "run", device="cpu", progress=False)
        with pytest.raises(ArtifactError, match="a logice_ne run, not cone_ne"):
            METHODS["cone_ne"].build(tmp_path / "run", "cpu")


# ------------------------------------------------------------------------------------- in-batch negatives
def _batch(answers: list[list[int]], utils: list[list[float]]) -> Any:
    from pipeline.baselines.plan import PlanParams
    from pipeline.stages.train_qe import PlanBatchData

    a = torch.tensor(answers, dtype=torch.long)
    u = torch.tensor(utils)
    n = a.shape[0]
    params = PlanParams(
        torch.arange(n).unsqueeze(1), torch.zeros(n, 1, dtype=torch.long), torch.zeros(n, 1), torch.ones(n, 1)
    )
    return PlanBatchData(params, a, u, u > 0)


def test_batch_negatives_are_drawn_from_the_answers_of_the_batch() -> None:
    from pipeline.stages.train_qe import batch_negatives

    data = _batch([[5, 6, 0], [5, 0, 0], [7, 0, 0]], [[1.0, 0.5, 0.0], [0.9, 0.0, 0.0], [0.3, 0.0, 0.0]])
    draws = batch_negatives(data, 4000, torch.Generator().manual_seed(0))
    assert draws.shape == (3, 4000)
    values, counts = torch.unique(draws, return_counts=True)
    assert values.tolist() == [5, 6, 7]  # never the padding id 0
    # entity 5 answers two of the batch's queries: drawn twice as often as 6 or 7 (4 answers in the pool)
    share = counts.double() / draws.numel()
    assert share.tolist() == pytest.approx([0.5, 0.25, 0.25], abs=0.02)


def test_a_negative_that_answers_its_query_is_masked_even_when_not_scored() -> None:
    from pipeline.baselines.models import LogicENEModel
    from pipeline.stages.train_qe import step_loss

    torch.manual_seed(0)
    model = LogicENEModel(20, 2, dim=8, hidden=16)
    plan = group_by_plan([Query.of([Atom(Const(0), 0, Y)])], ["q"]).popitem()[0]
    full = _batch([[5, 6]], [[1.0, 0.5]])  # both answers of the query
    scored = _batch([[5]], [[1.0]])  # the step scores only the first (max_answers = 1)
    with torch.no_grad():
        masked = step_loss(model, plan, scored, torch.tensor([[6, 9]]), "listwise", answers=full)
        without = step_loss(model, plan, scored, torch.tensor([[9]]), "listwise", answers=full)
        unmasked = step_loss(model, plan, scored, torch.tensor([[6, 9]]), "listwise")
    assert masked.item() == without.item()  # 6 is an answer: it is no negative
    assert unmasked.item() != masked.item()  # with only the scored answers it would be taken for one


def test_training_with_batch_negatives_and_resuming_an_older_run(
    toy: tuple[Path, Path], tmp_path: Path
) -> None:
    import dataclasses
    import json

    from pipeline.core.errors import ArtifactError

    cfg = dataclasses.replace(toy_config(toy, "logice_ne", 12, "listwise"), batch_negatives=8)
    res = train_qe(cfg, tmp_path / "run", device="cpu", progress=False)
    losses = [h["loss"] for h in res["history"]]
    assert losses[-1] < 0.8 * losses[0]
    # a run made before the setting existed has no batch_negatives in its config: it resumes at the default
    old = toy_config(toy, "logice_ne", 1, "listwise")
    train_qe(old, tmp_path / "old", device="cpu", progress=False)
    doc = json.loads((tmp_path / "old" / "config.json").read_text())
    assert "batch_negatives" not in doc  # written as before the setting existed
    assert json.loads((tmp_path / "run" / "config.json").read_text())["batch_negatives"] == 8
    resumed = train_qe(dataclasses.replace(old, epochs=2), tmp_path / "old", device="cpu", progress=False)
    assert resumed["epochs_run"] == 2
    with pytest.raises(ArtifactError, match="another configuration"):
        train_qe(
            dataclasses.replace(old, epochs=3, batch_negatives=4),
            tmp_path / "old",
            device="cpu",
            progress=False,
        )


def test_training_targets_cap_a_crossing_tie_group_at_random_not_by_id() -> None:
    """A truth holds the whole tie group at its cut; training keeps at most 100 targets: every
    answer above the cut value, then a seeded random choice within the group (same every run, not the
    lowest ids), best first."""
    from pipeline.stages.train_qe import cap_answers

    answers = [7, 3] + list(range(100, 400))  # two above the cut, then 300 tied at 0.5
    utils = [0.9, 0.8] + [0.5] * 300
    a, u = cap_answers("q1", answers, utils)
    assert len(a) == 100 and a[:2] == [7, 3] and u == [0.9, 0.8] + [0.5] * 98
    assert a[2:] != list(range(100, 198))  # not the first (lowest-id) members
    assert set(a[2:]) <= set(range(100, 400)) and len(set(a)) == 100
    assert cap_answers("q1", answers, utils) == (a, u)  # seeded by the query id
    assert cap_answers("q2", answers, utils)[0] != a
    assert cap_answers("q", [1, 2], [0.3, 0.2]) == ([1, 2], [0.3, 0.2])  # short lists unchanged


# ------------------------------------------------------------------- the loop without host round trips
def _old_batch_negatives(data: Any, k: int, gen: torch.Generator) -> torch.Tensor:
    """batch_negatives as written before the GPU work: a boolean selection of the batch's answers."""
    pool = data.answers[data.mask]
    if pool.numel() == 0:
        pool = data.answers.reshape(-1)
    idx = torch.randint(0, pool.numel(), (data.answers.shape[0], k), generator=gen).to(pool.device)
    return pool[idx]


def test_in_batch_negatives_pick_what_a_boolean_selection_picks() -> None:
    """The search over the mask's running count picks, draw for draw, the answer the earlier boolean
    selection picked (the same generator stream), with the pool's size given or read; an empty pool
    draws from the padding as before."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pipeline.stages.train_qe import batch_negatives

    @settings(max_examples=60, deadline=None)
    @given(st.integers(1, 6), st.integers(1, 5), st.integers(1, 9), st.integers(0, 2**31), st.floats(0.0, 1.0))
    def check(b: int, a: int, k: int, seed: int, density: float) -> None:
        g = torch.Generator().manual_seed(seed)
        answers = torch.randint(0, 50, (b, a), generator=g)
        utils = torch.rand(b, a, generator=g) * (torch.rand(b, a, generator=g) < density)
        data = _batch(answers.tolist(), utils.tolist())
        want = _old_batch_negatives(data, k, torch.Generator().manual_seed(seed))
        for pool in (None, int(data.mask.sum())):
            got = batch_negatives(data, k, torch.Generator().manual_seed(seed), pool)
            assert torch.equal(got, want)

    check()


def _epoch_inputs(toy: tuple[Path, Path], batch_size: int) -> tuple[Any, Any, Any, Any]:
    import dataclasses

    from pipeline.baselines.models import LogicENEModel
    from pipeline.formats.queryset import read_query_set
    from pipeline.stages.train_qe import train_tensors

    cfg = dataclasses.replace(
        toy_config(toy, "logice_ne", 1, "listwise"), batch_size=batch_size, batch_negatives=3, max_answers=1
    )
    torch.manual_seed(0)
    model = LogicENEModel(40, 2, dim=8, hidden=16)
    return model, torch.optim.Adam(model.parameters(), lr=cfg.lr), train_tensors([read_query_set(toy[0])]), cfg


def test_a_cpu_qe_epoch_draws_what_the_earlier_loop_drew(toy: tuple[Path, Path]) -> None:
    """On the CPU the epoch's device generator is the CPU generator: the same batches, answer subsamples,
    uniform and in-batch negatives in the same order as the loop before the GPU work, so the same loss sum
    and weights bit for bit (seeded CPU runs made before it are reproduced)."""
    from pipeline.stages.train_qe import epoch_batches, step_loss, subsample_answers, train_epoch

    model, opt, data, cfg = _epoch_inputs(toy, 4)
    ref, ref_opt, _, _ = _epoch_inputs(toy, 4)
    for epoch in range(2):
        got, seen = train_epoch(model, opt, data, cfg, 40, epoch)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch)  # the earlier loop, written out
        total = 0.0
        for plan, idx in epoch_batches({p: int(d.answers.shape[0]) for p, d in data.items()}, cfg.batch_size, gen):
            full = data[plan].take(idx)
            batch = subsample_answers(full, cfg.max_answers, gen)
            neg = torch.randint(0, 40, (idx.shape[0], cfg.negatives), generator=gen)
            neg = torch.cat([neg, _old_batch_negatives(full, cfg.batch_negatives, gen)], dim=1)
            loss = step_loss(ref, plan, batch, neg, cfg.loss, answers=full)
            ref_opt.zero_grad()
            loss.backward()
            ref_opt.step()
            total += float(loss.detach()) * len(idx)
        assert float(got) == total and seen == 24
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values(), strict=True))


def test_a_qe_epoch_reads_the_host_per_epoch_not_per_step(
    toy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No per-step host round trip: an epoch of 3 steps and one of 12 read the same two lists on the host
    (the batches' order, the in-batch pools' sizes) and copy no tensor between devices."""
    from pipeline.stages.train_qe import train_epoch
    from tests.models.test_training import _host_traffic

    seen = []
    for batch_size in (8, 2):
        model, opt, data, cfg = _epoch_inputs(toy, batch_size)
        with monkeypatch.context() as m:
            counts = _host_traffic(m)
            train_epoch(model, opt, data, cfg, 40, 0)
        seen.append(dict(counts))
    assert seen[0] == seen[1] == {"reads": 2, "copies": 0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_cuda_qe_epoch_never_waits_for_the_host_between_steps(toy: tuple[Path, Path]) -> None:
    """On CUDA the steps of an epoch run with no synchronisation (torch's sync debug mode warns at each;
    the two reads per epoch come before the first step), and a seeded epoch gives the same weights twice."""
    import warnings

    from pipeline.stages.train_qe import train_epoch

    states = []
    for _ in range(2):
        model, opt, data, cfg = _epoch_inputs(toy, 2)
        model = model.cuda()
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        data = {p: d.to("cuda") for p, d in data.items()}
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                total, _ = train_epoch(model, opt, data, cfg, 40, 0)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        syncs = [str(w.message) for w in caught if "synchroniz" in str(w.message)]
        assert len(syncs) <= 2, syncs  # the batches' order and the pools' sizes, once each
        assert float(total) > 0
        states.append({k: v.detach().cpu() for k, v in model.state_dict().items()})
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
