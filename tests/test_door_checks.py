"""Every input checked at the door: CLI options, environment variables and
the Python API's arguments out of range are one line (one pl.PipelineError naming the argument), never a
traceback and never silently clamped or ignored; names from the data never reach the terminal raw."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pipeline as pl
from tests.cli_checks import invoke as run
from tests.cli_checks import one_line_error as one_line

KG = "head\trelation\ttail\tconfidence\nann\tknows\tbob\t0.9\nbob\tknows\tcid\t0.6\nann\tlikes\tcid\t0.8\n" \
     "cid\tknows\tdan\t0.7\ndan\tknows\tann\t0.5\nbob\tlikes\tdan\t0.4\ncid\tlikes\tann\t0.3\n"
EVIL = "evil\x1b]0;PWNED\x07x"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize(("flags", "needle"), [
    (["--split", "nan,0,1"], "--split 'nan,0,1'"), (["--split", "0,0.5,0.5"], "train > 0"),
    (["--split", "1.5,-0.5,0"], "fractions >= 0"), (["--seed", "-1"], "--seed -1: must be at least 0"),
    (["--seed", "12345678901234567890123"], "--seed 12345678901234567890123: must be at most 4294967295"),
])  # fmt: skip
def test_ingest_options_out_of_range(home, tmp_path, flags, needle):
    src = tmp_path / "kg.tsv"
    src.write_text(KG)
    one_line(run("ingest", "door", "--from", str(src), *flags, "--store", "bolt://127.0.0.1:1"), needle)
    assert not (home / "datasets" / "door").exists()


def test_a_fifo_or_a_device_as_from_says_what_it_is(home, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        one_line(run("ingest", "door", "--from", str(path)), "not a regular file or folder")


@pytest.mark.parametrize("seed", ["-1", "12345678901234567890123"])
def test_sample_seed_out_of_range(home, tmp_path, seed):
    one_line(run("sample", "ppi5k", "--out", str(tmp_path / "q"), "--seed", seed), f"--seed {seed}: must be at")


@pytest.mark.parametrize(("env", "value"), [("PIPELINE_KERNELS", "garbage"), ("PIPELINE_VERIFY", "garbage"),
                                            ("PIPELINE_PAIR_CACHE", "/etc/passwd")])
def test_environment_typos_are_refused_not_ignored(home, monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    one_line(run("query", "binding(#0, ?y)", "--dataset", "ppi5k", "--graph", "test"), f"{env}=")
    with pytest.raises(pl.PipelineError, match=env):
        pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test")


def test_api_misuse_is_a_pipeline_error_naming_the_argument(home):
    cases = [
        (lambda: pl.query(None, dataset="ppi5k", graph="test"), "text"),
        (lambda: pl.query("#0(#0, ?y)", dataset=None, graph="test"), "dataset"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test", top="5"), "top: expected an integer"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="test", top=-1), "top: -1 is out of range"),
        (lambda: pl.query("#0(#0, ?y)", dataset="ppi5k", graph="tset"), "graph"),
        (lambda: pl.ingest(None, source="x.tsv"), "name"),
        (lambda: pl.cypher(None), "statement"),
        (lambda: pl.cypher("RETURN $x", {"x": 10**30}), "64-bit"),
        (lambda: pl.answer(None), "queries"),
    ]
    for call, needle in cases:
        with pytest.raises(pl.PipelineError, match=needle):
            call()


def test_a_query_of_thousands_of_digits_and_a_huge_unknown_name_are_short_lines(home):
    res = run("query", "#" + "9" * 5000 + "(#0, ?y)", "--dataset", "ppi5k", "--graph", "test")
    # a syntax error is its line, the text around the column and a caret: a few hundred characters
    assert res.exit_code == 2 and "too long (5000 digits)" in res.stderr and len(res.stderr) < 500
    res = run("query", "binding(" + "x" * 100_000 + ", ?y)", "--dataset", "ppi5k", "--graph", "test")
    assert res.exit_code == 2 and len(res.stderr) < 1000 and "100,000 characters" in res.stderr
    line = one_line(run("train", "d" * 100_000, "--model", "ukge_logi"), "unknown data set")
    assert len(line) < 1000


def test_names_with_terminal_escapes_are_refused_and_never_reach_the_terminal_raw(home, tmp_path):
    """A name holding an escape sequence was recorded (and shown escaped); it is refused now, naming the line
    and field, before the store is touched; a query naming one is answered with the name escaped."""
    src = tmp_path / "kg.tsv"
    src.write_text(KG.replace("dan", EVIL))
    line = one_line(run("ingest", "esc", "--from", str(src), "--store", "bolt://127.0.0.1:1"),
                    f"{src}, line 6, field 'head': the name 'evil\\x1b]0;PWNED\\x07x' holds the control character \\x1b")
    assert "\x1b" not in line and not (home / "datasets" / "esc").exists()
    for args in (["query", f'binding("{EVIL}", ?y)', "--dataset", "ppi5k", "--graph", "test"],
                 ["query", f"binding(#0, ?y) & {EVIL}", "--dataset", "ppi5k", "--graph", "test"]):
        res = run(*args)
        assert res.exit_code == 2 and "\x1b" not in res.output and "\x07" not in res.output, res.output


def test_a_data_set_without_valid_facts_is_not_trained_to_a_nan_selection(home, tmp_path, fresh_store):
    """`--split 1,0,0` records a data set to query; training it selected epochs on a valid MSE of nan. It
    keeps the last epoch now, says so on stderr and records it."""
    src = tmp_path / "kg.tsv"
    src.write_text(KG)
    assert run("ingest", "novalid", "--from", str(src), "--split", "1,0,0", "--store", fresh_store.uri).exit_code == 0
    res = run("train", "novalid", "--model", "ukge_logi", "--dim", "8", "--epochs", "3", "--out", str(tmp_path / "r"),
              "--device", "cpu")
    assert res.exit_code == 0 and "no valid facts to select an epoch on: the last epoch is kept" in res.stderr
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["selection"] == "last (no valid facts)" and results["best_epoch"] == 3


# ------------------------------------------------------------------ third round: numbers, names, no-ops


def test_numpy_numbers_are_taken_and_floats_are_not_integers() -> None:
    """np.int64(8) for dim and np.float32(0.3) for threshold were refused while dim=1e3 passed as 1000."""
    import numpy as np

    from pipeline.stages.options import ExportOptions, SampleOptions, TrainOptions

    o = TrainOptions(dim=np.int64(8), lr=np.float32(0.01), seed=np.uint32(3))
    assert (o.dim, o.lr, o.seed) == (8, 0.01, 3) and type(o.dim) is int and type(o.lr) is float
    assert ExportOptions(threshold=np.float32(0.3), top_k=np.int16(2)).threshold == 0.3  # the 0.3 typed
    for bad, why in ((1e3, "not a float"), (8.0, "not a float"), (np.float64(8.0), "not a float"),
                     (True, "not a bool"), (8 + 0j, "not a complex number"), ("8", "not text")):
        with pytest.raises(pl.PipelineError, match=f"^dim=.*: expected an integer, {why}$"):
            TrainOptions(dim=bad)
    with pytest.raises(pl.PipelineError, match=r"^threshold=\(0.3\+0.7j\): expected a real number, not a complex"):
        ExportOptions(threshold=0.3 + 0.7j)
    with pytest.raises(pl.PipelineError, match="per_type=1000000000: must be at most 1000000"):
        SampleOptions(out="q", per_type=10**9)


def test_query_takes_numpy_integers_and_refuses_a_fractional_explain(home) -> None:
    import numpy as np

    r = pl.query("binding(#0, ?y)", dataset="ppi5k", graph="test", top=np.int64(2), cycle_cap=np.int64(5))
    assert len(r.frame) == 2
    with pytest.raises(pl.PipelineError, match="explain: expected an integer, got 1.5"):  # was taken as 1
        pl.query("binding(#0, ?y)", dataset="ppi5k", graph="test", explain=1.5)


@pytest.mark.parametrize(("flags", "needle"), [
    (["--types", ""], "--types '': no names given"), (["--types", ","], "--types ,: no names given"),
    (["--per-type", "1000000000"], "--per-type 1000000000: must be at most 1000000"),
    (["--out", ""], "--out '': an empty path"),
])  # fmt: skip
def test_sample_refuses_empty_names_and_absurd_sizes(home, tmp_path, flags, needle):
    """`--types ''` meant every type; a billion queries per type walked on with no word."""
    args = ["sample", "ppi5k", "--store", "bolt://127.0.0.1:1"]
    if "--out" not in flags:
        args += ["--out", str(tmp_path / "q")]
    one_line(run(*args, *flags), needle)
    with pytest.raises(pl.PipelineError, match=r"types=\[\]: no names given"):
        pl.sample("ppi5k", out=tmp_path / "q", types=[])


def test_no_backbone_means_the_baselines_only_and_is_refused_without_them(home):
    """`--models ""` runs the baselines alone (documented); the refusal of empty name lists once took it away.
    With no baseline either there is nothing to run: one line, before any work."""
    from pipeline.stages.reproduce import ReproduceConfig

    assert ReproduceConfig(dataset="ppi5k", models=(), baselines=("cone_ne",)).models == ()
    assert ReproduceConfig(dataset="ppi5k", models="", baselines=("cone_ne",)).models == ()
    one_line(run("reproduce", "ppi5k", "--models", ""),
             "--models '': no backbone, and --baselines names none: nothing to run")
    with pytest.raises(pl.PipelineError, match="no backbone, and baselines= names none"):
        ReproduceConfig(dataset="ppi5k", models=())


@pytest.mark.parametrize("value", ["", " ", "cuda:-1", "gpu"])
def test_an_empty_or_bad_device_is_refused_at_every_door(home, tmp_path, value):
    """`--device ''` fell back to the default device (a lost shell variable taken for "no choice")."""
    import shlex

    from pipeline.core.config import select_device
    from pipeline.models.config import TrainConfig
    from pipeline.stages.options import TrainOptions

    for args in (["train", "ppi5k", "--model", "ukge_logi"], ["export", str(tmp_path)],
                 ["answer", str(tmp_path / "q.parquet"), "--adjacency", str(tmp_path)],
                 ["reproduce", "ppi5k", "--out", str(tmp_path / "r")]):
        one_line(run(*args, "--device", value), f"--device {shlex.quote(value)}: expected cpu, cuda, cuda:N or mps")
    with pytest.raises(pl.PipelineError, match=f"device={value!r}: expected cpu"):
        TrainOptions(device=value)
    with pytest.raises(pl.PipelineError, match="device: expected cpu"):
        TrainConfig(dataset="toy", model="ukge_logi", device=value)
    if not value.strip():
        with pytest.raises(pl.PipelineError, match="expected cpu, cuda or cuda:N"):
            select_device(value)


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"l2": "evil"}, "l2='evil' (ukge_logi): expected a real number, not text"),
    ({"__class__": 1}, "__class__=1 (ukge_logi): unknown setting; known: l2"),
    ({"seed": 3}, "seed=3 (ukge_logi): unknown setting; known: l2"),
    ({"l2": [1]}, "l2=[1] (ukge_logi): expected a real number, not list"),
    ({"l2": -1.0}, "l2=-1.0 (ukge_logi): must be at least 0"),
    ({"l2": float("nan")}, "l2=nan (ukge_logi): must be a finite number"),
])  # fmt: skip
def test_bad_model_kwargs_in_a_config_file_are_one_line(home, tmp_path, kwargs, why):
    """A train --config file with model_kwargs the model does not take was a TypeError traceback."""
    cfg = {"dataset": "ppi5k", "model": "ukge_logi", "dim": 8, "epochs": 1, "model_kwargs": kwargs}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    one_line(run("train", "ppi5k", "--config", str(tmp_path / "c.json"), "--out", str(tmp_path / "r")),
             f"--config {tmp_path / 'c.json'}: model_kwargs {why}")
    assert not (tmp_path / "r").exists()


def test_beurre_hyper_parameters_are_declared() -> None:
    from pipeline.models.config import TrainConfig

    assert TrainConfig(dataset="t", model="beurre", model_kwargs={"condition": "tail"}).model_kwargs == {"condition": "tail"}
    with pytest.raises(pl.PipelineError, match="condition='side' .beurre.: expected one of head, tail"):
        TrainConfig(dataset="t", model="beurre", model_kwargs={"condition": "side"})
    with pytest.raises(pl.PipelineError, match="gumbel_beta=0 .beurre.: must be greater than 0"):
        TrainConfig(dataset="t", model="beurre", model_kwargs={"gumbel_beta": 0})


@pytest.mark.parametrize(("flag", "value", "why"), [
    ("--l-lr", "1e30", "must be at most 1"), ("--l-lr", "0", "must be greater than 0"),
    ("--l-steps", "1000000000000", "must be at most 10000000"), ("--l-epochs", "1000000000", "must be at most 10000"),
    ("--l-batch", "1000000000000", "must be at most 65536"), ("--l-negatives", "1000000000", "must be at most 100000"),
    ("--l-negative-weight", "1e300", "must be at most 1000000"),
])  # fmt: skip
def test_calibration_l_settings_are_bounded_at_the_door(home, tmp_path, flag, value, why):
    """--l-lr 1e30 wrote utilities from weights near 1e30; 10^12 steps ran on."""
    q = tmp_path / "q.parquet"
    one_line(run("answer", str(q), "--adjacency", str(tmp_path), "--calibration", "L", flag, value), f"{flag} ", why)
    one_line(run("reproduce", "ppi5k", "--out", str(tmp_path / "r"), flag, value), f"{flag} ", why)
    assert not (tmp_path / "r").exists()


def test_options_that_do_nothing_are_refused(home, tmp_path):
    from pipeline.stages.options import ExportOptions
    from pipeline.stages.reproduce import ReproduceConfig

    one_line(run("reproduce", "ppi5k", "--out", str(tmp_path / "r"), "--qe", "lr=1e-3"),
             "--qe: does nothing without --baselines")
    with pytest.raises(pl.PipelineError, match="qe=: does nothing without baselines="):
        pl.run("ppi5k", out=tmp_path / "r", qe={"lr": 1e-3})
    with pytest.raises(pl.PipelineError, match="qe= sets cone_ne, which baselines= does not run"):
        ReproduceConfig(dataset="ppi5k", baselines=("logice_ne",), qe={"cone_ne": {"lr": 1e-3}})
    one_line(run("reproduce", "ppi5k", "--out", str(tmp_path / "r"), "--calibrations", "none,D", "--l-lr", "0.001"),
             "--l-lr 0.001: does nothing without --calibrations L or D+L")
    with pytest.raises(pl.PipelineError, match="shard_heads=4: does nothing without shards=, or executor= processes or ray"):
        ExportOptions(shard_heads=4)
    assert ExportOptions(shard_heads=4, shards="s").shard_heads == 4  # sharded in this process: it applies
    q = tmp_path / "q.parquet"
    one_line(run("answer", str(q), "--adjacency", str(tmp_path), "--train-queries", str(q)),
             "--train-queries", "does nothing without --calibration L or D+L")
    one_line(run("answer", str(q), "--adjacency", str(tmp_path), "--valid-queries", str(q)),
             "--valid-queries", "does nothing without --calibration D or L or D+L")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("qe", "needle"), [
    ("lr=nan", "--qe lr=nan: must be a finite number"), ("epochs=-1", "--qe epochs=-1: must be at least 1"),
    ("dim=1e3", "--qe dim=1000.0: expected an integer, not a float"), ("loss=bogus", "--qe loss=bogus: expected one of"),
    ("logice_ne.lr=-1", "--qe logice_ne.lr=-1: must be greater than 0"),
    ("train_per_type=0", "--qe train_per_type=0: must be at least 1"),
])  # fmt: skip
def test_baseline_settings_are_checked_before_any_work_and_named_as_given(home, tmp_path, qe, needle):
    """`--qe lr=nan` was a TypeError after seconds of sampling; `--qe epochs=-1` was refused late, naming --epochs."""
    one_line(run("reproduce", "ppi5k", "--out", str(tmp_path / "r"), "--baselines", "logice_ne", "--qe", qe), needle)
    assert not (tmp_path / "r").exists()
    with pytest.raises(pl.PipelineError, match=r"^qe=\{'lr': 'nan'\}: expected a real number, not text$"):
        pl.run("ppi5k", out=tmp_path / "r", baselines="logice_ne", qe={"lr": "nan"})


def test_train_qe_options_are_declared_once(home, tmp_path):
    q = tmp_path / "q.parquet"
    base = ["train-qe", "ppi5k", "--model", "logice_ne", "--train-queries", str(q), "--valid-queries", str(q),
            "--out", str(tmp_path / "r")]
    one_line(run(*base, "--lr", "nan"), "--lr nan: must be a finite number")
    one_line(run(*base, "--epochs", "0"), "--epochs 0: must be at least 1")
    one_line(run(*base, "--device", ""), "--device: expected cpu")


def test_the_baselines_default_counts_are_refused_on_a_tiny_graph_up_front() -> None:
    """`reproduce --baselines` on a dozen entities sampled 35,000 train queries per type at ~1.5 s each."""
    from pipeline.sampling.capacity import most_queries
    from pipeline.sampling.sampler import SamplingError
    from pipeline.stages.reproduce import ReproduceConfig
    from pipeline.stages.reproduce_baselines import check_counts
    from tests.models.toy import toy_kg

    kg = toy_kg(n_entities=12, n_relations=2, n_facts=40)
    facts = kg.graph("test")
    pairs = len(facts[["h", "r"]].drop_duplicates())
    assert most_queries("1p", facts, kg.n_entities, "zero", "equal") == pairs
    assert most_queries("1p", facts, kg.n_entities, "hybrid", "random") == pairs * 4 * 10
    assert most_queries("2in", facts, kg.n_entities, "zero", "equal") == kg.n_entities * 2 * pairs
    cfg = ReproduceConfig(dataset="toy", baselines=("logice_ne",))
    with pytest.raises(SamplingError, match=r"^the baselines' default train_per_type of 35,000: the train graph of "
                                            r"'toy' holds at most \d+ distinct 1p queries"):
        check_counts(kg, cfg)
    small = ReproduceConfig(dataset="toy", baselines=("logice_ne",), qe={"train_per_type": 5, "small_per_type": 5})
    check_counts(kg, small)  # within what the graph holds
    with pytest.raises(SamplingError, match=r"^qe=\{'train_per_type': 100000\}: the train graph"):
        check_counts(kg, ReproduceConfig(dataset="toy", baselines=("logice_ne",), qe={"train_per_type": 100_000}))


_INTERRUPTED = """
import os, signal, sys, importlib.abc
import pipeline as pl

class Interrupt(importlib.abc.MetaPathFinder):
    # Ctrl-C in the middle of torch's first import: when it reaches torch.nn
    def find_spec(self, name, path, target=None):
        if name == "torch.nn" and not getattr(self, "done", False):
            self.done = True
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
try:
    pl.query("binding(#0, ?y)", dataset="ppi5k", graph="test")
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
sys.meta_path.pop(0)
print(len(pl.query("binding(#0, ?y)", dataset="ppi5k", graph="test", top=3).frame))
"""


def test_an_interrupted_first_call_leaves_a_usable_process(home):
    """A KeyboardInterrupt inside the delayed torch import broke every later call (half-imported torch)
    until the kernel restarted; the interrupt now lands once the import is whole."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", _INTERRUPTED], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["interrupted", "3"]
