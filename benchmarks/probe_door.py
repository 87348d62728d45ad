"""The door probe: hostile inputs through the command line (one fresh process each) and the Python API (one
forked process each), every outcome classified, the counts printed.

    PIPELINE_DATA=../shared/data OMP_NUM_THREADS=1 nice -n 10 python benchmarks/probe_door.py [--only WORD]
        [--timeout 60] [--keep DIR] [--json FILE]

What it tries (each case names what it should do: ``refuse`` = one clear line, ``ok`` = do the work,
``either``): tampered sealed files (a query set, an answers file, an export, a run, a saved calibration L
or D with its seal removed or edited), numbers at the door (calibration L's learning rate, steps and
epochs, the baselines' settings, sample sizes against the graph, numpy scalars, floats as integers,
complex numbers), names with lone surrogates, empty lists, options that do nothing where given, an empty
device, bad model settings in a replayed config, a benchmark name given a DataFrame, an interrupted first
call. Outcomes:

- ``ok``: did the work (for a case that should);
- ``clear line``: refused in one line (exit 2 and one ``error:`` line; a PipelineError of one line in
  Python) that holds the case's needle (the option as given, or the file);
- ``unclear line``: refused in one line that does not say what was wrong (the needle is missing);
- ``traceback``: any other exception, or a traceback on stderr;
- ``silent wrong``: did the work where it should have refused (or gave a wrong result);
- ``wrong refusal``: refused input it should take (a numpy integer as ``dim``);
- ``hang``: still running after ``--timeout`` seconds (killed).

Everything runs on a tiny user KG (12 people, 3 relations) under a throw-away PIPELINE_HOME with its own
embedded store, which is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "pipeline.cli"]
OUTCOMES = ("ok", "clear line", "unclear line", "traceback", "silent wrong", "wrong refusal", "hang")


@dataclass
class Case:
    """One hostile input. door: "cli" (args: the command line after ``pipeline``) or "api" (code: Python run
    with ``pl``, ``np``, ``pd`` and ``W`` (the work paths) in scope; ``check``: an expression on ``result``
    that must hold for an ``ok``); expect: refuse | ok | either; needle: what the refusal must say."""

    group: str
    name: str
    door: str
    expect: str
    args: list[str] = field(default_factory=list)
    code: str = ""
    needle: str = ""
    check: str = ""
    script: str = ""  # door "script": a whole Python program of its own (fresh interpreter); prints OK or FAIL


# ------------------------------------------------------------------------------------------------ the KG


def kg_tsv(path: Path) -> Path:
    rows = ["head\trelation\ttail\tconfidence"]
    for i in range(12):
        rows += [f"p{i}\tknows\tp{(i + 1) % 12}\t0.9", f"p{i}\thelps\tp{(i + 1) % 12}\t0.6",
                 f"p{i}\thelps\tp{(i + 3) % 12}\t0.5", f"p{i}\tlikes\tp{(i + 5) % 12}\t0.{(i % 8) + 1}"]
    path.write_text("\n".join(rows) + "\n")
    return path


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def must(res: subprocess.CompletedProcess, what: str) -> None:
    if res.returncode != 0:
        raise SystemExit(f"setup step {what} failed:\n{res.stderr[-3000:]}")


def setup(work: Path) -> dict[str, str]:
    """The tiny KG ingested, its query sets, a run, an export, answers with D+L (a saved D file and L
    folder); then the tampered copies the cases read."""
    W: dict[str, str] = {"work": str(work)}
    tsv = kg_tsv(work / "kg.tsv")
    must(cli("ingest", "probe", "--from", str(tsv), "--split", "0.7,0.15,0.15"), "ingest")
    q = work / "q"
    for split, types in (("train", "1p,2p,2i"), ("valid", "1p,2p,2i"), ("test", "1p,2p,2i")):
        must(cli("sample", "probe", "--out", str(q / split), "--split", split, "--types", types, "--per-type", "3",
                 "--no-browse"), f"sample {split}")
        W[split] = str(next((q / split).glob("*.parquet")))
    W["run"] = str(work / "run")
    must(cli("train", "probe", "--model", "ukge_logi", "--dim", "8", "--epochs", "3", "--out", W["run"],
             "--device", "cpu"), "train")
    W["adj"] = str(work / "adj")
    must(cli("export", W["run"], "--threshold", "0.05", "--out", W["adj"]), "export")
    W["answers_dir"] = str(work / "ans")
    must(cli("answer", W["test"], "--adjacency", W["adj"], "--calibration", "D+L", "--train-queries", W["train"],
             "--valid-queries", W["valid"], "--l-epochs", "1", "--out", W["answers_dir"], "--workers", "1"), "answer")
    W["answers"] = str(next(Path(W["answers_dir"]).glob("*.parquet")))
    calib = Path(W["run"]) / "calibration"
    W["l_dir"] = str(next(calib.glob("L-*")))
    W["d_file"] = str(next(calib.glob("D-*.json")))
    tamper(W)
    return W


# ----------------------------------------------------------------------------------------- tampered copies


def _strip_parquet(src: str, dst: Path, edit: Any = None, drop_digest: bool = False) -> str:
    """A copy of a sealed Parquet file with its ``pipeline.checksum`` footer key removed (after ``edit`` of
    its table; ``drop_digest``: also the metadata's own digest)."""
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    if edit is not None:
        table = edit(table)
    meta = {k: v for k, v in (table.schema.metadata or {}).items() if k != b"pipeline.checksum"}
    if drop_digest:
        doc = json.loads(meta[b"pipeline"])
        doc.pop("digest", None)
        meta[b"pipeline"] = json.dumps(doc).encode()
    pq.write_table(table.replace_schema_metadata(meta), dst)
    return str(dst)


def _scale_column(name: str, factor: float) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    def edit(table: Any) -> Any:
        i = table.schema.get_field_index(name)
        col = pc.multiply(table.column(name), pa.scalar(factor, table.schema.field(name).type))
        return table.set_column(i, table.schema.field(name), col)

    return edit


def _reverse_rows(table: Any) -> Any:
    return table.take(list(reversed(range(table.num_rows))))


def tamper(W: dict[str, str]) -> None:
    import numpy as np
    import pyarrow as pa
    import torch

    t = Path(W["work"]) / "tampered"
    t.mkdir()
    # answers: utilities edited, the footer checksum removed / also the metadata digest
    W["ans_noseal"] = _strip_parquet(W["answers"], t / "ans_noseal.parquet", _scale_column("utility", -1.0))
    W["ans_nodigest"] = _strip_parquet(W["answers"], t / "ans_nodigest.parquet", _scale_column("utility", -1.0), True)
    W["ans_plain"] = _strip_parquet(W["answers"], t / "ans_plain.parquet")  # unedited, unsealed: an older file
    # query set: the ground truth of the rows reversed (answers of one query given to another)
    W["q_noseal"] = _strip_parquet(W["test"], t / "q_noseal.parquet", _reverse_rows)
    W["q_nodigest"] = _strip_parquet(W["test"], t / "q_nodigest.parquet", _reverse_rows, True)

    # answers with non-finite utilities, written by the pipeline's own writer (sealed): what a diverged L wrote
    # (sealed by the pipeline's own Parquet writer, as a method that produced them would have written them
    # before the answers writer refused non-finite utilities)
    import pyarrow.parquet as pq

    from pipeline.formats import meta as metafile

    table = pq.read_table(W["answers"])
    kept = {k: v for k, v in table.schema.metadata.items() if k != b"pipeline.checksum"}

    def sealed(frame: Any, name: str) -> str:
        out = pa.Table.from_pandas(frame, schema=table.schema.remove_metadata(), preserve_index=False)
        return str(metafile.write_parquet(out.replace_schema_metadata(kept), t / name))

    base = table.to_pandas()
    for label, value in (("nan", float("nan")), ("posinf", float("inf"))):
        frame = base.copy()
        frame.loc[frame.index[::2], "utility"] = np.float32(value)
        W[f"ans_{label}"] = sealed(frame, f"ans_{label}.parquet")
    frame = base.copy()
    frame.loc[frame.index[frame["truth_rank"] > 0][:1], "truth_utility"] = float("nan")
    W["ans_truth_nan"] = sealed(frame, "ans_truth_nan.parquet")

    # export: the manifest's threshold edited and its digest removed; a relation file's checksum entry removed
    # after its scores were edited (schema and metadata kept)
    adj = t / "adj_manifest"
    shutil.copytree(W["adj"], adj)
    man = json.loads((adj / "manifest.json").read_text())
    man["threshold"] = 0.9
    man.pop("digest")
    (adj / "manifest.json").write_text(json.dumps(man))
    W["adj_manifest"] = str(adj)
    adj = t / "adj_relfile"
    shutil.copytree(W["adj"], adj)
    man = json.loads((adj / "manifest.json").read_text())
    rel = max(man["relations"], key=lambda r: r["nnz"])
    f = adj / rel["file"]
    with pa.memory_map(str(f)) as src:
        reader = pa.ipc.open_file(src)
        schema, table = reader.schema, reader.read_all()
    table = table.set_column(2, schema.field(2), pa.array(np.full(table.num_rows, 0.99, np.float32)))
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        w.write_table(table.replace_schema_metadata(schema.metadata))
    rel.pop("sha256")
    rel["bytes"] = f.stat().st_size
    from pipeline.core.provenance import seal

    (adj / "manifest.json").write_text(json.dumps(seal({k: v for k, v in man.items() if k != "digest"})))
    W["adj_relfile"] = str(adj)

    # run: its model's weights scaled and re-saved without their digest; config edited, checksums.json gone
    run = t / "run_model"
    shutil.copytree(W["run"], run, ignore=shutil.ignore_patterns("calibration"))
    doc = torch.load(run / "model.pt", weights_only=True)
    doc.pop("sha256")
    doc["state_dict"] = {k: v * 3 if v.is_floating_point() else v for k, v in doc["state_dict"].items()}
    torch.save(doc, run / "model.pt")
    W["run_model"] = str(run)
    run = t / "run_config"
    shutil.copytree(W["run"], run, ignore=shutil.ignore_patterns("calibration"))
    cfg = json.loads((run / "config.json").read_text())
    cfg["dataset"] = "probe"
    cfg["model_kwargs"] = {"l2": 0.5}
    (run / "config.json").write_text(json.dumps(cfg))
    (run / "checksums.json").unlink()
    W["run_config"] = str(run)

    # calibration L: L.json's recorded form edited; its digest removed; L.pt re-saved without its digest
    calib = Path(W["l_dir"]).parent
    for label in ("ljson_edit", "ljson_nodigest", "lpt_nodigest"):
        dst = calib / f"L-{label}"
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(W["l_dir"], dst)
        W[label] = str(dst)
    doc = json.loads(Path(W["ljson_edit"], "L.json").read_text())
    doc["history"]["config"]["terms"] = "relation"
    Path(W["ljson_edit"], "L.json").write_text(json.dumps(doc))
    doc.pop("digest")
    Path(W["ljson_nodigest"], "L.json").write_text(json.dumps(doc))
    state = torch.load(Path(W["lpt_nodigest"], "L.pt"), weights_only=True)
    state.pop("sha256")
    state = {k: v + 0.5 for k, v in state.items()}
    torch.save(state, Path(W["lpt_nodigest"], "L.pt"))
    # D: its digest removed
    doc = json.loads(Path(W["d_file"]).read_text())
    doc.pop("digest")
    doc["delta"] = 0.3
    W["d_nodigest"] = str(calib / "D-nodigest.json")
    Path(W["d_nodigest"]).write_text(json.dumps(doc))
    # a replayed train config with bad model settings
    cfg = json.loads(Path(W["run"], "config.json").read_text())
    for label, kwargs in (("evil", {"l2": "evil"}), ("class", {"__class__": 1}), ("list", {"l2": [1]}),
                          ("neg", {"l2": -1.0}), ("dup", {"seed": 3}), ("nan", {"l2": float("nan")})):
        p = t / f"config_{label}.json"
        p.write_text(json.dumps({**cfg, "model_kwargs": kwargs}))
        W[f"config_{label}"] = str(p)


# ---------------------------------------------------------------------------------------------- the cases


def cases(W: dict[str, str]) -> list[Case]:
    out = Path(W["work"]) / "out"
    o = lambda name: str(out / name)  # noqa: E731
    C: list[Case] = []
    tiny = ["--per-type", "2", "--train-per-type", "2", "--epochs", "1", "--dim", "8", "--device", "cpu"]

    def add(group: str, name: str, door: str, expect: str, **kw: Any) -> None:
        C.append(Case(group, name, door, expect, **kw))

    # ---- seals: a missing seal refused as a wrong one
    for key, what in (("ans_noseal", "answers edited, checksum key removed"),
                      ("ans_nodigest", "answers edited, checksum and metadata digest removed"),
                      ("ans_plain", "answers unedited, checksum removed")):
        add("seal", f"evaluate: {what}", "cli", "refuse", args=["evaluate", W[key]], needle=Path(W[key]).name)
        add("seal", f"pl.evaluate: {what}", "api", "refuse", code=f"pl.evaluate(W[{key!r}])", needle=Path(W[key]).name)
    for key, what in (("q_noseal", "query set edited, checksum removed"),
                      ("q_nodigest", "query set edited, checksum and digest removed")):
        add("seal", f"answer: {what}", "cli", "refuse", needle=Path(W[key]).name,
            args=["answer", W[key], "--adjacency", W["adj"], "--out", o(key), "--workers", "1"])
        add("seal", f"pl.answer: {what}", "api", "refuse", needle=Path(W[key]).name,
            code=f"pl.answer(W[{key!r}], adjacency=W['adj'], out={o(key + '_api')!r}, workers=1, quiet=True)")
    add("seal", "query --adjacency: manifest edited, digest removed", "cli", "refuse", needle="manifest",
        args=["query", "knows(p0, ?y)", "--dataset", "probe", "--adjacency", W["adj_manifest"]])
    add("seal", "pl.query: relation file edited, its checksum entry removed", "api", "refuse", needle="rel-",
        code="pl.query('helps(p0, ?y)', dataset='probe', adjacency=W['adj_relfile'])")
    add("seal", "export: model.pt edited, digest removed", "cli", "refuse", needle="model.pt",
        args=["export", W["run_model"], "--threshold", "0.05", "--out", o("exp_model")])
    add("seal", "pl.export: config.json edited, checksums.json removed", "api", "refuse", needle="run_config",
        code=f"pl.export(W['run_config'], threshold=0.05, out={o('exp_config')!r}, quiet=True)")
    for key, needle in (("ljson_edit", "L.json"), ("ljson_nodigest", "L.json"), ("lpt_nodigest", "L.pt")):
        add("seal", f"query --calibration: {key}", "cli", "refuse", needle=needle,
            args=["query", "knows(p0, ?y)", "--dataset", "probe", "--adjacency", W["adj"], "--calibration", W[key]])
        add("seal", f"pl.query calibration=: {key}", "api", "refuse", needle=needle,
            code=f"pl.query('knows(p0, ?y)', dataset='probe', adjacency=W['adj'], calibration=W[{key!r}])")
    add("seal", "query --calibration: D digest removed", "cli", "refuse", needle="D-nodigest",
        args=["query", "knows(p0, ?y)", "--dataset", "probe", "--adjacency", W["adj"], "--calibration", W["d_nodigest"]])
    add("seal", "query --calibration: untouched L (control)", "cli", "ok",
        args=["query", "knows(p0, ?y)", "--dataset", "probe", "--adjacency", W["adj"], "--calibration", W["l_dir"]])
    add("seal", "evaluate: untouched answers (control)", "cli", "ok", args=["evaluate", W["answers"]])

    # ---- non-finite utilities where finite ones are expected
    for key in ("ans_nan", "ans_posinf", "ans_truth_nan"):
        add("finite", f"evaluate: {key}", "cli", "refuse", args=["evaluate", W[key]], needle=Path(W[key]).name)
        add("finite", f"pl.evaluate: {key}", "api", "refuse", code=f"pl.evaluate(W[{key!r}])", needle=Path(W[key]).name)

    # ---- calibration L's settings bounded at the door (checked before any work)
    answer_l = ["answer", W["test"], "--adjacency", W["adj"], "--calibration", "L", "--train-queries", W["train"],
                "--valid-queries", W["valid"], "--workers", "1"]
    for flag, value in (("--l-lr", "1e30"), ("--l-lr", "1e6"), ("--l-lr", "inf"), ("--l-lr", "nan"),
                        ("--l-lr", "-1"), ("--l-lr", "0"), ("--l-steps", "1000000000000"),
                        ("--l-epochs", "1000000000"), ("--l-check-every", "1000000000000"),
                        ("--l-batch", "1000000000000"), ("--l-negatives", "1000000000"),
                        ("--l-negative-weight", "1e300"), ("--l-identity", "inf")):
        add("L", f"answer {flag} {value}", "cli", "refuse", args=[*answer_l, flag, value, "--out", o("l" + flag + value)],
            needle=flag)
    api_l = "pl.answer(W['test'], adjacency=W['adj'], calibration='L', train_queries=W['train'], " \
            "valid_queries=W['valid'], workers=1, quiet=True, out={out!r}, {kw})"
    for kw in ("l_lr=1e30", "l_lr=float('nan')", "l_steps=10**12", "l_epochs=10**9", "l_lr=np.float64('inf')",
               "l_lr=1e-3+0j", "l_batch=2**40"):
        add("L", f"pl.answer {kw}", "api", "refuse", code=api_l.format(out=o("lapi"), kw=kw), needle=kw.split("=")[0])
    add("L", "reproduce --l-lr 1e30", "cli", "refuse", needle="--l-lr",
        args=["reproduce", "probe", "--out", o("rep_llr"), *tiny, "--l-lr", "1e30"])
    add("L", "pl.run l_steps=10**12", "api", "refuse", needle="l_steps",
        code=f"pl.run('probe', out={o('run_lsteps')!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='cpu', "
             "l_steps=10**12, quiet=True)")
    add("L", "answer --l-lr 1 (in range): no non-finite utility", "cli", "either",
        args=[*answer_l, "--l-lr", "1", "--l-epochs", "2", "--out", o("l_lr_one")],
        check=f"finite_or_fails({o('l_lr_one')!r})")

    # ---- the baselines' settings: checked before any work, named as given
    rep = ["reproduce", "probe", *tiny, "--calibrations", "none"]
    for qe, needle in (("lr=nan", "--qe lr=nan"), ("lr=inf", "--qe lr"), ("epochs=-1", "--qe epochs=-1"),
                       ("dim=1e3", "--qe dim"), ("batch_size=abc", "--qe batch_size"), ("loss=bogus", "--qe loss"),
                       ("tnorm=bogus", "--qe tnorm"), ("logice_ne.lr=-1", "--qe logice_ne.lr"),
                       ("train_per_type=0", "--qe train_per_type"), ("max_answers=1000000000", "--qe max_answers"),
                       ("hidden=10000000000", "--qe hidden")):
        add("qe", f"reproduce --qe {qe}", "cli", "refuse", needle=needle,
            args=[*rep, "--out", o("rep_qe_" + qe), "--baselines", "logice_ne", "--qe", qe])
    for qe, needle in (("{'lr': 'nan'}", "qe="), ("{'epochs': 0}", "qe="), ("{'cone_ne': {'lr': float('inf')}}", "qe="),
                       ("{'lr': True}", "qe="), ("{'dim': 8.5}", "qe=")):
        add("qe", f"pl.run qe={qe}", "api", "refuse", needle=needle,
            code=f"pl.run('probe', out={o('run_qe')!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='cpu', "
                 f"calibrations='none', baselines='logice_ne,cone_ne', qe={qe}, quiet=True)")
    add("qe", "train-qe --lr nan", "cli", "refuse", needle="--lr",
        args=["train-qe", "probe", "--model", "logice_ne", "--train-queries", W["train"], "--valid-queries", W["valid"],
              "--lr", "nan", "--out", o("tqe_nan")])
    add("qe", "train-qe --epochs 0", "cli", "refuse", needle="--epochs",
        args=["train-qe", "probe", "--model", "logice_ne", "--train-queries", W["train"], "--valid-queries", W["valid"],
              "--epochs", "0", "--out", o("tqe_0")])

    # ---- sample sizes against the graph
    add("size", "reproduce --baselines on the tiny graph (default counts)", "cli", "either", needle="train_per_type",
        args=[*rep, "--out", o("rep_base"), "--baselines", "logice_ne"])
    add("size", "sample --per-type 1000000000", "cli", "refuse", needle="--per-type",
        args=["sample", "probe", "--out", o("s_big"), "--per-type", "1000000000", "--no-browse"])
    add("size", "sample --types 1p --per-type 50000", "cli", "refuse", needle="--per-type",
        args=["sample", "probe", "--out", o("s_50k"), "--types", "1p", "--per-type", "50000", "--no-browse"])
    add("size", "pl.sample per_type=10**7", "api", "refuse", needle="per_type",
        code=f"pl.sample('probe', out={o('s_api')!r}, per_type=10**7, browse=False, quiet=True)")
    add("size", "reproduce --train-per-type 10000000", "cli", "refuse", needle="--train-per-type",
        args=["reproduce", "probe", "--out", o("rep_tpt"), "--per-type", "2", "--train-per-type", "10000000",
              "--epochs", "1", "--dim", "8", "--device", "cpu"])
    add("size", "reproduce --qe train_per_type=1000000 --baselines", "cli", "refuse", needle="train_per_type",
        args=[*rep, "--out", o("rep_qtpt"), "--baselines", "logice_ne", "--qe", "train_per_type=1000000"])

    # ---- numbers as Python gives them: numpy scalars taken, floats as integers refused
    run_tiny = "model='ukge_logi', epochs=1, device='cpu', quiet=True"
    for kw, expect in (("dim=np.int64(8)", "ok"), ("dim=np.int32(8)", "ok"), ("dim=1e3", "refuse"), ("dim=8.0", "refuse"),
                       ("dim=np.float64(8.0)", "refuse"), ("dim=True", "refuse"), ("dim=8+0j", "refuse"),
                       ("seed=np.uint32(3)", "ok"), ("lr=np.float32(0.01)", "ok"), ("lr=0.01+0j", "refuse")):
        dim = "" if kw.startswith("dim") else ", dim=8"
        add("numbers", f"pl.train {kw}", "api", expect, needle=kw.split("=")[0],
            code=f"pl.train('probe', {kw}{dim}, {run_tiny}, out={o('train_' + kw)!r})",
            check="result.path.is_dir()")
    for kw, expect in (("threshold=np.float32(0.3)", "ok"), ("threshold=np.float64(0.3)", "ok"),
                       ("threshold=0.3+0.7j", "refuse"), ("top_k=np.int64(2)", "ok"), ("top_k=2.0", "refuse")):
        add("numbers", f"pl.export {kw}", "api", expect, needle=kw.split("=")[0],
            code=f"pl.export(W['run'], {kw}, out={o('exp_' + kw)!r}, quiet=True)", check="result.n_facts >= 0")
    add("numbers", "pl.sample per_type=np.int64(2)", "api", "ok",
        code=f"pl.sample('probe', types='1p', per_type=np.int64(2), out={o('s_np')!r}, browse=False, quiet=True)",
        check="len(result.frame) == 2")
    add("numbers", "pl.query top=np.int64(2)", "api", "ok", check="len(result.frame) == 2",
        code="pl.query('helps(p0, ?y)', dataset='probe', graph='test', top=np.int64(2))")
    add("numbers", "pl.query top=2.0", "api", "refuse", needle="top", code="pl.query('helps(p0, ?y)', dataset='probe', graph='test', top=2.0)")
    add("numbers", "pl.query explain=1.5", "api", "refuse", needle="explain",
        code="pl.query('helps(p0, ?y)', dataset='probe', graph='test', explain=1.5)")
    add("numbers", "pl.query cycle_cap=np.int64(5)", "api", "ok", check="len(result.frame) > 0",
        code="pl.query('helps(p0, ?y)', dataset='probe', graph='test', cycle_cap=np.int64(5))")

    # ---- complex numbers and lone surrogates, one line
    frame = ("pd.DataFrame({'head': ['a', 'b', 'c'], 'relation': ['r', 'r', 'r'], 'tail': ['b', 'c', 'a'], "
             "'confidence': CONF, 'split': ['train'] * 3})")
    for conf, label in (("[0.5 + 0.7j, 0.4, 0.3]", "complex"), ("np.array([0.5, 0.4, 0.3], dtype=complex)", "complex dtype"),
                        ("[0.5 + 0j, 0.4, 0.3]", "complex, zero imaginary"), ("[True, 0.4, 0.3]", "a bool")):
        add("complex", f"pl.ingest frame confidence {label}", "api", "refuse", needle="confidence",
            code=f"pl.ingest('cplx', {frame.replace('CONF', conf)}, quiet=True)")
    sur = frame.replace("CONF", "[0.5, 0.4, 0.3]")
    # object columns (a frame read with surrogateescape, or built so): pandas' own string columns refuse a
    # surrogate in the user's line already, before any call of ours
    add("surrogate", "pl.ingest frame head '\\ud800'", "api", "refuse", needle="head",
        code=f"f = {sur}; f['head'] = pd.Series(['x\\ud800', 'b', 'c'], dtype=object); pl.ingest('sur', f, quiet=True)")
    add("surrogate", "pl.ingest frame relation '\\udfff'", "api", "refuse", needle="relation",
        code=f"f = {sur}; f['relation'] = pd.Series(['r', '\\udfff', 'r'], dtype=object); pl.ingest('sur2', f, quiet=True)")
    add("surrogate", "pl.ingest name '\\ud800x'", "api", "refuse", needle="name",
        code=f"pl.ingest('\\ud800x', {sur}, quiet=True)")
    add("surrogate", "pl.query text with a lone surrogate", "api", "refuse", needle="",
        code="pl.query('knows(\"p\\ud800\", ?y)', dataset='probe', graph='test')")
    bad_tsv = Path(W["work"]) / "bad_utf8.tsv"
    bad_tsv.write_bytes(b"head\trelation\ttail\tconfidence\np\xff\tknows\tq\t0.5\nq\tknows\tp\t0.4\n")
    add("surrogate", "ingest --from a TSV with an invalid UTF-8 name", "cli", "refuse", needle="bad_utf8.tsv",
        args=["ingest", "badutf", "--from", str(bad_tsv)])
    add("surrogate", "query with an invalid UTF-8 argument", "cli", "refuse", needle="",
        args=["query", "knows(p\udcff, ?y)", "--dataset", "probe", "--graph", "test"])
    add("complex", "ingest --split with a complex fraction", "cli", "refuse", needle="--split",
        args=["ingest", "cplx2", "--from", str(Path(W["work"]) / "kg.tsv"), "--split", "0.8+0j,0.1,0.1"])

    # ---- empty lists
    add("empty", "sample --types ''", "cli", "refuse", needle="--types",
        args=["sample", "probe", "--out", o("s_empty"), "--types", "", "--per-type", "2", "--no-browse"])
    add("empty", "sample --types ','", "cli", "refuse", needle="--types",
        args=["sample", "probe", "--out", o("s_comma"), "--types", ",", "--per-type", "2", "--no-browse"])
    add("empty", "pl.sample types=[]", "api", "refuse", needle="types",
        code=f"pl.sample('probe', types=[], per_type=2, out={o('s_empty_api')!r}, browse=False, quiet=True)")
    add("empty", "pl.sample types=()", "api", "refuse", needle="types",
        code=f"pl.sample('probe', types=(), per_type=2, out={o('s_empty_api2')!r}, browse=False, quiet=True)")
    add("empty", "reproduce --models ''", "cli", "refuse", needle="--models",
        args=["reproduce", "probe", "--out", o("rep_models"), *tiny, "--models", ""])
    add("empty", "pl.run calibrations=[]", "api", "refuse", needle="calibrations",
        code=f"pl.run('probe', out={o('run_cal')!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='cpu', "
             "calibrations=[], quiet=True)")
    add("empty", "answer --l-shapes ''", "cli", "refuse", needle="--l-shapes",
        args=[*answer_l, "--l-shapes", "", "--out", o("l_shapes")])

    # ---- options that do nothing where given
    add("no-op", "reproduce --qe without --baselines", "cli", "refuse", needle="--qe",
        args=["reproduce", "probe", "--out", o("rep_qe_only"), *tiny, "--qe", "lr=1e-3"])
    add("no-op", "pl.run qe= without baselines", "api", "refuse", needle="qe",
        code=f"pl.run('probe', out={o('run_qe_only')!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='cpu', "
             "qe={'lr': 1e-3}, quiet=True)")
    # not a no-op: the export is sharded in this process (resumable), which its manifest records
    add("no-op", "pl.export shards= on the local executor (sharded here)", "api", "either", needle="shards",
        code=f"pl.export(W['run'], threshold=0.05, executor='local', shards={o('shards')!r}, out={o('exp_sh')!r}, quiet=True)",
        check="'executor' in result.manifest")
    add("no-op", "export --shard-heads on the local executor", "cli", "refuse", needle="--shard-heads",
        args=["export", W["run"], "--threshold", "0.05", "--shard-heads", "4", "--out", o("exp_shh")])
    add("no-op", "answer --l-lr with --calibration none", "cli", "refuse", needle="--l-lr",
        args=["answer", W["test"], "--adjacency", W["adj"], "--l-lr", "1e-3", "--out", o("noop_llr"), "--workers", "1"])
    add("no-op", "pl.answer train_queries= with calibration none", "api", "refuse", needle="train_queries",
        code=f"pl.answer(W['test'], adjacency=W['adj'], train_queries=W['train'], out={o('noop_tq')!r}, workers=1, quiet=True)")
    add("no-op", "reproduce --qe for a baseline not run", "cli", "refuse", needle="--qe",
        args=[*rep, "--out", o("rep_qe_other"), "--baselines", "logice_ne", "--qe", "cone_ne.lr=0.001",
              "--qe", "train_per_type=2", "--qe", "small_per_type=2", "--qe", "epochs=1", "--qe", "dim=8"])
    add("no-op", "answer --valid-queries with --calibration none", "cli", "refuse", needle="--valid-queries",
        args=["answer", W["test"], "--adjacency", W["adj"], "--valid-queries", W["valid"], "--out", o("noop_vq"),
              "--workers", "1"])
    add("no-op", "reproduce --l-lr with --calibrations none", "cli", "refuse", needle="--l-lr",
        args=["reproduce", "probe", "--out", o("rep_noop_l"), *tiny, "--calibrations", "none", "--l-lr", "1e-3"])

    # ---- an empty device
    for cmd in (["train", "probe", "--model", "ukge_logi", "--dim", "8", "--epochs", "1", "--out", o("dev_train")],
                ["export", W["run"], "--threshold", "0.05", "--out", o("dev_export")],
                ["answer", W["test"], "--adjacency", W["adj"], "--out", o("dev_answer"), "--workers", "1"]):
        for dev in ("", " "):
            add("device", f"{cmd[0]} --device {dev!r}", "cli", "refuse", args=[*cmd, "--device", dev], needle="--device")
    add("device", "pl.train device=''", "api", "refuse", needle="device",
        code=f"pl.train('probe', model='ukge_logi', dim=8, epochs=1, device='', out={o('dev_api')!r}, quiet=True)")
    add("device", "pl.run device=''", "api", "refuse", needle="device",
        code=f"pl.run('probe', out={o('dev_run')!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='', quiet=True)")
    add("device", "train --device cuda:-1", "cli", "refuse", needle="--device",
        args=["train", "probe", "--model", "ukge_logi", "--dim", "8", "--epochs", "1", "--out", o("dev_neg"),
              "--device", "cuda:-1"])

    # ---- a replayed config with bad model settings
    for label in ("evil", "class", "list", "neg", "dup", "nan"):
        add("config", f"train --config model_kwargs {label}", "cli", "refuse", needle="model_kwargs",
            args=["train", "probe", "--config", W[f"config_{label}"], "--out", o(f"cfg_{label}"), "--device", "cpu"])
    add("config", "pl.train config= model_kwargs evil", "api", "refuse", needle="model_kwargs",
        code=f"pl.train('probe', config=W['config_evil'], out={o('cfg_api')!r}, device='cpu', quiet=True)")

    # ---- a benchmark name with a DataFrame
    add("line", "pl.ingest('ppi5k', frame)", "api", "refuse", needle="ppi5k",
        code=f"pl.ingest('ppi5k', {sur}, quiet=True)", check="len(str(error)) < 300")
    add("line", "pl.ingest('ppi5k', frame) with no option", "api", "refuse", needle="ppi5k",
        code=f"pl.ingest('ppi5k', {sur})", check="len(str(error)) < 300")
    add("line", "pl.ingest('cn15k', source=frame, split=...)", "api", "refuse", needle="cn15k",
        code=f"pl.ingest('cn15k', source={sur}, split='0.8,0.1,0.1', quiet=True)")

    # ---- an interrupted first call leaves a usable process: Ctrl-C when torch's first import reaches a module
    for module in ("torch.nn", "torch.cuda", "torch.optim"):
        add("interrupt", f"KeyboardInterrupt in the first pl.run, at {module}", "script", "ok",
            script=INTERRUPTED.format(module=module, out=o(f"intr_{module}")))
    return C


INTERRUPTED = """
import os, signal, sys, importlib.abc
import pipeline as pl

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == {module!r} and not getattr(self, "done", False):
            self.done = True
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: SIGINT to the process
        return None

sys.meta_path.insert(0, Interrupt())
try:
    pl.run('probe', out={out!r}, per_type=2, train_per_type=2, epochs=1, dim=8, device='cpu', calibrations='none',
           quiet=True)
except KeyboardInterrupt:
    pass
sys.meta_path.pop(0)
r = pl.query('knows(p0, ?y)', dataset='probe', graph='test')
assert len(r.frame) == 1, r.frame
import torch
assert float(torch.ones(2).sum()) == 2.0
print("OK")
"""


# ------------------------------------------------------------------------------------------ classification


def finite_or_fails(folder: str) -> bool:
    """Every utility of the answers files in folder finite or -inf (an atom failing), never NaN or +inf."""
    import numpy as np
    import pyarrow.parquet as pq

    files = list(Path(folder).glob("*.parquet"))
    return bool(files) and all(
        not np.isnan(u := pq.read_table(f).column("utility").to_numpy()).any() and not np.isposinf(u).any()
        for f in files)


def classify_line(line: str, case: Case) -> str:
    return "clear line" if case.needle.lower() in line.lower() else "unclear line"


def run_cli(case: Case, timeout: float) -> tuple[str, str]:
    try:
        res = subprocess.run([*CLI, *case.args], capture_output=True, text=True, timeout=timeout,
                             env=os.environ.copy(), errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {timeout:g} s"
    err = res.stderr
    if "Traceback" in err or "Traceback" in res.stdout:
        return "traceback", err.strip().splitlines()[-1] if err.strip() else "?"
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("note:", "warning:"))
             and "it/s]" not in ln and "%|" not in ln]
    if res.returncode == 0:
        if case.expect == "refuse":
            return "silent wrong", (res.stdout.strip().splitlines() or [""])[-1][:200]
        if case.check and not eval(case.check):  # noqa: S307 (the probe's own expressions)
            return "silent wrong", f"check failed: {case.check}"
        return "ok", ""
    errors = [ln for ln in lines if ln.startswith(("error:", "Error:"))]
    if errors and errors[0].startswith("error: column "):  # a query's syntax error: its line, the text, a caret
        lines = errors[:1]
    if res.returncode == 2 and errors:
        line = errors[-1]
        if case.expect == "ok":
            return "wrong refusal", line[:300]
        if len(errors) > 1 or (len(lines) > 1 and not lines[-1].startswith("Error:") and not lines[0].startswith("Usage")):
            return "unclear line", line[:300]
        return classify_line(line, case), line[:300]
    return "traceback", (lines[-1] if lines else f"exit {res.returncode}")[:300]


API_CHILD = """
import json, sys, numpy as np, pandas as pd, pipeline as pl
sys.path.insert(0, {bench!r})
from probe_door import finite_or_fails
W = json.loads({W!r})
case = json.loads({case!r})
out = {{}}
try:
    ns = {{"pl": pl, "np": np, "pd": pd, "W": W, "finite_or_fails": finite_or_fails}}
    lines = case["code"].split("; ")
    for ln in lines[:-1]:
        exec(ln, ns)
    result = eval(lines[-1], ns)
    ns["result"] = result
    out = {{"status": "ok", "check": bool(eval(case["check"], ns)) if case["check"] else True}}
except pl.PipelineError as error:
    text = str(error)
    ns["error"] = error
    ok = bool(eval(case["check"], ns)) if "error" in case["check"] and case["expect"] == "refuse" else True
    out = {{"status": "refused", "message": text[:400], "one_line": "\\n" not in text and ok}}
except BaseException as error:
    out = {{"status": "exception", "message": f"{{type(error).__name__}}: {{str(error)[:300]}}"}}
print("PROBE-RESULT " + json.dumps(out, default=str))
"""


def run_api(case: Case, W: dict[str, str], timeout: float) -> tuple[str, str]:
    code = API_CHILD.format(bench=str(Path(__file__).parent), W=json.dumps(W),
                            case=json.dumps({"code": case.code, "check": case.check, "expect": case.expect}))
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                             env=os.environ.copy(), errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {timeout:g} s"
    found = [ln for ln in res.stdout.splitlines() if ln.startswith("PROBE-RESULT ")]
    if not found:
        return "traceback", (res.stderr.strip().splitlines() or ["(no result)"])[-1][:300]
    got = json.loads(found[-1].removeprefix("PROBE-RESULT "))
    if got["status"] == "ok":
        if case.expect == "refuse":
            return "silent wrong", "returned normally"
        return ("ok", "") if got["check"] else ("silent wrong", f"check failed: {case.check}")
    if got["status"] == "refused":
        if case.expect == "ok":
            return "wrong refusal", got["message"][:300]
        if not got["one_line"]:
            return "unclear line", got["message"][:300]
        return classify_line(got["message"], case), got["message"][:300]
    return "traceback", got["message"]


def run_script(case: Case, timeout: float) -> tuple[str, str]:
    try:
        res = subprocess.run([sys.executable, "-c", case.script], capture_output=True, text=True, timeout=timeout,
                             env=os.environ.copy(), errors="replace")
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {timeout:g} s"
    if res.returncode == 0 and res.stdout.strip().endswith("OK"):
        return "ok", ""
    tail = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
    return "traceback", tail[:300]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="Run the cases whose group or name holds this text (A|B: either).")
    ap.add_argument("--timeout", type=float, default=60.0, help="Seconds before a case counts as a hang.")
    ap.add_argument("--keep", default=None, help="Work folder (kept; default: a temporary one, removed).")
    ap.add_argument("--json", default=None, help="Write every case's outcome to this file.")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="probe_door_"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PIPELINE_HOME"] = str(work / "home")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.pop("PIPELINE_STORE", None)
    t0 = time.perf_counter()
    try:
        saved = work / "W.json"  # a kept work folder: its setup is reused
        W = json.loads(saved.read_text()) if saved.exists() else setup(work)
        saved.write_text(json.dumps(W))
        print(f"setup: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        words = [w.strip().lower() for w in args.only.split("|")]
        todo = [c for c in cases(W) if any(w in (c.group + " " + c.name).lower() for w in words)]
        results = []
        for case in todo:
            t1 = time.perf_counter()
            if case.door == "cli":
                outcome, detail = run_cli(case, args.timeout)
            elif case.door == "api":
                outcome, detail = run_api(case, W, args.timeout)
            else:
                outcome, detail = run_script(case, args.timeout)
            if case.expect == "either" and outcome in ("ok", "clear line", "unclear line"):
                outcome = "clear line" if outcome == "unclear line" else outcome
            seconds = time.perf_counter() - t1
            results.append({"group": case.group, "name": case.name, "door": case.door, "expect": case.expect,
                            "outcome": outcome, "seconds": round(seconds, 1), "detail": detail})
            print(f"{outcome:13s} {seconds:5.1f}s  [{case.group}] {case.name}  {detail[:160]}", flush=True)
    finally:
        cli("store", "stop", timeout=120)
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    counts = Counter(r["outcome"] for r in results)
    print(f"\n{len(results)} cases (CLI {sum(r['door'] == 'cli' for r in results)}, API "
          f"{sum(r['door'] == 'api' for r in results)}, scripts {sum(r['door'] == 'script' for r in results)}) "
          f"in {time.perf_counter() - t0:.0f} s")
    for name in OUTCOMES:
        print(f"  {name:14s} {counts.get(name, 0)}")
    by_group: dict[str, Counter] = {}
    for r in results:
        by_group.setdefault(r["group"], Counter())[r["outcome"]] += 1
    print("\n| group | " + " | ".join(OUTCOMES) + " |\n|---|" + "---|" * len(OUTCOMES))
    for g, c in by_group.items():
        print(f"| {g} | " + " | ".join(str(c.get(n, 0)) for n in OUTCOMES) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": dict(counts), "cases": results}, indent=1))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
