"""The artifact formats: metadata that is truncated, incomplete or edited after writing gives one clear
error naming the file (never a traceback), and every CLI reader reports it in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core import checksums
from pipeline.core.errors import ArtifactError
from pipeline.core.provenance import is_sealed, seal
from pipeline.formats import meta as metafile
from pipeline.formats.answers import read_answers, write_answers
from pipeline.formats.queryset import read_query_set
from pipeline.methods import SRC
from pipeline.stages.answer import answer_query_set
from tests.answer.toy import PREDICTED, write_toy_query_set


def _rewrite_meta(path: Path, raw: bytes) -> None:
    """Replace a Parquet file's `pipeline` metadata bytes, as a hand edit or a truncated copy would, and seal
    the file again (an edit that keeps or drops the file's checksum is refused earlier: tests/formats/
    test_checksums.py); what remains are the checks of the metadata itself."""
    table = pq.read_table(path)
    kept = {k: v for k, v in table.schema.metadata.items() if k != checksums.META_KEY}
    metafile.write_parquet(table.replace_schema_metadata({**kept, metafile.META_KEY: raw}), path)


@pytest.fixture()
def answers_file(tmp_path: Path) -> Path:
    qs = read_query_set(write_toy_query_set(tmp_path / "toy_test.parquet"))
    frame, _ = answer_query_set(qs, SRC.over(PREDICTED, "toy", backbone="m"), progress=False)
    meta = {"dataset": "toy", "method": "m SRC", "query_set": str(qs.path)}
    return write_answers(frame, tmp_path / "answers" / "a.parquet", meta)


def test_seal_detects_any_edit() -> None:
    meta = seal({"dataset": "toy", "threshold": 0.1, "nested": {"k": [1, 2]}})
    assert is_sealed(meta)
    assert not is_sealed({**meta, "dataset": "ppi5k"})
    assert not is_sealed({**meta, "nested": {"k": [1, 3]}})
    assert not is_sealed({k: v for k, v in meta.items() if k != "digest"})


def test_truncated_missing_and_edited_metadata(answers_file: Path) -> None:
    raw = (pq.read_schema(answers_file).metadata or {})[metafile.META_KEY]
    doc = json.loads(raw)
    assert read_answers(answers_file).meta["provenance"]["versions"]["python"]
    cases = [
        (raw[: len(raw) // 2], "not valid JSON"),
        (json.dumps({k: v for k, v in doc.items() if k not in ("dataset", "digest")}).encode(), "lacks 'dataset'"),
        (json.dumps({**doc, "dataset": "ppi5k"}).encode(), "edited after it was written"),  # relabelled
        (b"[1, 2]", "not a JSON object"),
    ]
    for bad, message in cases:
        _rewrite_meta(answers_file, bad)
        with pytest.raises(ArtifactError, match=message) as err:
            read_answers(answers_file)
        assert str(answers_file) in str(err.value)


def test_cli_evaluate_reports_a_bad_file_and_goes_on_in_a_folder(answers_file: Path) -> None:
    good = answers_file.with_name("b.parquet")
    good.write_bytes(answers_file.read_bytes())
    raw = (pq.read_schema(answers_file).metadata or {})[metafile.META_KEY]
    _rewrite_meta(answers_file, raw[:-10])
    res = CliRunner().invoke(cli, ["evaluate", str(answers_file)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "not valid JSON" in res.output
    res = CliRunner().invoke(cli, ["evaluate", str(answers_file.parent), "--json"])
    assert res.exit_code == 0, res.output
    reports = json.loads(res.stdout)
    assert [Path(r["file"]).name for r in reports] == ["b.parquet"]
    assert "a.parquet" in res.stderr and "(skipped)" in res.stderr


def test_cli_answer_on_a_query_set_without_dataset(tmp_path: Path) -> None:
    path = write_toy_query_set(tmp_path / "toy_test.parquet")
    doc = json.loads((pq.read_schema(path).metadata or {})[metafile.META_KEY])
    _rewrite_meta(path, json.dumps({k: v for k, v in doc.items() if k not in ("dataset", "digest")}).encode())
    res = CliRunner().invoke(cli, ["answer", str(path), "--adjacency", str(tmp_path)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "lacks 'dataset'" in res.output


def test_non_finite_utilities_are_never_written_nor_evaluated(answers_file: Path) -> None:
    """A NaN or +inf utility (what a diverged calibration L produced) or an answer without a finite true
    utility: the writer refuses to write it and evaluate refuses to read it (it reported metrics before)."""
    import numpy as np
    import pyarrow as pa

    from pipeline.core.errors import PipelineError
    from pipeline.stages.evaluate import evaluate_file

    ans = read_answers(answers_file)
    for column, value, why in (("utility", np.nan, "predicted utilities are NaN or \\+inf"),
                               ("utility", np.inf, "predicted utilities are NaN or \\+inf"),
                               ("truth_utility", np.nan, "ground-truth answers have no finite true utility")):
        frame = ans.frame.copy()
        rows = frame.index[frame["truth_rank"] > 0][:1] if column == "truth_utility" else frame.index[:2]
        frame.loc[rows, column] = value
        with pytest.raises(PipelineError, match=why):
            write_answers(frame, answers_file.with_name("bad.parquet"), ans.meta)
        assert not answers_file.with_name("bad.parquet").exists()
        # the same rows sealed by the Parquet writer itself (a file of older code): refused on reading
        table = pq.read_table(answers_file)
        out = pa.Table.from_pandas(frame[table.column_names], schema=table.schema, preserve_index=False)
        kept = {k: v for k, v in table.schema.metadata.items() if k != checksums.META_KEY}
        metafile.write_parquet(out.replace_schema_metadata(kept), answers_file.with_name("old.parquet"))
        with pytest.raises(ArtifactError, match=f"old.parquet: .*{why}"):
            evaluate_file(answers_file.with_name("old.parquet"))
