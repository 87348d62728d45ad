"""User data sets (loaders.user): reading named TSV/CSV/Parquet, the deterministic split, the record under
PIPELINE_HOME/datasets, and one error per bad input with nothing half-written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loaders import REGISTRY, get_spec, load, stage_user_files
from loaders.named_files import Columns, read_table
from loaders.split import split_rows, split_triples
from loaders.user import UserDatasetSpec
from pipeline.core.errors import DataFormatError, PipelineError, UnknownNameError

TOY = (
    "alice\tknows\tbob\t0.9\n"
    "bob\tknows\tcarol\t0.5\n"
    "alice\tknows\tbob\t0.7\n"  # duplicate row: mean-merged to 0.8
    "carol\tlikes\talice\t0.25\n"
    "bob\tlikes\tcarol\t1\n"
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PIPELINE_HOME of this test alone, so recorded user data sets never leak into other tests."""
    h = tmp_path / "home"
    monkeypatch.setenv("PIPELINE_HOME", str(h))
    return h


def _folder(root: Path, train: str = TOY, valid: str = "alice\tlikes\tcarol\t0.4\n",
            test: str = "carol\tknows\tbob\t0.6\nbob\tknows\talice\t0\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.tsv").write_text(train)
    (root / "valid.tsv").write_text(valid)
    (root / "test.tsv").write_text(test)
    return root


def _ingest(name: str, path: Path, **kw):
    with stage_user_files(name, path, **kw) as staged:
        kg = staged.load()
        spec = staged.commit()
    return staged, kg, spec


# ------------------------------------------------------------------------------------------------ reading


def test_tsv_csv_parquet_read_the_same_rows(tmp_path: Path) -> None:
    tsv = tmp_path / "kg.tsv"
    tsv.write_text(TOY)
    csv = tmp_path / "kg.csv"
    csv.write_text("head,relation,tail,confidence\n" + TOY.replace("\t", ","))
    pq_path = tmp_path / "kg.parquet"
    frame = read_table(tsv).drop(columns="line").rename(columns={"conf": "confidence"})
    frame.to_parquet(pq_path)
    a, b, c = (read_table(p).drop(columns="line") for p in (tsv, csv, pq_path))
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)
    assert a["conf"].tolist() == [0.9, 0.5, 0.7, 0.25, 1.0]
    assert read_table(csv)["line"].tolist() == [2, 3, 4, 5, 6]  # the header is line 1


def test_header_mapping_quoted_names_and_extra_columns(tmp_path: Path) -> None:
    p = tmp_path / "kg.csv"
    p.write_text('src,weight,note,rel,dst\n"Smith, J.",0.5,x,wrote,"Book ""A"""\n')
    frame = read_table(p, columns=Columns.parse("src,rel,dst,weight"))
    assert frame.iloc[0][["head", "relation", "tail", "conf"]].tolist() == ["Smith, J.", "wrote", 'Book "A"', 0.5]


@pytest.mark.parametrize(
    ("text", "suffix", "line", "field", "needle"),
    [
        ("a\tr\tb\t1.5\n", ".tsv", 1, "confidence", "outside [0, 1]"),
        ("a\tr\tb\t0.5\nb\tr\ta\t-0.1\n", ".tsv", 2, "confidence", "outside [0, 1]"),
        ("a\tr\tb\tnan\n", ".tsv", 1, "confidence", "not a number"),
        ("a\tr\tb\thigh\n", ".tsv", 1, "confidence", "not a number"),
        ("head,relation,tail\na,r,b\n", ".csv", 1, "confidence", "missing column 'confidence'"),
        ("a\tr\tb\n", ".tsv", 1, None, "expected 4 tab-separated fields"),
        ("a\t\tb\t0.5\n", ".tsv", 1, "relation", "empty"),
        ("\n\n", ".tsv", None, None, "empty: no facts"),
        ("head,relation,tail,confidence\n", ".csv", None, None, "empty: no facts"),
    ],
)
def test_bad_rows_name_file_line_field(tmp_path: Path, text, suffix, line, field, needle) -> None:
    p = tmp_path / f"kg{suffix}"
    p.write_text(text)
    with pytest.raises(DataFormatError) as info:
        read_table(p)
    assert (info.value.line, info.value.field) == (line, field)
    assert needle in str(info.value) and str(p) in str(info.value)


def test_parquet_missing_column(tmp_path: Path) -> None:
    p = tmp_path / "kg.parquet"
    pd.DataFrame({"head": ["a"], "relation": ["r"], "tail": ["b"]}).to_parquet(p)
    with pytest.raises(DataFormatError, match="missing column 'confidence'") as info:
        read_table(p)
    assert info.value.field == "confidence"


# ----------------------------------------------------------------------------------------------- splitting


def test_split_is_deterministic_and_keeps_valid_test_seen(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 400
    rows = pd.DataFrame({
        "head": [f"e{i}" for i in rng.integers(0, 40, n)],
        "relation": [f"r{i}" for i in rng.integers(0, 3, n)],
        "tail": [f"e{i}" for i in rng.integers(0, 40, n)],
        "conf": rng.random(n).round(3),
        "line": np.arange(1, n + 1),
    })
    a, b = split_rows(rows, (0.8, 0.1, 0.1), seed=7), split_rows(rows, (0.8, 0.1, 0.1), seed=7)
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k])
    c = split_rows(rows, (0.8, 0.1, 0.1), seed=8)
    assert not a["val"]["line"].equals(c["val"]["line"])  # the seed matters
    assert sum(len(x) for x in a.values()) == n and len(a["val"]) > 0 and len(a["test"]) > 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2), st.integers(0, 7), st.booleans()), min_size=1, max_size=60),
    st.integers(0, 2**16),
)
def test_split_property_every_moved_fact_is_seen_in_train(facts, seed) -> None:
    uniq = sorted({(h, r, t): m for h, r, t, m in facts}.items())
    h = np.array([k[0] for k, _ in uniq])
    r = np.array([k[1] for k, _ in uniq])
    t = np.array([k[2] for k, _ in uniq])
    movable = np.array([m for _, m in uniq])
    out = split_triples(h, r, t, movable, (0.5, 0.25, 0.25), seed)
    train = out == 0
    ents = set(h[train]) | set(t[train])
    assert set(r[~train]) <= set(r[train])
    assert set(h[~train]) <= ents and set(t[~train]) <= ents
    assert not (~train & ~movable).any()  # confidence-0 triples never leave train
    assert (out == 1).sum() <= round(0.25 * len(h)) and (out == 2).sum() <= round(0.25 * len(h))
    assert np.array_equal(out, split_triples(h, r, t, movable, (0.5, 0.25, 0.25), seed))


def test_one_file_keeps_all_rows_of_a_triple_together() -> None:
    rows = pd.DataFrame({
        "head": ["a", "a", "b", "c", "a", "b"], "relation": ["r"] * 6, "tail": ["b", "b", "c", "a", "c", "a"],
        "conf": [0.2, 0.4, 0.5, 0.6, 0.7, 0.8], "line": np.arange(1, 7),
    })
    for seed in range(20):
        parts = split_rows(rows, (0.34, 0.33, 0.33), seed)
        where = {int(ln): k for k, tab in parts.items() for ln in tab["line"]}
        assert where[1] == where[2]


# ----------------------------------------------------------------------------------------------- recording


def test_folder_ingest_loads_through_the_benchmark_loader(home: Path, tmp_path: Path) -> None:
    src = _folder(tmp_path / "kg")
    staged, kg, spec = _ingest("toy", src)
    assert isinstance(get_spec("toy"), UserDatasetSpec) and "toy" in REGISTRY
    kg2 = load("toy")
    assert kg2.entity_names() == ["alice", "bob", "carol"] == kg.entity_names()
    assert kg2.relation_names() == ["knows", "likes"]
    train = kg2.graph("train").set_index(["h", "r", "t"])["conf"].to_dict()
    assert train == {(0, 0, 1): pytest.approx(0.8), (1, 0, 2): 0.5, (2, 1, 0): 0.25, (1, 1, 2): 1.0}
    test = kg2.graph("test").set_index(["h", "r", "t"])["conf"].to_dict()
    assert test[(2, 0, 1)] == 0.6 and test[(0, 1, 2)] == 0.4 and len(test) == 6
    assert kg2.test_negatives[["h", "r", "t"]].values.tolist() == [[1, 0, 0]]  # c = 0 in test: a negative
    rec = home / "datasets" / "toy"
    assert sorted(p.name for p in rec.iterdir()) == ["spec.json", "test.tsv", "train.tsv", "valid.tsv"]
    row = next(r for r in REGISTRY.rows() if r["name"] == "toy")
    assert row["kind"] == "user" and row["source"] == str(src) and row["entities"] == 3
    assert staged.report["duplicate_rows"] == 1


def test_reingest_unchanged_is_a_no_op_and_changes_are_detected(home: Path, tmp_path: Path) -> None:
    src = _folder(tmp_path / "kg")
    _ingest("toy", src)
    before = (home / "datasets" / "toy" / "spec.json").stat().st_mtime_ns
    staged, _, _ = _ingest("toy", src)
    assert staged.unchanged and (home / "datasets" / "toy" / "spec.json").stat().st_mtime_ns == before
    (src / "train.tsv").write_text(TOY + "carol\tlikes\tbob\t0.3\n")
    staged, kg, _ = _ingest("toy", src)
    assert not staged.unchanged and len(load("toy").graph("train")) == 5 == len(kg.graph("train"))
    assert not [p for p in (home / "datasets").iterdir() if p.name.startswith(".")]  # no leftovers


def test_recorded_files_are_md5_checked(home: Path, tmp_path: Path) -> None:
    _ingest("toy", _folder(tmp_path / "kg"))
    with open(home / "datasets" / "toy" / "train.tsv", "a") as fh:
        fh.write("alice\tlikes\tbob\t0.1\n")
    with pytest.raises(PipelineError, match="md5"):
        load("toy")


@pytest.mark.parametrize(
    ("split", "text", "line", "field", "needle"),
    [
        ("valid", "dave\tlikes\tcarol\t0.4\n", 1, "head", "entity 'dave' does not occur in train"),
        ("test", "carol\tknows\tbob\t0.6\nbob\thates\talice\t0.5\n", 2, "relation", "relation 'hates'"),
        ("test", "carol\tknows\tzed\t0.6\n", 1, "tail", "entity 'zed'"),
        ("valid", "alice\tlikes\tcarol\t2\n", 1, "confidence", "outside [0, 1]"),
        ("valid", "", None, None, "empty"),
    ],
)
def test_bad_folder_leaves_no_record(home: Path, tmp_path: Path, split, text, line, field, needle) -> None:
    src = _folder(tmp_path / "kg", **{split: text})
    with pytest.raises(DataFormatError) as info:
        _ingest("toy", src)
    assert needle in str(info.value) and f"{split}.tsv" in info.value.path
    assert (info.value.line, info.value.field) == (line, field)
    assert not (home / "datasets" / "toy").exists()
    assert not list((home / "datasets").glob(".*")) if (home / "datasets").exists() else True
    with pytest.raises(UnknownNameError):
        get_spec("toy")


def test_names_benchmarks_cannot_be_shadowed(home: Path, tmp_path: Path) -> None:
    src = _folder(tmp_path / "kg")
    for bad in ("ppi5k", "PPI5k", "cn15k"):
        with pytest.raises(PipelineError, match="benchmark|lowercase"):
            stage_user_files(bad, src)
    with pytest.raises(PipelineError, match="lowercase"):
        stage_user_files("../x", src)


def test_one_file_split_records_settings_and_is_reproducible(home: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    lines = [f"n{rng.integers(0, 30)}\tr{rng.integers(0, 3)}\tn{rng.integers(0, 30)}\t{rng.random():.3f}" for _ in range(300)]
    f = tmp_path / "kg.tsv"
    f.write_text("\n".join(lines) + "\n")
    _, kg1, spec = _ingest("one", f, split="0.8,0.1,0.1", seed=5)
    first = (home / "datasets" / "one" / "valid.tsv").read_text()
    _ingest("one", f, split="0.8,0.1,0.1", seed=6)  # other settings: rebuilt
    assert (home / "datasets" / "one" / "valid.tsv").read_text() != first
    _ingest("one", f, split="0.8,0.1,0.1", seed=5)
    assert (home / "datasets" / "one" / "valid.tsv").read_text() == first
    counts = spec.facts
    assert sum(counts.values()) == 300 and counts["val"] > 0 and counts["test"] > 0


def test_team_example_answers_by_hand(home: Path) -> None:
    """README's worked example: on the test graph (every fact, whatever the split) the utilities are
    sums of two confidences, checked by hand; ann -> ben is the mean of its two rows (0.8)."""
    from pipeline.stages.ask import ask

    _ingest("team", Path(__file__).parent / "team.tsv", seed=0)
    ans = ask("mentors(?y, ?x, 0.5) & knows(?x, rust, 0.5)", "team", graph="test", top=10)
    got = {r["name"]: r["utility"] for r in ans.rows}
    # ben: mentors(ben, dee) .8 + knows(dee, rust) .9; ann: (ann, cy) .6 + .85; cy: (cy, eve) .7 + .6
    # (cy -> dee .4 fails alpha); dee: (dee, eve) .5 + .6; ann -> ben .8 + knows(ben, rust) .2 fails
    assert got == pytest.approx({"ben": 1.7, "ann": 1.45, "cy": 1.3, "dee": 1.1})
    assert [r["name"] for r in ans.rows] == ["ben", "ann", "cy", "dee"]


def test_parquet_name_with_a_line_break_is_refused(tmp_path: Path) -> None:
    """A recorded TSV line must stay one line: a name that str.splitlines would break is an error."""
    p = tmp_path / "kg.parquet"
    pd.DataFrame({"head": ["a", "b\u2028c"], "relation": ["r", "r"], "tail": ["b", "a"],
                  "confidence": [0.5, 0.6]}).to_parquet(p)
    with pytest.raises(DataFormatError, match="line break") as info:
        read_table(p)
    assert (info.value.line, info.value.field) == (2, "head")


@pytest.mark.parametrize("damage", ["flip", "[]", "null", "counts", "files", "name", "lines"])
def test_a_damaged_record_is_one_line_naming_it_and_ls_goes_on(home: Path, tmp_path: Path, damage: str) -> None:
    """One flipped bit, `[]`, `null` or a field of the wrong type in datasets/NAME/spec.json
    gave KeyError/AttributeError/TypeError tracebacks and broke `pipeline ls datasets` whole."""
    import json

    from click.testing import CliRunner

    from pipeline.cli import cli

    stage_user_files("good", _folder(tmp_path / "g")).commit()
    stage_user_files("hurt", _folder(tmp_path / "h")).commit()
    spec = home / "datasets" / "hurt" / "spec.json"
    text = spec.read_text()
    doc = json.loads(text)
    if damage == "flip":
        i = text.index('"counts"') + 2
        spec.write_bytes(text[:i].encode() + bytes([text.encode()[i] ^ 0x40]) + text[i + 1 :].encode())
    elif damage in ("[]", "null"):
        spec.write_text(damage)
    elif damage == "counts":
        spec.write_text(json.dumps({**doc, "counts": "many"}))
    elif damage == "files":
        spec.write_text(json.dumps({**doc, "files": [{"role": "train"}]}))
    elif damage == "name":
        spec.write_text(json.dumps({**doc, "name": 7}))
    else:
        spec.write_text(json.dumps({**doc, "files": [{**f, "lines": "x"} for f in doc["files"]]}))
    for args in (["query", "knows(alice, ?y)", "--dataset", "hurt", "--graph", "test"], ["train", "hurt", "--model", "ukge_logi", "--out", str(tmp_path / "r")]):
        res = CliRunner().invoke(cli, args)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.exit_code == 2 and len(lines) == 1 and str(spec) in lines[0], res.output
        assert "Traceback" not in res.output
    listed = CliRunner().invoke(cli, ["ls", "datasets", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["good"]["kind"] == "user" and rows["hurt"]["kind"] == "user (damaged record)"
    assert str(spec) in rows["hurt"]["source"] and "ppi5k" in rows
    assert load("good").n_entities == 3
