"""Input files: a UTF-8 byte-order mark at the start of any input file is dropped (never glued to
the first name or header); a name holding a line break or a NUL is refused with file, line and field,
whether the break comes from a quoted CSV field spanning lines or the NUL from any format."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from loaders.base import parse_id_map, parse_triples
from loaders.named_files import read_table
from pipeline.core.errors import DataFormatError

BOM = "\ufeff"
ROWS = "ann\tknows\tbob\t0.9\nbob\tknows\tann\t0.5\n"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("kg.tsv", ROWS),  # headerless TSV: the BOM would have made '\ufeffann' an entity of its own
        ("kg.tsv", "head\trelation\ttail\tconfidence\n" + ROWS),  # the header is still recognised
        ("kg.csv", ROWS.replace("\t", ",")),
        ("kg.csv", "head,relation,tail,confidence\n" + ROWS.replace("\t", ",")),
        ("kg.txt", ROWS),
    ],
)
def test_a_bom_is_stripped_from_every_text_input(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_bytes((BOM + text).encode("utf-8"))
    frame = read_table(path)
    assert frame["head"].tolist() == ["ann", "bob"]
    assert sorted(set(frame["head"]) | set(frame["tail"])) == ["ann", "bob"]
    assert frame["line"].tolist() == ([2, 3] if text.startswith("head") else [1, 2])


def test_a_bom_is_stripped_from_benchmark_files(tmp_path: Path) -> None:
    ids = tmp_path / "entity_id.csv"
    ids.write_bytes((BOM + "ann,0\nbob,1\n").encode())
    assert parse_id_map(ids, header=False)["name"].tolist() == ["ann", "bob"]
    triples = tmp_path / "train.tsv"
    triples.write_bytes((BOM + "0\t0\t1\t0.5\n").encode())
    assert parse_triples(triples, 2, 1)[["h", "r", "t"]].values.tolist() == [[0, 0, 1]]
    named = tmp_path / "named.tsv"
    named.write_bytes((BOM + "ann\tknows\tbob\t0.5\n").encode())
    index: dict[str, int] = {}
    parse_triples(named, None, None, index, {})
    assert list(index) == ["ann", "bob"]


def test_a_quoted_csv_name_with_a_line_break_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kg.csv"
    path.write_text('head,relation,tail,confidence\nann,knows,bob,0.9\n"li\nne",knows,ann,0.5\nbob,knows,ann,0.1\n')
    with pytest.raises(DataFormatError) as err:
        read_table(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 3, "head")
    assert "contains a tab, a line break or a NUL" in str(err.value)


def test_a_multi_line_csv_record_keeps_later_line_numbers_right(tmp_path: Path) -> None:
    path = tmp_path / "kg.csv"
    # a quoted multi-line field in a column that is not a name (an extra column): the record is fine,
    # and the bad confidence two records later is reported at its real line (5), not the record count
    path.write_text('head,relation,tail,confidence,note\nann,knows,bob,0.9,"a\nb"\nbob,knows,ann,0.5,x\n'
                    'ann,knows,ann,2,y\n')
    with pytest.raises(DataFormatError) as err:
        read_table(path)
    assert (err.value.line, err.value.field) == (5, "confidence")


@pytest.mark.parametrize(
    ("name", "text", "line", "field"),
    [
        ("kg.tsv", "ann\tknows\tbob\t0.9\nbo\x00b\tknows\tann\t0.5\n", 2, "head"),
        ("kg.csv", "ann,knows,bob,0.9\nbob,kn\x00ows,ann,0.5\n", 2, "relation"),
        ("kg.csv", 'ann,knows,"b\x00ob",0.9\n', 1, "tail"),
    ],
)
def test_a_name_with_a_nul_is_refused(tmp_path: Path, name: str, text: str, line: int, field: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataFormatError) as err:
        read_table(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)


def test_a_parquet_name_with_a_nul_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kg.parquet"
    pd.DataFrame({"head": ["ann", "bob"], "relation": ["r", "r"], "tail": ["bob", "a\x00nn"],
                  "confidence": [0.5, 0.5]}).to_parquet(path)
    with pytest.raises(DataFormatError) as err:
        read_table(path)
    assert (err.value.line, err.value.field) == (2, "tail")


def test_benchmark_names_with_a_nul_are_refused(tmp_path: Path) -> None:
    ids = tmp_path / "entity_id.csv"
    ids.write_text("ann,0\nb\x00ob,1\n")
    with pytest.raises(DataFormatError) as err:
        parse_id_map(ids, header=False)
    assert (err.value.line, err.value.field) == (2, "name")
    named = tmp_path / "named.tsv"
    named.write_text("ann\tknows\tbob\t0.5\nann\tkn\x00ows\tbob\t0.5\n")
    with pytest.raises(DataFormatError) as err:
        parse_triples(named, None, None, {}, {})
    assert (err.value.line, err.value.field) == (2, "relation")
