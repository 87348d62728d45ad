"""The first hour with your own KG, end to end from the CLI on a small real graph that a package
ships: networkx's Les Miserables co-occurrences (77 characters, 254 weighted edges, both directions, weights
over the largest), through ingest, query by name, train with the defaults, export and query the export.
Every expectation is computed independently from networkx's graph."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import cli


def _run(*args: str, ok: bool = True):
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    if ok:
        assert res.exit_code == 0, res.output
    return res


def lesmis_file(folder: Path) -> tuple[Path, dict[tuple[str, str], float]]:
    """A user KG file of Les Miserables: head, relation, tail, confidence (weight / max weight, 4 decimals)."""
    # skipped here, not at import: every test module imports without optional packages (tests/test_meta.py)
    nx = pytest.importorskip("networkx")
    g = nx.les_miserables_graph()
    top = max(w for _, _, w in g.edges(data="weight"))
    conf = {}
    for u, v, w in g.edges(data="weight"):
        conf[(u, v)] = conf[(v, u)] = round(w / top, 4)
    path = folder / "lesmis.tsv"
    path.write_text("head\trelation\ttail\tconfidence\n"
                    + "".join(f"{h}\tco_occurs\t{t}\t{c}\n" for (h, t), c in conf.items()), encoding="utf-8")
    return path, conf


def test_lesmis_from_ingest_to_an_exported_query(fresh_store, tmp_path: Path) -> None:
    path, conf = lesmis_file(tmp_path)
    assert len(conf) == 508
    _run("ingest", "lesmis", "--from", str(path), "--store", fresh_store.uri, "--seed", "0")

    # a query by name on the observed test graph (all facts): Valjean's co-occurrences of at least 0.5
    got = json.loads(_run("query", "co_occurs(Valjean, ?y, 0.5)", "--dataset", "lesmis", "--graph", "test",
                          "--json").stdout)
    want = {t: c for (h, t), c in conf.items() if h == "Valjean" and c >= 0.5}
    assert {r["name"]: r["utility"] for r in got} == pytest.approx(want)

    # no answer: one line that names the atom and the best confidence there is
    best = max(c for (h, _), c in conf.items() if h == "Myriel")
    out = _run("query", "co_occurs(Myriel, ?y, 0.9)", "--dataset", "lesmis", "--graph", "test").stdout
    assert "0 answers" in out
    assert (f"no answer: co_occurs(Myriel, ?y, 0.9): no fact meets alpha 0.9 on graph test "
            f"(best confidence {best:g}); try alpha <= {best:g}") in out

    # training with the defaults: 406 train facts are 17 steps of 25, not 1 step of 1024, and the run beats
    # predicting the mean confidence
    run = tmp_path / "run"
    out = _run("train", "lesmis", "--model", "ukge_logi", "--dim", "32", "--epochs", "40", "--seed", "0",
               "--out", str(run), "--device", "cpu").stdout
    assert "406 train facts, batch size 25 (17 steps per epoch; fitted to the graph: the model's default 1024 gives 1" in out
    m = re.search(r"valid MSE ([0-9.]+), predicting the mean confidence \(([0-9.]+)\) ([0-9.]+)", out)
    assert m and float(m.group(1)) < float(m.group(3)) and "no better than" not in out
    results = json.loads((run / "results.json").read_text())
    train_mean = sum(c for c in conf.values()) / len(conf)
    assert results["mean_predictor"]["confidence"] == pytest.approx(train_mean, abs=0.02)  # train is 80%
    # the reference batch size, for one epoch: one step, and the summary says the model learned nothing useful
    out = _run("train", "lesmis", "--model", "ukge_logi", "--dim", "32", "--epochs", "1", "--batch-size", "1024",
               "--out", str(tmp_path / "one"), "--device", "cpu").stdout
    assert "batch size 1024 (1 steps per epoch)" in out
    assert "warning: the model is no better than predicting the mean confidence" in out

    # export and a 2-hop query over it, explained: every atom's numbers in one column
    exp = tmp_path / "exp"
    out = _run("export", str(run), "--threshold", "0.1", "--out", str(exp)).stdout
    share = float(re.search(r"\(([0-9.]+)% of all \(h, r, t\) pairs\)", out).group(1))
    assert 0 < share < 100 / 3
    out = _run("query", "co_occurs(Valjean, ?x, 0.1) & co_occurs(?x, ?y, 0.1)", "--dataset", "lesmis",
               "--adjacency", str(exp), "--top", "3", "--explain").stdout
    answers = [line for line in out.splitlines() if line.startswith("#")]
    atoms = [line for line in out.splitlines() if " c=" in line]
    assert len(answers) == 3 and len(atoms) == 6 and len({line.index(" c=") for line in atoms}) == 1
    # and an empty one over the export says where it looked
    out = _run("query", "co_occurs(Myriel, ?y, 0.99)", "--dataset", "lesmis", "--adjacency", str(exp)).stdout
    assert "no answer: co_occurs(Myriel, ?y, 0.99): no fact meets alpha 0.99 in the export (facts >= 0.1)" in out


@pytest.mark.slow
@pytest.mark.browser
def test_lesmis_page_reads_at_the_default_zoom(fresh_store, tmp_path: Path) -> None:
    """Typed queries get ids in creation order, the negated atom's anchor is drawn as an anchor, the page's
    names and edge labels are readable in a 1400 x 900 window, and a text that did not parse says so."""
    pytest.importorskip("neo4j_viz", reason="the [browse] extra (neo4j-viz) is not installed")
    from pipeline.stages.browse import ANCHOR, read_page_graph
    from tests.answer.test_browse import CHROMIUM, assert_readable, rendered_font_sizes

    path, _ = lesmis_file(tmp_path)
    uri = fresh_store.uri
    _run("ingest", "lesmis", "--from", str(path), "--store", uri, "--seed", "0")
    run, exp = tmp_path / "run", tmp_path / "exp"
    _run("train", "lesmis", "--model", "ukge_logi", "--dim", "32", "--epochs", "40", "--out", str(run), "--device", "cpu")
    _run("export", str(run), "--threshold", "0.1", "--out", str(exp))
    texts = ["co_occurs(Valjean, ?y, 0.2) & !co_occurs(Javert, ?y, 0.6, 0.5)",  # created first: t0
             "co_occurs(Valjean, ?x, 0.2) & co_occurs(?x, ?y, 0.2)",
             "co_occurs(Valjean, ?y, 0.5"]  # does not parse
    for text in texts:
        fresh_store.run("CREATE (:Query {dataset: 'lesmis', text: $t})", {"t": text})
    _run("answer", "--from-store", "--adjacency", str(exp), "--store", uri, "--out", str(tmp_path / "ans"),
         "--write-back", "--explain", "5")
    ids = {r["text"]: r["qid"] for r in fresh_store.run(
        "MATCH (q:Query {dataset: 'lesmis', set: 'typed'}) RETURN q.qid AS qid, q.text AS text")}
    assert [ids[t] for t in texts] == ["t0", "t1", "t2"]
    g = read_page_graph(fresh_store, "t0", dataset="lesmis")
    javert = next(n for n in g.nodes if n["caption"] == "Javert")
    assert javert["color"] == ANCHOR
    bad = _run("browse", "t2", "--dataset", "lesmis", "--html", str(tmp_path / "t2.html"), "--store", uri, ok=False)
    assert bad.exit_code == 2 and "t2's text did not parse" in bad.output and "0 methods" not in bad.output
    if CHROMIUM is None:
        pytest.skip("no chromium (Debian package chromium) on this machine")
    for qid in ("t0", "t1"):
        page = tmp_path / f"{qid}.html"
        _run("browse", qid, "--dataset", "lesmis", "--html", str(page), "--store", uri)
        g = read_page_graph(fresh_store, qid, dataset="lesmis")
        captions = [n["caption"] for n in g.nodes if n["id"].startswith("e:")]
        sizes = rendered_font_sizes(page, tmp_path, captions)
        # a long name wraps inside its node: check the names NVL draws whole
        whole = [c for c in captions if c in sizes]
        assert whole
        assert_readable(sizes, whole, [e["caption"] for e in g.edges if e["caption"]])


def test_lesmis_from_python_equals_the_cli(fresh_store, tmp_path: Path) -> None:
    """The same first hour through `import pipeline as pl` (with the Python API): ingest, a query
    by name with its explanation, train with the defaults, export, a query over the export; the answers
    equal the CLI's and the explanation's atom values sum to each utility."""
    import pipeline as pl

    path, conf = lesmis_file(tmp_path)
    ds = pl.ingest("lesmis", source=path, store=fresh_store.uri, seed=0, progress=False)
    assert len(ds.entities) == 77
    r = pl.query("co_occurs(Valjean, ?y, 0.5)", dataset="lesmis", graph="test", explain=2)
    want = {t: c for (h, t), c in conf.items() if h == "Valjean" and c >= 0.5}
    assert dict(zip(r.frame["name"], r.frame["utility"], strict=True)) == pytest.approx(want)
    for e, u in zip(r.explanations, r.frame["utility"][:2], strict=False):
        assert sum(a.value for a in e.atoms) == pytest.approx(u, abs=1e-6)
    run = pl.train("lesmis", model="ukge_logi", dim=32, epochs=40, seed=0, device="cpu", out=tmp_path / "run",
                   progress=False)
    exp = pl.export(run, threshold=0.1, out=tmp_path / "exp", progress=False)
    text = "co_occurs(Valjean, ?x, 0.1) & co_occurs(?x, ?y, 0.1)"
    api = pl.query(text, dataset="lesmis", adjacency=exp, top=5).frame
    cli_rows = json.loads(_run("query", text, "--dataset", "lesmis", "--adjacency", str(exp.path), "--top", "5",
                               "--json").stdout)
    assert api["name"].tolist() == [row["name"] for row in cli_rows]
    assert api["utility"].tolist() == pytest.approx([row["utility"] for row in cli_rows])
