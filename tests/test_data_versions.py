"""Files bound to their data: a query set, a run and its export record the content key of
the data set version they came from, and work that brings two versions together is refused in one line
naming both keys: a user KG re-ingested with two entity names swapped (the same counts, the same ids,
other meanings) makes its old export and its old query sets unusable against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.core.versions import DataVersionMismatch, check_versions
from pipeline.formats.adjacency import read_manifest
from pipeline.formats.queryset import read_query_set
from pipeline.store.ingest import content_key


def run(*args: str, ok: bool = True):
    res = CliRunner().invoke(cli, list(args))
    if ok:
        assert res.exit_code == 0, res.output
    return res


def refused(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("note:")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def kg_file(path: Path, swap: tuple[str, str] | None = None) -> Path:
    """A small user KG: a ring and chords over 12 people, two relations; ``swap`` exchanges two names."""
    names = [f"p{i}" for i in range(12)]
    if swap:
        a, b = names.index(swap[0]), names.index(swap[1])
        names[a], names[b] = names[b], names[a]
    rows = [(names[i], "knows", names[(i + 1) % 12], round(0.3 + 0.05 * i, 2)) for i in range(12)]
    rows += [(names[i], "likes", names[(i + 5) % 12], round(0.9 - 0.05 * i, 2)) for i in range(12)]
    path.write_text("head\trelation\ttail\tconfidence\n" + "".join(f"{h}\t{r}\t{t}\t{c}\n" for h, r, t, c in rows))
    return path


def test_two_versions_are_never_mixed_and_older_files_get_a_note(fresh_store, tmp_path, capsys):
    uri = fresh_store.uri
    run("ingest", "ring", "--from", str(kg_file(tmp_path / "v1.tsv")), "--store", uri, "--split", "0.5,0.25,0.25")
    from loaders import load

    v1 = content_key(load("ring"))
    run("train", "ring", "--model", "ukge_logi", "--dim", "8", "--epochs", "2", "--out", str(tmp_path / "run1"),
        "--device", "cpu")
    run("export", str(tmp_path / "run1"), "--threshold", "0.5", "--allow-dense", "--out", str(tmp_path / "exp1"))
    assert read_manifest(tmp_path / "exp1")["dataset_version"] == v1
    run("sample", "ring", "--out", str(tmp_path / "qs1"), "--types", "1p", "--per-type", "3", "--store", uri,
        "--no-browse")
    qs1 = next((tmp_path / "qs1").glob("*.parquet"))
    assert read_query_set(qs1).meta["dataset_version"] == v1

    # the same counts, two names swapped: every id of p3 and p7 now means the other person
    run("ingest", "ring", "--from", str(kg_file(tmp_path / "v2.tsv", swap=("p3", "p7"))), "--store", uri,
        "--split", "0.5,0.25,0.25")
    v2 = content_key(load("ring"))
    assert v2 != v1
    line = refused(run("query", "knows(p3, ?y)", "--dataset", "ring", "--adjacency", str(tmp_path / "exp1"),
                       ok=False), v1[:12], v2[:12], "exp1")
    assert "another version of 'ring'" in line

    run("train", "ring", "--model", "ukge_logi", "--dim", "8", "--epochs", "2", "--out", str(tmp_path / "run2"),
        "--device", "cpu")
    run("export", str(tmp_path / "run2"), "--threshold", "0.5", "--allow-dense", "--out", str(tmp_path / "exp2"))
    refused(run("answer", str(qs1), "--adjacency", str(tmp_path / "exp2"), "--out", str(tmp_path / "ans"),
                "--workers", "1", ok=False), v1[:12], v2[:12], qs1.name)
    # the old pair still agrees with itself (answers in the version it was made in); explaining names
    # entities as they are now: refused
    run("answer", str(qs1), "--adjacency", str(tmp_path / "exp1"), "--out", str(tmp_path / "ans"), "--workers", "1")
    refused(run("answer", str(qs1), "--adjacency", str(tmp_path / "exp1"), "--out", str(tmp_path / "ans"),
                "--workers", "1", "--explain", "2", ok=False), v1[:12], v2[:12])
    got = json.loads(run("query", "knows(p3, ?y)", "--dataset", "ring", "--adjacency", str(tmp_path / "exp2"),
                         "--json").stdout)
    assert isinstance(got, list)  # the new export of the new version: accepted


def test_the_version_check_by_hand(capsys):
    assert check_versions("d", [("a", "k1"), ("b", "k1"), ("c", None)]) == "k1"
    assert "note: c records no version of 'd'" in capsys.readouterr().err
    assert check_versions("d", [("a", None), ("b", None)]) is None
    assert capsys.readouterr().err == ""  # nothing to compare with: nothing said
    with pytest.raises(DataVersionMismatch, match=r"b was made from another version of 'd' than a \(content keys k2 and k1\)"):
        check_versions("d", [("a", "k1"), ("c", None), ("b", "k2")])
