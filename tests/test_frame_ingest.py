"""A pandas DataFrame in: `pl.ingest(name, frame)` goes through the same validation, recording and
store load as a file of the same rows; errors name the row (by its index label, as pandas does) and the column; a split column decides the split."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pipeline as pl


@pytest.fixture
def store_env(fresh_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIPELINE_STORE", fresh_store.uri)
    return fresh_store.uri


def _frame(n: int = 30) -> pd.DataFrame:
    """A ring of n people, each knowing the next, and every third helping the one after next."""
    rows = [(f"p{i}", "knows", f"p{(i + 1) % n}", round(0.3 + 0.02 * i, 3)) for i in range(n)]
    rows += [(f"p{i}", "helps", f"p{(i + 2) % n}", 0.8) for i in range(0, n, 3)]
    return pd.DataFrame(rows, columns=["head", "relation", "tail", "confidence"])


def test_a_frame_and_a_file_of_the_same_rows_make_the_same_data_set(store_env: str, tmp_path: Path) -> None:
    frame = _frame()
    tsv = tmp_path / "same.tsv"
    frame.to_csv(tsv, sep="\t", index=False)
    from_frame = pl.ingest("from_frame", frame, progress=False)
    from_file = pl.ingest("from_file", source=tsv, progress=False)
    a = from_frame.facts.sort_values(["head", "relation", "tail"]).reset_index(drop=True)
    b = from_file.facts.sort_values(["head", "relation", "tail"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)  # the same rows in the same splits (same seed, same split rule)
    assert from_frame.stats()[["train", "valid", "test"]].equals(from_file.stats()[["train", "valid", "test"]])
    # the same frame again: nothing changes (no new record, the store's copy kept)
    again = pl.ingest("from_frame", frame.sample(frac=1.0, random_state=1), progress=False)
    pd.testing.assert_frame_equal(again.facts.sort_values(["head", "relation", "tail"]).reset_index(drop=True), a)


def test_a_split_column_decides_the_split(store_env: str) -> None:
    frame = _frame().assign(split="train")
    frame.loc[[0, 5], "split"] = "test"
    frame.loc[7, "split"] = "valid"
    ds = pl.ingest("split_col", frame, progress=False)
    got = ds.facts.groupby("split", observed=True).size().to_dict()
    assert got == {"train": len(frame) - 3, "val": 1, "test": 2}
    assert set(ds.facts[ds.facts["split"] == "test"]["head"]) == {"p0", "p5"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda f: f.assign(confidence=[*f["confidence"][:3], 1.5, *f["confidence"][4:]]),
         "DataFrame for 'bad', index 3, field 'confidence': 1.5 is outside [0, 1]"),
        (lambda f: f.assign(head=[*f["head"][:1], "a\tb", *f["head"][2:]]),
         "DataFrame for 'bad', index 1, field 'head': the name contains a tab"),
        (lambda f: f.rename(columns={"tail": "object"}), "DataFrame for 'bad', field 'tail': missing column 'tail'"),
        (lambda f: f.assign(split=["train"] * (len(f) - 1) + ["later"]),
         f"DataFrame for 'bad', index {len(_frame()) - 1}, field 'split': 'later' is not train, valid or test"),
        (lambda f: pd.concat([f.assign(split="train"), pd.DataFrame([{"head": "zed", "relation": "knows", "tail": "p1",
                                                                      "confidence": 0.5, "split": "test"}])]),
         f"DataFrame for 'bad', iloc {len(_frame())} (index 0, not unique), field 'head': entity 'zed' does not occur in train"),
        (lambda f: f.iloc[:0], "DataFrame for 'bad': empty: no facts"),
        # a complex confidence kept its real part, a bool became 1.0; a lone surrogate was a traceback
        (lambda f: f.assign(confidence=[0.5 + 0.7j, *f["confidence"][1:]]),
         "DataFrame for 'bad', index 0, field 'confidence': not a number: '(0.5+0.7j)' (a complex number)"),
        (lambda f: f.assign(confidence=f["confidence"].astype(complex)),
         "DataFrame for 'bad', index 0, field 'confidence': not a number: '(0.3+0j)' (a complex number)"),
        (lambda f: f.assign(confidence=[True, *f["confidence"][1:]]),
         "DataFrame for 'bad', index 0, field 'confidence': not a number: 'True' (a bool)"),
        (lambda f: f.assign(tail=pd.Series(["x\ud800", *f["tail"][1:]], dtype=object)),
         "DataFrame for 'bad', index 0, field 'tail': the name 'x\\ud800' is not valid Unicode: a lone surrogate"),
        # pandas' own name of a row: its label, whatever the index (f.loc['r3'])
        (lambda f: f.set_axis([f"r{i}" for i in range(len(f))]).assign(confidence=lambda g: g["confidence"].where(g.index != "r3", -1)),
         "DataFrame for 'bad', index 'r3', field 'confidence': -1.0 is outside [0, 1]"),
    ],
)
def test_a_bad_frame_names_the_row_and_column_and_records_nothing(store_env: str, change, message: str) -> None:
    with pytest.raises(pl.PipelineError) as info:
        pl.ingest("bad", change(_frame()), progress=False)
    assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(pl.PipelineError, match="unknown data set 'bad'"):
        _ = pl.dataset("bad").facts  # nothing recorded


def test_columns_map_other_names(store_env: str) -> None:
    frame = _frame().rename(columns={"head": "s", "relation": "p", "tail": "o", "confidence": "w"})
    ds = pl.ingest("mapped", frame, columns="s,p,o,w", progress=False)
    assert len(ds.facts) == len(frame)


def test_a_benchmark_name_with_a_frame_is_one_short_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pl.ingest('ppi5k', frame)` printed the whole frame as a folder name, then "File name too long"."""
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    with pytest.raises(pl.PipelineError) as info:
        pl.ingest("ppi5k", _frame(), quiet=True)
    assert str(info.value) == ("ingest ppi5k: a benchmark is read from its own files (source= is a folder holding "
                               "them, not a DataFrame); give your own KG another name")


def test_a_re_ingest_reports_the_splits_in_split_order(store_env: str, capsys) -> None:
    """The summary said "rows train 24 / val 3 / test 3" the first time and "rows test 3 / train 24 / val 3"
    on an unchanged re-run (the record's JSON keys read back sorted)."""
    frame = _frame()
    pl.ingest("order", frame, progress=False)
    first = capsys.readouterr().out
    pl.ingest("order", frame, progress=False)
    again = capsys.readouterr().out
    rows = [line.split("rows ", 1)[1].split(";")[0] for line in (first, again)]
    assert rows[0] == rows[1] and rows[0].startswith("train ") and " / val " in rows[0]
    assert "unchanged" in again
