"""Checksums on every artifact that crosses a stage: one flipped byte in the middle of an
export file, a model, a checkpoint, a run's JSON documents, a query set, an answers or a witnesses file
is one CorruptArtifactError naming that file (one line and exit code 2 from the CLI), never a silently
different result. A file whose checksum was removed (or that was written before checksums) is refused the
same way: deleting the seal is not a way to have an edited file believed."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core import checksums
from pipeline.core.errors import CorruptArtifactError
from pipeline.formats.adjacency import load_adjacency
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.queryset import checksum, read_query_set
from pipeline.formats.witnesses import read_witnesses, write_witnesses
from pipeline.methods import SRC
from pipeline.models import default_config, load_run, read_run, train
from pipeline.stages.answer import answer_query_set
from pipeline.stages.export import export_adjacency
from tests.answer.toy import PREDICTED, write_toy_query_set
from tests.models.toy import toy_kg


def flip(path: Path, at: float = 0.5) -> None:
    """Flip every bit of one byte at fraction ``at`` of the file."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))


def flip_tensor(path: Path) -> None:
    """Flip a byte in the middle of the largest tensor of a torch file (a zip whose local headers and
    padding torch never reads: a flip there changes nothing that is loaded, so nothing to detect)."""
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    head = info.header_offset
    start = head + 30 + int.from_bytes(data[head + 26 : head + 28], "little") + int.from_bytes(data[head + 28 : head + 30], "little")
    data[start + info.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def cfg(epochs: int = 2):
    return default_config("toy", "ukge_logi", epochs=epochs, dim=8, batch_size=32, lr=0.02, seed=0)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ck") / "run"
    train(toy_kg(), cfg(), out, progress=False)
    return out


@pytest.fixture()
def run(run_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the trained run (tests damage it)."""
    copy = tmp_path / "run"
    copy.mkdir()
    for p in run_dir.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    return copy


def test_run_files_carry_checksums(run: Path) -> None:
    recorded = json.loads((run / "checksums.json").read_text())["files"]
    assert set(recorded) == {"config.json", "metadata.json", "results.json"}
    assert recorded["config.json"] == checksums.file_digest(run / "config.json")
    assert len(recorded["config.json"]) == checksums.HEX
    for name in ("model.pt", "checkpoint.pt"):
        doc = torch.load(run / name, weights_only=True)
        body = {k: v for k, v in doc.items() if k != checksums.OBJECT_KEY}
        assert doc[checksums.OBJECT_KEY] == checksums.object_digest(body)


@pytest.mark.parametrize("name", ["model.pt", "config.json", "metadata.json", "results.json"])
def test_a_flipped_byte_in_a_run_file_is_refused(run: Path, name: str) -> None:
    load_run(run)
    flip_tensor(run / name) if name.endswith(".pt") else flip(run / name, 0.6)
    with pytest.raises(CorruptArtifactError) as err:
        load_run(run)
    assert err.value.path == str(run / name)
    assert "checksum mismatch" in str(err.value) or "not the model" in str(err.value)


def test_config_edited_to_another_dataset_is_refused(run: Path) -> None:
    doc = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**doc, "dataset": "ppi5k"}))
    with pytest.raises(CorruptArtifactError, match="config.json: checksum mismatch"):
        read_run(run)


def test_a_model_swapped_in_does_not_match_results(run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    train(toy_kg(), default_config("toy", "ukge_logi", epochs=2, dim=8, batch_size=32, lr=0.02, seed=1), other, progress=False)
    (run / "model.pt").write_bytes((other / "model.pt").read_bytes())  # a sealed model, but another one
    with pytest.raises(CorruptArtifactError, match="model.pt: not the model results.json describes"):
        load_run(run)


def test_a_corrupt_checkpoint_is_not_resumed(run: Path) -> None:
    flip_tensor(run / "checkpoint.pt")
    with pytest.raises(CorruptArtifactError) as err:
        train(toy_kg(), cfg(epochs=3), run, resume=True, progress=False)
    assert err.value.path == str(run / "checkpoint.pt")


def test_cli_export_of_a_corrupt_model_is_one_line(run: Path, tmp_path: Path) -> None:
    flip_tensor(run / "model.pt")
    res = CliRunner().invoke(cli, ["export", str(run), "--threshold", "0.3", "--out", str(tmp_path / "e")])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "model.pt: checksum mismatch" in res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("at", [0.1, 0.5, 0.9])
def test_a_flipped_byte_in_an_export_file_is_refused(run: Path, tmp_path: Path, at: float) -> None:
    out = tmp_path / "export"
    manifest = export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    rel = manifest["relations"][0]
    assert rel[checksums.MANIFEST_KEY] == checksums.file_digest(out / rel["file"])
    load_adjacency(out)
    flip(out / rel["file"], at)
    with pytest.raises(CorruptArtifactError) as err:
        load_adjacency(out)
    assert err.value.path == str(out / rel["file"])


def _answers(tmp_path: Path) -> tuple[Path, Path]:
    qs = read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
    frame, _ = answer_query_set(qs, SRC.over(PREDICTED, "toy", backbone="m"), progress=False)
    meta = {"dataset": "toy", "method": "m SRC", "query_set": str(qs.path)}
    return qs.path, write_answers(frame, tmp_path / "a.parquet", meta)


def test_a_flipped_byte_in_a_query_set_or_answers_file_is_refused(tmp_path: Path) -> None:
    for path in _answers(tmp_path):
        reader = read_query_set if path.name.startswith("toy") else read_answers
        reader(path)
        checksums.verify_sealed_file(path)
        flip(path, 0.5)
        with pytest.raises(CorruptArtifactError) as err:
            reader(path)
        assert err.value.path == str(path)


def test_a_flipped_byte_in_a_witnesses_file_is_refused(tmp_path: Path) -> None:
    row = {
        "query_id": "q1", "query": "r(a, ?y)", "rank": 1, "entity": 3, "entity_name": "c", "utility": 0.5,
        "branch": 0, "witness": "{}", "atom": 0, "relation": "r", "head": "a", "tail": "c", "head_eid": 0,
        "tail_eid": 3, "negated": False, "confidence": 0.5, "source": "observed", "alpha": 0.0, "beta": 1.0,
        "value": 0.5,
    }
    path = write_witnesses([row] * 50, tmp_path / "a.witnesses.parquet",
                           {"dataset": "toy", "method": "m", "answers": "a.parquet", "k": 1})
    frame, _ = read_witnesses(path)
    assert len(frame) == 50
    flip(path, 0.5)
    with pytest.raises(CorruptArtifactError, match="a.witnesses.parquet: checksum mismatch"):
        read_witnesses(path)


def test_a_damaged_checksum_itself_is_refused(tmp_path: Path) -> None:
    path, _ = _answers(tmp_path)
    data = path.read_bytes()
    at = data.rfind(checksums.MARKER)
    path.write_bytes(data[:at] + b"X" + data[at + 1 :])  # the marker no longer found
    with pytest.raises(CorruptArtifactError, match=r"checksum \(Parquet metadata 'pipeline.checksum'\) is missing"):
        read_query_set(path)


def test_cli_answer_of_a_corrupt_query_set_is_one_line(tmp_path: Path) -> None:
    path, _ = _answers(tmp_path)
    flip(path, 0.4)
    res = CliRunner().invoke(cli, ["answer", str(path), "--adjacency", str(tmp_path)])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert f"{path}: checksum mismatch" in res.output


def test_query_set_checksum_covers_every_column(tmp_path: Path) -> None:
    qs = read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
    base = checksum(qs.frame)
    assert base == checksum(read_query_set(qs.path).frame)  # a content key: equal on every read
    frame = qs.frame.copy()
    atoms = [dict(a) for a in frame.at[0, "atoms"]]
    side = "head_eid" if atoms[0]["head_eid"] is not None else "tail_eid"
    atoms[0][side] = int(atoms[0][side]) + 1  # the text unchanged, the query not
    frame.at[0, "atoms"] = atoms
    assert checksum(frame) != base
    frame = qs.frame.copy()
    frame.at[0, "seed"] = 7
    assert checksum(frame) != base


def _without_checksum(path: Path, edit=None) -> None:
    """Rewrite a sealed Parquet file without its checksum key (after ``edit`` of its table): what deleting
    the key by hand, or a file written before checksums, looks like."""
    table = pq.read_table(path)
    table = edit(table) if edit is not None else table
    kept = {k: v for k, v in table.schema.metadata.items() if k != checksums.META_KEY}
    pq.write_table(table.replace_schema_metadata(kept), path)


def test_a_file_without_its_checksum_is_refused_as_a_wrong_one(tmp_path: Path) -> None:
    """The checksum key deleted from an edited answers file (its utilities negated) made evaluate report
    metrics from the edit; unedited but unsealed (an older file) is refused the same way, saying how to
    write it again."""
    import pyarrow.compute as pc

    from pipeline.stages.evaluate import evaluate_file

    qs_path, ans_path = _answers(tmp_path)
    evaluate_file(ans_path)

    def negate(table):
        i = table.schema.get_field_index("utility")
        return table.set_column(i, table.schema.field(i), pc.negate(table.column(i)))

    _without_checksum(ans_path, negate)
    with pytest.raises(CorruptArtifactError, match="is missing: the file was changed after it was written") as err:
        evaluate_file(ans_path)
    assert err.value.path == str(ans_path) and "pipeline answer" in str(err.value)
    _without_checksum(qs_path)
    with pytest.raises(CorruptArtifactError, match="pipeline sample") as err:
        read_query_set(qs_path)
    assert err.value.path == str(qs_path)


def test_metadata_without_its_digest_is_refused(tmp_path: Path) -> None:
    """A file sealed in its footer whose metadata carries no digest (a writer that stripped it and sealed
    the file again) is refused: every seal of the file must be there."""
    from pipeline.formats import meta as metafile

    qs_path, _ = _answers(tmp_path)
    table = pq.read_table(qs_path)
    doc = json.loads(table.schema.metadata[metafile.META_KEY])
    doc.pop("digest")
    kept = {k: v for k, v in table.schema.metadata.items() if k != checksums.META_KEY}
    metafile.write_parquet(table.replace_schema_metadata({**kept, metafile.META_KEY: json.dumps(doc).encode()}), qs_path)
    checksums.verify_sealed_file(qs_path)  # the file's own checksum holds
    with pytest.raises(CorruptArtifactError, match="the digest of its metadata is missing"):
        read_query_set(qs_path)


def test_a_run_without_its_checksums_is_refused(run: Path) -> None:
    """checksums.json deleted after config.json was edited: refused, not read as a run of older code."""
    doc = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**doc, "model_kwargs": {"l2": 0.5}}))
    (run / "checksums.json").unlink()
    with pytest.raises(CorruptArtifactError, match="checksums.json: the run's list of checksums is missing"):
        read_run(run)


def test_a_model_without_its_digest_is_refused(run: Path) -> None:
    """model.pt saved again without its digest (its weights tripled): refused before results.json is read."""
    doc = torch.load(run / "model.pt", weights_only=True)
    doc.pop(checksums.OBJECT_KEY)
    doc["state_dict"] = {k: v * 3 for k, v in doc["state_dict"].items()}
    torch.save(doc, run / "model.pt")
    with pytest.raises(CorruptArtifactError, match="model.pt: its checksum .* is missing"):
        load_run(run)


def test_an_export_without_its_digests_is_refused(run: Path, tmp_path: Path) -> None:
    from pipeline.core.provenance import seal

    out = tmp_path / "export"
    export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    doc = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({k: v for k, v in doc.items() if k != "digest"} | {"threshold": 0.9}))
    with pytest.raises(CorruptArtifactError, match="manifest.json: the digest of the manifest is missing"):
        load_adjacency(out)
    # a relation file listed without its digest (the manifest sealed again by hand)
    body = {k: v for k, v in doc.items() if k != "digest"}
    body["relations"][0].pop(checksums.MANIFEST_KEY)
    (out / "manifest.json").write_text(json.dumps(seal(body)))
    with pytest.raises(CorruptArtifactError, match=r"rel-0000.arrow: its checksum \(the manifest's 'sha256' entry\)"):
        load_adjacency(out)


def test_a_flipped_byte_in_a_saved_calibration_is_refused(tmp_path: Path) -> None:
    from pipeline.methods.src.affine import AffineCalibration, load_affine, save_affine

    calib = AffineCalibration(64, 32)
    save_affine(calib, tmp_path, {"key": "k"})
    again = load_affine(tmp_path, 64, 32)
    assert again is not None
    assert all(torch.equal(a, b) for a, b in zip(calib.state_dict().values(), again.state_dict().values(), strict=True))
    flip_tensor(tmp_path / "L.pt")
    with pytest.raises(CorruptArtifactError) as err:
        load_affine(tmp_path, 64, 32)
    assert err.value.path == str(tmp_path / "L.pt")


def test_a_file_rewritten_by_another_tool_is_refused(tmp_path: Path) -> None:
    """pyarrow rewriting a sealed file keeps the metadata but not the filled-in checksum (it holds the
    writer's blank): an edit such as a changed head_eid with the text unchanged is refused."""
    path, _ = _answers(tmp_path)
    table = pq.read_table(path)
    pq.write_table(table, path)
    with pytest.raises(CorruptArtifactError, match="rewritten after it was written"):
        read_query_set(path)


def test_a_damaged_export_is_exported_again_not_reused(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    first = export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    assert export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)["cached"]
    rel = first["relations"][0]
    flip(out / rel["file"], 0.5)
    again = export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    assert not again["cached"]
    assert checksums.file_digest(out / rel["file"]) == rel[checksums.MANIFEST_KEY]  # the same bytes again
    load_adjacency(out)


def test_a_damaged_checksum_list_is_refused_on_read_and_replaced_on_write(run: Path) -> None:
    from pipeline.models.runs import read_json, write_run_json

    flip(run / "checksums.json", 0.5)
    with pytest.raises(CorruptArtifactError, match="checksums.json"):
        read_run(run)
    write_run_json(run / "config.json", json.loads((run / "config.json").read_text()))  # e.g. train --resume
    assert set(json.loads((run / "checksums.json").read_text())["files"]) == {"config.json"}
    assert read_json(run / "config.json")["dataset"] == "toy"


def test_query_set_checksum_covers_the_answer_lists_and_their_bounds() -> None:
    """The answer columns are hashed as arrays: any value, and where one query's list ends, changes it."""
    import pandas as pd

    from pipeline.formats.queryset import checksum

    base = pd.DataFrame({"id": ["a", "b"], "answers_hard": [[1, 2], [3]], "utilities_hard": [[0.5, 0.25], [0.125]]})
    moved = base.assign(answers_hard=[[1], [2, 3]], utilities_hard=[[0.5], [0.25, 0.125]])
    other = base.assign(utilities_hard=[[0.5, 0.25], [0.126]])
    sums = {checksum(f) for f in (base, moved, other)}
    assert len(sums) == 3 and checksum(base.copy()) == checksum(base)


# ------------------------------------------------------------------------------------------------ seals
# The seals are plain digests, no keys (docs/store.md, "What the seals protect against, and what not"):
# an edit that computes the digest again is caught only where the file disagrees with itself or with the
# files beside it. A key per home was weighed and left out: files move between homes (a run copied to a GPU
# machine, an export shared with a colleague) and must load there.


def _reseal(out: Path, edit) -> None:
    from pipeline.core.provenance import seal

    doc = json.loads((out / "manifest.json").read_text())
    body = {k: v for k, v in doc.items() if k != "digest"}
    edit(body)
    (out / "manifest.json").write_text(json.dumps(seal(body)))


def test_a_resealed_manifest_is_caught_where_it_contradicts_itself_or_its_files(run: Path, tmp_path: Path) -> None:
    from pipeline.core.errors import ArtifactError

    out = tmp_path / "export"
    export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    pristine = (out / "manifest.json").read_text()
    nnz = json.loads(pristine)["nnz"]
    assert nnz == sum(r["nnz"] for r in json.loads(pristine)["relations"]) > 0
    cases = {
        "total facts": (lambda b: b.update(nnz=b["nnz"] + 1), f"its 'nnz' ({nnz + 1}) is not the sum over its relations ({nnz})"),
        "total bytes": (lambda b: b.update(bytes=b["bytes"] * 2), "its 'bytes'"),
        "a relation's facts": (lambda b: (b["relations"][0].update(nnz=b["relations"][0]["nnz"] + 1),
                                          b.update(nnz=b["nnz"] + 1)), "relation/size differ from the manifest"),
        "a relation's size": (lambda b: (b["relations"][0].update(bytes=b["relations"][0]["bytes"] + 8),
                                         b.update(bytes=b["bytes"] + 8)), "bytes, the manifest says"),
        "a count that is no count": (lambda b: b["relations"][0].update(nnz="12"), "a relation's 'nnz' is not a count"),
    }
    for name, (edit, needle) in cases.items():
        (out / "manifest.json").write_text(pristine)
        _reseal(out, edit)
        with pytest.raises(ArtifactError) as err:
            load_adjacency(out)
        assert needle in str(err.value) and "\n" not in str(err.value), name
    (out / "manifest.json").write_text(pristine)
    load_adjacency(out)


def test_sealed_files_load_in_another_home(run: Path, tmp_path: Path, monkeypatch) -> None:
    """What a key per home would break: a run, its export, a query set, an answers file and a saved L
    written under one PIPELINE_HOME are read under another one."""
    from pipeline.methods.src.affine import AffineCalibration, load_affine, save_affine, saved_config

    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home-a"))
    out = tmp_path / "export"
    export_adjacency(run, threshold=0.3, out=out, progress=False, allow_dense=True)
    qs_path, answers_path = _answers(tmp_path)
    save_affine(AffineCalibration(8, 4), tmp_path / "L", {"key": "k", "history": {"config": {"lr": 0.01}}})
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home-b"))
    assert load_run(run) is not None
    assert load_adjacency(out)[1]["nnz"] > 0
    assert len(read_query_set(qs_path).frame) > 0 and len(read_answers(answers_path).frame) > 0
    assert saved_config(tmp_path / "L").lr == 0.01 and load_affine(tmp_path / "L", 8, 4) is not None
