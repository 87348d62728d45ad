"""The neural-adjacency export against brute-force dense scoring, its files, its cache, and bad input."""

from __future__ import annotations

import json
import os
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
    return _export(*args, **{"max_fraction": 1.0, **kwargs})


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
    man = export_adjacency(runs[model], threshold, tmp_path / "exp", progress=False, block_rows=block_rows)
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
    man = export_adjacency(runs["beurre"], THRESHOLD, tmp_path / "exp", progress=False, block_rows=4)
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
    first = export_adjacency(run, THRESHOLD, progress=False)  # default dir under PIPELINE_HOME, named by hash
    assert not first["cached"] and first["model_hash"][:16] in first["path"]
    stamp = os.stat(Path(first["path"]) / relation_file(0)).st_mtime_ns
    again = export_adjacency(run, THRESHOLD, progress=False)
    assert again["cached"] and again["path"] == first["path"]
    assert os.stat(Path(first["path"]) / relation_file(0)).st_mtime_ns == stamp
    assert not export_adjacency(run, 0.5, progress=False)["cached"]  # another threshold
    # retrain into the SAME run directory with another seed: a new hash, never the stale cache
    _train(run, "ukge_rect", seed=1)
    other = export_adjacency(run, THRESHOLD, progress=False)
    assert (
        not other["cached"] and other["model_hash"] != first["model_hash"] and other["path"] != first["path"]
    )
    # an explicit --out holding another model's export is neither reused nor replaced unless asked (issue 44)
    out = tmp_path / "fixed"
    export_adjacency(tmp_path / "run", THRESHOLD, out, progress=False)
    held = load_adjacency(out)[1]["model_hash"]
    with pytest.raises(ArtifactError, match=r"holds an export of threshold 0.3 \(this one 0.5\): overwrite=True"):
        export_adjacency(run, 0.5, out, progress=False)
    _train(run, "ukge_rect", seed=2)
    with pytest.raises(ArtifactError) as err:
        export_adjacency(run, THRESHOLD, out, progress=False)
    assert str(err.value) == (
        f"{out} holds an export of another model (run {run}, model hash {held[:12]}…; this one {run}, "
        f"{load_run(run).content_hash()[:12]}…): overwrite=True replaces it, or choose another out=")
    assert load_adjacency(out)[1]["model_hash"] == held  # untouched
    replaced = export_adjacency(run, THRESHOLD, out, progress=False, overwrite=True)
    assert not replaced["cached"]
    assert load_adjacency(out)[1]["model_hash"] == load_run(run).content_hash()
    assert export_adjacency(run, THRESHOLD, out, progress=False)["cached"]


def test_truncated_and_foreign_files(runs, tmp_path: Path) -> None:
    out = tmp_path / "exp"
    export_adjacency(runs["beurre"], THRESHOLD, out, progress=False)
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
    assert not export_adjacency(runs["beurre"], THRESHOLD, out, progress=False)["cached"]
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
    man = export_adjacency(runs["beurre"], THRESHOLD, out, progress=False)
    doc = json.loads((out / MANIFEST).read_text())
    doc["model_hash"] = "0" * 64
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="edited after the export was written"):
        load_adjacency(out)
    del doc["digest"]  # even unsealed, every file's own metadata contradicts the manifest
    (out / MANIFEST).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="model_hash"):
        load_adjacency(out)
    # unsorted rows written with the right schema and metadata
    out2 = tmp_path / "exp2"
    busiest = max(man["relations"], key=lambda x: x["nnz"])
    assert busiest["nnz"] > 1
    export_adjacency(runs["beurre"], THRESHOLD, out2, progress=False)
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
        export_adjacency(runs["beurre"], 0.0, tmp_path / "a", progress=False)
    with pytest.raises(PipelineError, match="choose a higher --threshold"):
        export_adjacency(
            runs["beurre"], 0.01, tmp_path / "b", progress=False, max_fraction=0.01
        )
    assert not (tmp_path / "b").exists()  # nothing half-written
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    with pytest.raises(ArtifactError, match="not an export directory"):
        export_adjacency(runs["beurre"], THRESHOLD, tmp_path / "c", progress=False)
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
    a = export_adjacency(runs["beurre"], THRESHOLD, tmp_path / "cpu", device="cpu", progress=False)
    b = export_adjacency(runs["beurre"], THRESHOLD, tmp_path / "gpu", device="cuda", progress=False)
    ga, gb = load_adjacency(tmp_path / "cpu")[0], load_adjacency(tmp_path / "gpu")[0]
    assert a["model_hash"] == b["model_hash"]
    # facts within float rounding of the threshold may differ; everything else agrees
    assert abs(ga.nnz - gb.nnz) <= max(2, ga.nnz // 1000)


def test_edited_threshold_and_wrong_sizes_are_refused(runs, tmp_path: Path) -> None:
    """Provenance that lies: an export whose manifest claims another threshold or entity count is refused,
    never recorded (both with the manifest's digest and, removed, by the files' own metadata)."""
    out = tmp_path / "exp"
    man = export_adjacency(runs["beurre"], THRESHOLD, out, progress=False)
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
    with pytest.raises(ArtifactError, match="threshold .* differs from the manifest"):
        load_adjacency(out)
    # an edited manifest is never taken for a cached export of that threshold either
    assert not export_adjacency(runs["beurre"], 0.05, out, progress=False, max_fraction=1.0)["cached"]


def test_a_killed_export_leaves_nothing_behind_for_the_next_run(runs, tmp_path: Path) -> None:
    """A killed export's hidden temporary folder is removed by the next export of the same folder."""
    out = tmp_path / "exp"
    stale = tmp_path / ".exp.abc123.part"  # what a kill -9 mid-export leaves (atomic.temp_dir's naming)
    stale.mkdir()
    (stale / "rel-0000.arrow").write_bytes(b"half")
    export_adjacency(runs["beurre"], THRESHOLD, out, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_dense_guard_holds_on_a_small_graph_unless_allowed_plainly(runs, tmp_path: Path) -> None:
    """A toy graph's unselective export is refused like a big one's (issue 32: a small graph exported 100%
    of its pairs); --allow-dense keeps it and says so, and the CLI reports facts over pairs, never header
    bytes over dense bytes ("134%", issue 12)."""
    from pipeline.cli import cli
    from pipeline.stages.export import MAX_FRACTION

    # a threshold that keeps about 60% of the toy model's pairs
    scores = np.concatenate([s for _, _, s in brute_force(runs["beurre"], 1e-9).values()])
    t = float(np.quantile(scores, 0.4))
    with pytest.raises(PipelineError, match="not selective at this threshold"):
        export_adjacency(runs["beurre"], t, tmp_path / "a", progress=False, max_fraction=MAX_FRACTION)  # the default
    args = ["export", str(runs["beurre"]), "--threshold", str(t), "--out", str(tmp_path / "b")]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code != 0 and "choose a higher --threshold" in refused.output
    assert not (tmp_path / "b").exists()
    out = CliRunner().invoke(cli, [*args, "--allow-dense"])
    assert out.exit_code == 0, out.output
    man = export_adjacency(runs["beurre"], t, tmp_path / "b", progress=False, max_fraction=1.0)
    assert man["cached"]
    pairs = man["n_entities"] ** 2 * man["n_relations"]
    assert man["nnz"] > pairs / 3
    assert f"{100 * man['nnz'] / pairs:.2f}% of all (h, r, t) pairs" in out.stdout
    assert "more than the density guard's 33% (allowed by --allow-dense)" in out.stderr
    # the export made with the flag is not handed out from the cache without it
    again = CliRunner().invoke(cli, args)
    assert again.exit_code != 0 and "--allow-dense" in again.output


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
