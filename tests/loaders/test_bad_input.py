"""Bad input gets one clear error naming file, line and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loaders import get_spec, load
from loaders.base import parse_id_map, parse_triples
from pipeline.core.errors import ChecksumError, DataFormatError, PipelineError
from tests.conftest import require_data


def _tiny_ids_dataset(folder: Path, train: str) -> Path:
    """A hand-made data set in PPI5k's layout (id maps without header, CRLF)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "entity_id.csv").write_bytes(b"a,0\r\nb,1\r\nc,2\r\n")
    (folder / "relation_id.csv").write_bytes(b"likes,0\r\nknows,1\r\n")
    (folder / "train.tsv").write_text(train)
    (folder / "val.tsv").write_text("0\t1\t2\t0.5\n")
    (folder / "test.tsv").write_text("1\t1\t2\t0.25\n")
    return folder


def test_tiny_dataset_loads_with_hand_computed_graphs(tmp_path: Path) -> None:
    src = _tiny_ids_dataset(tmp_path / "d", "0\t0\t1\t0.2\n0\t0\t1\t0.6\n0\t1\t2\t0.9\n")
    kg = load("ppi5k", source=src, verify=False)
    assert kg.entity_names() == ["a", "b", "c"]
    train = kg.graph("train").set_index(["h", "r", "t"])["conf"].to_dict()
    assert train == {(0, 0, 1): pytest.approx(0.4), (0, 1, 2): 0.9}
    valid = kg.graph("valid").set_index(["h", "r", "t"])["conf"].to_dict()
    assert valid[(0, 1, 2)] == pytest.approx((0.9 + 0.5) / 2)  # mean over all rows of included splits
    test = kg.graph("test").set_index(["h", "r", "t"])["conf"].to_dict()
    assert test[(1, 1, 2)] == 0.25 and len(test) == 3


@pytest.mark.parametrize(
    ("train", "line", "field", "needle"),
    [
        ("0\t0\t1\t0.5\n0\t0\t1\n", 2, None, "expected 4 tab-separated fields"),
        ("0\t0\t1\t0.5\n0\t0\t2\t1.5\n", 2, "confidence", "outside [0, 1]"),
        ("0\t0\t1\tabc\n", 1, "confidence", "not a number"),
        ("0\t0\t1\tnan\n", 1, "confidence", "outside [0, 1]"),
        ("0\t0\t1\t0.5\n0\t0\t1\t0.5\n7\t0\t1\t0.5\n", 3, "head", "out of range 0..2"),
        ("0\t5\t1\t0.5\n", 1, "relation", "out of range 0..1"),
        ("0\t0\tx\t0.5\n", 1, "tail", "not an integer"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path: Path, train, line, field, needle) -> None:
    src = _tiny_ids_dataset(tmp_path / "d", train)
    with pytest.raises(DataFormatError) as err:
        load("ppi5k", source=src, verify=False)
    assert err.value.line == line and err.value.field == field
    assert str(src / "train.tsv") in str(err.value) and needle in str(err.value)


def test_bad_id_map(tmp_path: Path) -> None:
    p = tmp_path / "ids.csv"
    p.write_bytes(b"a,0\r\nb,two\r\n")
    with pytest.raises(DataFormatError, match=r"line 2, field 'id'"):
        parse_id_map(p, header=False)
    p.write_bytes(b"a,0\r\nb,2\r\n")
    with pytest.raises(DataFormatError, match="id 1 is missing"):
        parse_id_map(p, header=False)


def test_names_with_commas_keep_the_last_field_as_id(tmp_path: Path) -> None:
    p = tmp_path / "ids.csv"
    p.write_bytes(b"vertex,vid\r\nnew york, ny,0\r\n")
    table = parse_id_map(p, header=True)
    assert table["name"].tolist() == ["new york, ny"]


def test_wrong_checksum_is_refused(tmp_path: Path) -> None:
    real = require_data("ppi5k")
    copy = tmp_path / "ppi5k"
    shutil.copytree(real, copy)
    (copy / "val.tsv").chmod(0o644)
    with open(copy / "val.tsv", "a") as fh:
        fh.write("0\t0\t1\t0.5\n")
    with pytest.raises(ChecksumError, match=r"val\.tsv: md5 .* does not match the published 2bd0941"):
        load("ppi5k", source=copy)


def test_missing_source_folder_and_file(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="not a directory"):
        load("ppi5k", source=tmp_path / "nope")
    src = _tiny_ids_dataset(tmp_path / "d", "0\t0\t1\t0.5\n")
    (src / "val.tsv").unlink()
    with pytest.raises(PipelineError, match="missing file val.tsv"):
        load("ppi5k", source=src, verify=False)


def test_non_utf8_file_names_its_line(tmp_path: Path) -> None:
    p = tmp_path / "t.tsv"
    p.write_bytes(b"0\t0\t1\t0.5\n0\t0\t\xff\t0.5\n")
    with pytest.raises(DataFormatError, match="line 2"):
        parse_triples(p, 3, 1)


def test_onet_loader_maps_names_in_first_appearance_order(tmp_path: Path) -> None:
    """O*NET's files are not reachable here: the loader reads a small file in the upstream format."""
    src = tmp_path / "onet20k"
    src.mkdir()
    (src / "train.tsv").write_text(
        "Job_27-1021.00\thas_ability_LV\t1.A.1.b.2\t0.6257143\n"
        "Job_27-1021.00\thas_skill_IM\t2.B.1.a\t0.5\n"
        "Job_11-1011.00\thas_ability_LV\t1.A.1.b.2\t0.25\n"
    )
    (src / "valid.tsv").write_text("Job_11-1011.00\thas_skill_IM\t2.B.1.a\t0.75\n")
    (src / "test.tsv").write_text("Job_99-0000.00\thas_skill_IM\t1.A.1.b.2\t0.1\n")
    kg = load("onet20k", source=src, verify=False)
    assert kg.entity_names() == ["Job_27-1021.00", "1.A.1.b.2", "2.B.1.a", "Job_11-1011.00", "Job_99-0000.00"]
    assert kg.relation_names() == ["has_ability_LV", "has_skill_IM"]
    assert len(kg.graph("train")) == 3 and len(kg.graph("valid")) == 4 and len(kg.graph("test")) == 5
    with pytest.raises(ChecksumError):
        load("onet20k", source=src)  # the published md5 sums are checked by default
    assert get_spec("ONET20K").name == "onet20k"
