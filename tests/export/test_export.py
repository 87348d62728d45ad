"""The neural-adjacency export against brute-force dense scoring, its files, its cache, and bad input."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from click.testing import CliRunner

from pipeline.core.errors import ArtifactError, PipelineError
from pipeline.formats.adjacency import FORMAT, MANIFEST, load_adjacency, relation_file
from pipeline.models import default_config, load_run, train
from pipeline.stages.export import export_adjacency as _export
from tests.models.toy import toy_kg

THRESHOLD = 0.3


def export_adjacency(*args, **kwargs):
    # the toy KG is tiny and dense: lift the guard against exports larger than the dense matrix
    return _export(*args, **{"allow_dense": True, **kwargs})


def _train(run_dir: Path, model: str = "ukge_rect", seed: int = 0, epochs: int = 3) -> Path:
    cfg = default_config("toy", model, epochs=epochs, dim=8, batch_size=32, lr=0.02, seed=seed)
    train(toy_kg(), cfg, run_dir, progress=False, overwrite=True)  # some tests retrain a run in place
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {m: _train(root / m, m) for m in ("ukge_logi", "ukge_rect", "beurre")}


def brute_force(run_dir: Path, threshold: float) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every (h, t) per relation scored one triple at a time through forward(), filtered, sorted."""
    model = load_run(run_dir)
    n = model.n_entities
    hh, tt = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    out = {}
    for r in range(model.n_relations):
        s = model.score(torch.tensor(hh.ravel()), torch.full((n * n,), r), torch.tensor(tt.ravel())).numpy()
        keep = s >= np.float32(threshold)
        out[r] = (hh.ravel()[keep], tt.ravel()[keep], s[keep])
    return out


@pytest.mark.parametrize("model", ["ukge_logi", "ukge_rect", "beurre"])
@pytest.mark.parametrize("block_rows", [None, 7])
def test_export_equals_dense_brute_force(runs, model: str, block_rows: int | None, tmp_path: Path) -> None:
    threshold = THRESHOLD
    man = export_adjacency(runs[model], threshold=threshold, out=tmp_path / "exp", progress=False, block_rows=block_rows)
    graph, meta = load_adjacency(tmp_path / "exp", dataset="toy")
    ref = brute_force(runs[model], threshold)
    assert graph.nnz == sum(len(v[0]) for v in ref.values()) == man["nnz"]
    assert graph.nnz > 0
    for r, (h, t, s) in ref.items():
        gh, gt, gs = graph.relation(r)
        np.testing.assert_array_equal(gh.numpy(), h)
        np.testing.assert_array_equal(gt.numpy(), t)
        np.testing.assert_allclose(gs.numpy(), s, rtol=1e-5, atol=1e-6)
    assert meta["model_hash"] == load_run(runs[model]).content_hash() and meta["threshold"] == threshold


def test_files_sorted_with_metadata(runs, tmp_path: Path) -> None:
    man = export_adjacency(runs["beurre"], threshold=THRESHOLD, out=tmp_path / "exp", progress=False, block_rows=4)
    for rel in man["relations"]:
        with pa.memory_map(str(tmp_path / "exp" / rel["file"])) as src:
            reader = pa.ipc.open_file(src)
            meta = {k.decode(): v.decode() for k, v in reader.schema.metadata.items()}
            table = reader.read_all()
        assert table.schema.names == ["head", "tail", "score"]
        assert [f.type for f in table.schema] == [pa.int32(), pa.int32(), pa.float32()]
        key = table["head"].to_numpy().astype(np.int64) * 1000 + table["tail"].to_numpy()
        assert np.all(np.diff(key) > 0)  # sorted by (head, tail), no repeats, across block boundaries
        assert (
            meta["format"] == FORMAT and meta["dataset"] == "toy" and meta["relation"] == str(rel["relation"])
        )
        assert meta["model_hash"] == man["model_hash"] and float(meta["threshold"]) == THRESHOLD
        assert table.num_rows == rel["nnz"]


def test_cache_reused_for_same_model_and_threshold_only(tmp_path: Path) -> None:
    run = _train(tmp_path / "run", "ukge_rect", seed=0)
    first = export_adjacency(run, threshold=THRESHOLD, progress=False)  # default dir under PIPELINE_HOME, named by hash
    assert not first["cached"] and first["model_hash"][:16] in first["path"]
    stamp = os.stat(Path(first["path"]) / relation_file(0)).st_mtime_ns
    again = export_adjacency(run, threshold=THRESHOLD, progress=False)
    assert again["cached"] and again["path"] == first["path"]
    assert os.stat(Path(first["path"]) / relation_file(0)).st_mtime_ns == stamp
    assert not export_adjacency(run, threshold=0.5, progress=False)["cached"]  # another threshold
    # retrain into the SAME run directory with another seed: a new hash, never the stale cache
    _train(run, "ukge_rect", seed=1)
    other = export_adjacency(run, threshold=THRESHOLD, progress=False)
    assert (
        not other["cached"] and other["model_hash"] != first["model_hash"] and other["path"] != first["path"]
    )
    # an explicit --out holding another model's export is neither reused nor replaced unless asked
    out = tmp_path / "fixed"
    export_adjacency(tmp_path / "run", threshold=THRESHOLD, out=out, progress=False)
    held = load_adjacency(out)[1]["model_hash"]
    with pytest.raises(ArtifactError, match=r"holds an export of threshold 0.3 \(this one 0.5\): overwrite=True"):
        export_adjacency(run, threshold=0.5, out=out, progress=False)
    _train(run, "ukge_rect", seed=2)
    with pytest.raises(ArtifactError) as err:
        export_adjacency(run, threshold=THRESHOLD, out=out, progress=False)
    assert str(err.value) == (
        f"{out} holds an export of another model (run {run}, model hash {held[:12]}…; this one {run}, "
        f"{load_run(run).content_hash()[:12]}…): overwrite=True replaces it, or choose another out=")
    assert load_adjacency(out)[1]["model_hash"] == held  # untouched
    replaced = export_adjacency(run, threshold=THRESHOLD, out=out, progress=False, overwrite=True)
    assert not replaced["cached"]
    assert load_adjacency(out)[1]["model_hash"] == load_run(run).content_hash()
    assert export_adjacency(run, threshold=THRESHOLD, out=out, progress=False)["cached"]


def test_truncated_and_foreign_files(runs, tmp_path: Path) -> None:
    out = tmp_path / "exp"
    export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out, progress=False)
    with pytest.raises(ArtifactError, match="export of data set 'toy', not 'cn15k'"):
        load_adjacency(out, dataset="cn15k")
    f = out / relation_file(1)
    good = f.read_bytes()
    f.write_bytes(good[: len(good) - 40])
    with pytest.raises(ArtifactError, match=r"rel-0001\.arrow: checksum mismatch"):
        load_adjacency(out)
    # without the checksum (an export written before them), the reader's own checks still catch it
    with pytest.raises(ArtifactError, match=r"rel-0001\.arrow: not a readable Arrow IPC file"):
        load_adjacency(out, verify=False)
    # a truncated file is never taken for a cached export either
    assert not export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out, progress=False)["cached"]
    # a valid Arrow file of another kind in its place
    table = pa.table({"a": pa.array([1, 2], pa.int64())})
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    with pytest.raises(ArtifactError, match="not a neural adjacency file"):
        load_adjacency(out, verify=False)
    (out / MANIFEST).unlink()
    with pytest.raises(ArtifactError, match="no manifest.json"):
        load_adjacency(out)


def test_tampered_manifest_and_unsorted_rows(runs, tmp_path: Path) -> None:
    out = tmp_path / "exp"
    man = export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out, progress=False)
    doc = json.loads((out / MANIFEST).read_text())
    doc["model_hash"] = "0" * 64
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="edited after the export was written"):
        load_adjacency(out)
    del doc["digest"]  # without its digest: refused as an edited one
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="the digest of the manifest is missing"):
        load_adjacency(out)
    from pipeline.core.provenance import seal

    (out / MANIFEST).write_text(json.dumps(seal(doc)))  # sealed again by hand: every file's metadata contradicts it
    with pytest.raises(ArtifactError, match="model_hash"):
        load_adjacency(out)
    # unsorted rows written with the right schema and metadata
    out2 = tmp_path / "exp2"
    busiest = max(man["relations"], key=lambda x: x["nnz"])
    assert busiest["nnz"] > 1
    export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out2, progress=False)
    f = out2 / busiest["file"]
    with pa.memory_map(str(f)) as src:
        reader = pa.ipc.open_file(src)
        schema, table = reader.schema, reader.read_all()
    rev = table.take(pa.array(np.arange(table.num_rows)[::-1]))
    with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_file(sink, schema) as w:
        w.write_table(rev)
    with pytest.raises(ArtifactError, match="checksum mismatch"):
        load_adjacency(out2)
    with pytest.raises(ArtifactError, match="not sorted"):
        load_adjacency(out2, verify=False)


def test_threshold_validation_and_dense_guard(runs, tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match=r"in \(0, 1\]"):
        export_adjacency(runs["beurre"], threshold=0.0, out=tmp_path / "a", progress=False)
    with pytest.raises(PipelineError, match="choose a higher threshold= or a top_k=, or allow_dense=True"):
        export_adjacency(runs["beurre"], threshold=0.01, out=tmp_path / "b", progress=False, allow_dense=False, max_bytes=100)
    assert not (tmp_path / "b").exists()  # nothing half-written
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    with pytest.raises(ArtifactError, match="not an export directory"):
        export_adjacency(runs["beurre"], threshold=THRESHOLD, out=tmp_path / "c", progress=False)
    assert (tmp_path / "c" / "notes.txt").read_text() == "mine"  # never deleted


def test_cli_export(runs, tmp_path: Path) -> None:
    from pipeline.cli import cli

    res = CliRunner().invoke(
        cli, ["export", str(runs["ukge_rect"]), "--threshold", "0.3", "--out", str(tmp_path / "e"), "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["nnz"] == load_adjacency(tmp_path / "e")[0].nnz
    bad = CliRunner().invoke(cli, ["export", str(tmp_path / "missing")])
    assert bad.exit_code == 2 and bad.output.count("\n") == 1 and "not a run directory" in bad.output


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_export_matches_cpu(runs, tmp_path: Path) -> None:
    a = export_adjacency(runs["beurre"], threshold=THRESHOLD, out=tmp_path / "cpu", device="cpu", progress=False)
    b = export_adjacency(runs["beurre"], threshold=THRESHOLD, out=tmp_path / "gpu", device="cuda", progress=False)
    ga, gb = load_adjacency(tmp_path / "cpu")[0], load_adjacency(tmp_path / "gpu")[0]
    assert a["model_hash"] == b["model_hash"]
    # facts within float rounding of the threshold may differ; everything else agrees
    assert abs(ga.nnz - gb.nnz) <= max(2, ga.nnz // 1000)


def test_edited_threshold_and_wrong_sizes_are_refused(runs, tmp_path: Path) -> None:
    """Provenance that lies: an export whose manifest claims another threshold or entity count is refused,
    never recorded (both with the manifest's digest and, removed, by the files' own metadata)."""
    out = tmp_path / "exp"
    man = export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out, progress=False)
    graph, back = load_adjacency(out, n_entities=man["n_entities"], n_relations=man["n_relations"])
    assert back["threshold"] == THRESHOLD and graph.n_entities == man["n_entities"]
    with pytest.raises(ArtifactError, match=f"an export of {man['n_entities']} entities, but .* has {man['n_entities'] + 1}"):
        load_adjacency(out, n_entities=man["n_entities"] + 1)
    original = (out / MANIFEST).read_text()
    doc = json.loads(original)
    doc["threshold"] = 0.05
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="edited after the export was written"):
        load_adjacency(out)
    del doc["digest"]
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="the digest of the manifest is missing"):
        load_adjacency(out)
    from pipeline.core.provenance import seal

    (out / MANIFEST).write_text(json.dumps(seal(doc)))  # sealed again by hand: the files' own metadata disagree
    with pytest.raises(ArtifactError, match="threshold .* differs from the manifest"):
        load_adjacency(out)
    # an edited manifest is never taken for a cached export of that threshold either
    assert not export_adjacency(runs["beurre"], threshold=0.05, out=out, progress=False, allow_dense=True)["cached"]


def test_a_killed_export_leaves_nothing_behind_for_the_next_run(runs, tmp_path: Path) -> None:
    """A killed export's hidden temporary folder is removed by the next export of the same folder."""
    out = tmp_path / "exp"
    stale = tmp_path / ".exp.abc123.part"  # what a kill -9 mid-export leaves (atomic.temp_dir's naming)
    stale.mkdir()
    (stale / "rel-0000.arrow").write_bytes(b"half")
    export_adjacency(runs["beurre"], threshold=THRESHOLD, out=out, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_size_guard_is_bytes_against_the_machine(runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 32-entity graph's export was refused at 37% of its pairs ("limit 33%"), though its dense
    matrix is 12 KB. The guard is now the export's size against what the machine has: a small graph's
    unselective export is kept (with the CLI's warning that it says little); one larger than its budget is
    refused with both sizes and what to do; --allow-dense keeps it and the cache does not hand it out
    without the flag. The CLI still reports facts over pairs, never header bytes over dense
    bytes ("134%")."""
    import pipeline.stages.export as export_mod
    from pipeline.cli import cli
    from pipeline.stages.export_select import SizeBudget

    # a threshold that keeps about 60% of the toy model's pairs
    scores = np.concatenate([s for _, _, s in brute_force(runs["beurre"], 1e-9).values()])
    t = float(np.quantile(scores, 0.4))
    args = ["export", str(runs["beurre"]), "--threshold", str(t), "--out", str(tmp_path / "a")]
    kept = CliRunner().invoke(cli, args)  # the default budget: this machine's memory and disk
    assert kept.exit_code == 0, kept.output
    man = json.loads((tmp_path / "a" / MANIFEST).read_text())
    pairs = man["n_entities"] ** 2 * man["n_relations"]
    assert man["nnz"] > pairs / 2 and f"{100 * man['nnz'] / pairs:.2f}% of all (h, r, t) pairs" in kept.stdout
    assert "the model calls most pairs true" in kept.stderr and "(a higher --threshold or a --top-k" in kept.stderr
    # a machine with room for 1,000 bytes of export
    monkeypatch.setattr(export_mod, "machine_budget", lambda out: SizeBudget(1000, "a quarter of the 4.0 KB of memory available"))
    args[-1] = str(tmp_path / "b")
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2 and re.fullmatch(
        rf"error: threshold {re.escape(str(t))} keeps \d+\.\d% of the \(h, r, t\) pairs scored so far \(through relation #\d\): the "
        r"export would take about [\d.]+ KB \([\d,]+ facts x 12 bytes\), more than its budget of 1.0 KB \(a quarter "
        r"of the 4.0 KB of memory available\); choose a higher --threshold or a --top-k, or --allow-dense to export "
        r"it anyway\n", refused.output.rsplit("\r", 1)[-1]), refused.output
    assert not (tmp_path / "b").exists()
    assert CliRunner().invoke(cli, [*args, "--allow-dense"]).exit_code == 0
    again = CliRunner().invoke(cli, args)  # the export made with the flag is not handed out without it
    assert again.exit_code == 2 and "this export holds" in again.output and "--allow-dense to use it" in again.output


def test_the_budget_and_the_projection_by_hand(tmp_path: Path) -> None:
    from pipeline.stages.export_select import available_memory, human_bytes, machine_budget, projected_bytes

    assert [human_bytes(n) for n in (999, 12_288, 1_234_567, 5e12)] == ["999 B", "12.3 KB", "1.2 MB", "5.0 TB"]
    # 32 entities x 3 relations x 32: 3,072 pairs; 37.3% kept = 1,146 facts = 13,752 bytes
    assert projected_bytes(1146, 3072, 1024, 3072) == 13_752
    # 200 pairs of 10,000 scored (2%): 30 kept -> 1,500 projected facts; before that, the facts kept so far
    assert projected_bytes(30, 200, 100, 10_000) == 18_000
    assert projected_bytes(30, 100, 100, 10_000) == 360
    assert projected_bytes(30, 300, 300, 10_000) == 12_000
    budget = machine_budget(tmp_path / "not" / "yet")
    assert 0 < budget.bytes <= available_memory() // 4 and budget.why.startswith(("a quarter of the", "half of the"))


def test_cli_export_into_a_folder_of_another_export_needs_overwrite(runs, tmp_path: Path) -> None:
    from pipeline.cli import cli

    out = tmp_path / "exp"
    base = ["export", str(runs["ukge_logi"]), "--out", str(out), "--allow-dense"]
    assert CliRunner().invoke(cli, [*base, "--threshold", "0.3"]).exit_code == 0
    again = CliRunner().invoke(cli, [*base, "--threshold", "0.3"])
    assert again.exit_code == 0 and "[cached]" in again.output  # the same run and settings: reused
    other = CliRunner().invoke(cli, ["export", str(runs["beurre"]), "--out", str(out), "--allow-dense"])
    assert other.exit_code == 2 and other.output.startswith(f"error: {out} holds an export of another model (run ")
    assert other.output.endswith(": --overwrite replaces it, or choose another --out\n")
    assert load_adjacency(out)[1]["model"] == "ukge_logi"
    other = CliRunner().invoke(cli, ["export", str(runs["beurre"]), "--out", str(out), "--allow-dense", "--overwrite"])
    assert other.exit_code == 0 and load_adjacency(out)[1]["model"] == "beurre"
