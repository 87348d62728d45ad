"""Hostile inputs at every door, as a hostile user tries them: a generated table of cases in eight categories
(options in another case, control characters in names, undecodable bytes, lone surrogates, JSON nested too
deeply, duplicated columns, zero/inf/nan numbers, unknown names in lists), each run through the real
command line (click's runner, in this process) and, where it has one, the Python API.

Every case ends one of two ways, never with a traceback:

- refused: exit code 2 and exactly one line on stderr, ``error: ...``, naming the input (the option as
  typed, the file and line, the row and field); in Python one :class:`pipeline.PipelineError` of one line;
- accepted: exit code 0, and where something was taken one way of several (names merged by spacing, a
  damaged file skipped), the line that says so is shown; ``check`` then asserts what was done (a
  canonical name recorded, so the next stage accepts it).

The world is a 12-person KG recorded as user data set ``hostile`` with query sets, a trained run, its export
and an answers file, all made without the graph store; the few cases that need the store (sampling,
``stats``, an ingest) use a graph of the session's FalkorDB server, and every refusal that could reach a
store is given ``--store bolt://127.0.0.1:1`` (nothing listens there) to show it never does.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner

import pipeline as pl
from pipeline.cli import cli

DEAD = "bolt://127.0.0.1:1"  # a store URI nothing answers: a refusal must come before any store is opened
S = "\udcff"  # an undecodable byte (0xff) of an argument, as Python hands it over
ESC = "evil\x1b]0;PWNED\x07"
DEEP = 50_000  # levels of a JSON document nested too deeply for Python's reader (a 100 KB file)
CATEGORIES = ("other case", "control characters", "bad bytes", "surrogates", "nested JSON", "duplicated columns",
              "zero/inf/nan", "unknown names")


@dataclass(frozen=True)
class Case:
    """One hostile input. ``cli``: the arguments after ``pipeline`` (``{key}`` filled from the world's paths,
    ``{out}`` a fresh folder per case); ``api``: the same input through Python (None: the command has no
    Python door); ``needle``: what the refusal line must hold (``api_needle`` in Python, where the option is
    spelled otherwise); ``ok``: the input is accepted, showing this line ("" for none; ``api_ok`` in
    Python); ``check(world, out)``: what an accepted command did; ``store``: needs the ingested data set in
    the store."""

    category: str
    name: str
    cli: tuple[str, ...] = ()
    api: Callable[[World], Any] | None = None
    needle: str = ""
    api_needle: str | None = None
    ok: str | None = None
    api_ok: str = ""
    check: Callable[[World, str], None] | None = None
    store: bool = False


@dataclass
class World:
    root: Path
    paths: dict[str, str]
    store_uri: str = ""
    n: count = count()

    def out(self) -> str:
        return str(self.root / "out" / f"c{next(self.n)}")

    def fill(self, arg: str, out: str) -> str:
        for key, value in {**self.paths, "out": out, "store": self.store_uri}.items():
            arg = arg.replace("{" + key + "}", value)
        return arg


# ------------------------------------------------------------------------------------------------ the world

KG_ROWS = [(f"p{i}", rel, f"p{(i + k) % 12}", c)
           for i in range(12) for rel, k, c in (("knows", 1, 0.9), ("helps", 1, 0.6), ("helps", 3, 0.5),
                                                ("likes", 5, round(0.1 * ((i % 8) + 1), 1)))]


def tsv(rows: list[tuple], header: str = "head\trelation\ttail\tconfidence") -> str:
    return "\n".join([header, *("\t".join(map(str, r)) for r in rows)]) + "\n"


def _query_set(kg: Any, split: str, path: Path) -> str:
    """1p and 2i queries grounded on the split's facts, with the engine's exact answers (no store)."""
    from pipeline.core.kg import observed_graph
    from pipeline.engine import Adjacency
    from pipeline.formats.queryset import write_query_set
    from pipeline.sampling.truth import ground_truth
    from pipeline.softquery import Vocabulary, parse
    from pipeline.store.ingest import content_key
    from tests.answer.toy import rows_of

    vocab = Vocabulary.from_kg(kg)
    texts = [("1p", f"knows(p{i}, ?y)") for i in range(3)] + [("2i", f"knows(p{i}, ?y) & helps(p{i + 2}, ?y)")
                                                               for i in range(3)]
    queries = [parse(t, vocab) for _, t in texts]
    truth = ground_truth(queries, Adjacency.from_graph(observed_graph(kg, split)))
    meta = {"dataset": kg.name, "split": split, "alpha": "zero", "beta": "equal", "source": "test",
            "dataset_version": content_key(kg)}
    return str(write_query_set(rows_of(queries, truth, [k for k, _ in texts], split), path, meta))


def _files(root: Path, p: dict[str, str]) -> None:
    """The hostile files the cases read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = root / "files"
    f.mkdir()

    def put(name: str, data: str | bytes) -> str:
        (f / name).write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
        return str(f / name)

    nested = "[" * DEEP + "]" * DEEP
    p["nested"] = put("nested.json", nested)
    p["nested_obj"] = put("nested_obj.json", '{"a":' * DEEP + "1" + "}" * DEEP)
    p["nested_jsonl"] = put("nested.jsonl", nested + "\n")
    p["nested_squk"] = put("test_type0000_equal_zero_soft_efo1_qaa.json", nested)
    p["bad_json"] = put("bad.json", b'{"dataset": "hostile\xff"}')
    p["bad_jsonl"] = put("bad.jsonl", b'{"id": "q\xff"}\n')
    item = {"id": "q1", "type": "1p", "prompt": "Which?", "candidates": ["ann", "bob", "cid", "dan"], "correct": "A"}
    p["items"] = put("items.jsonl", json.dumps(item) + "\n")
    p["bad_squk"] = put("valid_type0001_equal_zero_soft_efo1_qaa.json", b'{"r1(s1,f1)\xff": []}')
    p["bad_tsv"] = put("bad.tsv", tsv(KG_ROWS[:3]).encode() + b"p1\tkn\xffows\tp2\t0.5\n")
    # a 1p formula in a file whose name says type0001 (2p)
    doc = {"r1(s1,f1)": [[{"r1": 0, "s1": 0}, {"f1_answers": [1]}, {"f1_values": [0.9]}]]}
    p["squk_mislabelled"] = put("test_type0001_equal_zero_soft_efo1_qaa.json", json.dumps(doc))
    for field, col in (("head", 0), ("relation", 1), ("tail", 2)):
        for label, bad in (("esc", ESC), ("bell", "ring\x07"), ("del", "x\x7f"), ("bidi", "\u202eevil")):
            row = list(KG_ROWS[4])
            row[col] = bad
            p[f"ctl_{field}_{label}_tsv"] = put(f"ctl_{field}_{label}.tsv", tsv([*KG_ROWS[:3], tuple(row)]))
    csv_rows = ["head,relation,tail,confidence", *(",".join(map(str, r)) for r in KG_ROWS[:3])]
    p["ctl_csv"] = put("ctl.csv", "\n".join([*csv_rows, f"p1,knows,{ESC},0.5"]) + "\n")
    frame = pd.DataFrame(KG_ROWS[:3] + [("p1", "knows", ESC, 0.5)], columns=["head", "relation", "tail", "confidence"])
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), f / "ctl.parquet")
    p["ctl_parquet"] = str(f / "ctl.parquet")
    # names that differ only by surrounding spaces: ', ' separated, so ' p1' (a tail) and 'p1' (a head)
    p["spaced_csv"] = put("spaced.csv", "\n".join(f"{h}, {r}, {t}, {c}" for h, r, t, c in KG_ROWS) + "\n")
    # duplicated columns: a header naming head twice, head and Head, a Parquet file with head twice
    p["dup_tsv"] = put("dup.tsv", tsv(KG_ROWS[:3], "head\trelation\ttail\tconfidence\thead"))
    p["dup_case_csv"] = put("dup_case.csv", "head,relation,tail,Tail,confidence\np0,knows,p1,p2,0.5\n")
    table = pa.table([pa.array(["p0"]), pa.array(["knows"]), pa.array(["p1"]), pa.array(["p2"]), pa.array([0.5])],
                     names=["head", "relation", "tail", "tail", "confidence"])
    pq.write_table(table, f / "dup.parquet")
    p["dup_parquet"] = str(f / "dup.parquet")
    # a damaged answers file beside a good one: evaluate DIR says it skipped it
    ans = root / "answers_dir"
    ans.mkdir()
    shutil.copy(p["answers"], ans / "good.parquet")
    (ans / "damaged.parquet").write_bytes(Path(p["answers"]).read_bytes()[:300])
    p["answers_dir"] = str(ans)
    # an export whose manifest, a run whose config, a saved L whose L.json is nested too deeply
    for key, src, name in (("adj_nested", p["adj"], "manifest.json"), ("run_nested", p["run"], "config.json")):
        shutil.copytree(src, root / key)
        (root / key / name).write_text(nested)
        p[key] = str(root / key)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, falkordb_store: Any) -> Any:
    import loaders

    root = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PIPELINE_HOME", str(root / "home"))
        mp.setenv("OMP_NUM_THREADS", "1")
        mp.delenv("PIPELINE_STORE", raising=False)
        p: dict[str, str] = {"kg": str(root / "kg.tsv")}
        Path(p["kg"]).write_text(tsv(KG_ROWS))
        with loaders.stage_user_files("hostile", p["kg"], split="0.7,0.15,0.15") as staged:  # recorded, no store
            staged.commit()
        kg = loaders.load("hostile")
        for split in ("train", "valid", "test"):
            p[split] = _query_set(kg, split, root / "q" / f"{split}.parquet")
        run = pl.train("hostile", model="ukge_logi", dim=4, epochs=2, out=root / "run", device="cpu", quiet=True)
        p["run"] = str(run.path)
        p["adj"] = str(pl.export(run, threshold=0.05, out=root / "adj", quiet=True).path)
        p["answers"] = str(pl.answer(p["test"], adjacency=p["adj"], out=root / "ans", workers=1, quiet=True).path)
        _files(root, p)
        w = World(root, p)
        store = falkordb_store.fresh()
        try:
            w.store_uri = store.uri
            res = CliRunner().invoke(cli, ["ingest", "hostile", "--from", p["kg"], "--split", "0.7,0.15,0.15",
                                           "--store", w.store_uri])
            assert res.exit_code == 0, res.output
            yield w
        finally:
            store.close()


# ------------------------------------------------------------------------------------------------ the cases


def other_case() -> list[Case]:
    """Identifiers of the project in another case are that identifier, recorded canonically."""
    cat = "other case"

    def sampled_types(w: World, out: str) -> None:
        (f,) = Path(out).glob("*.parquet")
        assert set(pd.read_parquet(f)["type"]) == {"1p", "2i"}

    def trained(w: World, out: str) -> None:
        cfg = json.loads((Path(out) / "config.json").read_text())
        assert (cfg["model"], cfg["dataset"], cfg["device"]) == ("ukge_logi", "hostile", "cpu")
        pl.export(out, threshold=0.05, out=Path(out) / "export", quiet=True)  # the next stage takes it

    def qe_trained(w: World, out: str) -> None:
        cfg = json.loads((Path(out) / "config.json").read_text())
        assert (cfg["model"], cfg["dataset"], cfg["loss"]) == ("logice_ne", "hostile", "weighted")

    def labelled(label: str) -> Callable[[World, str], None]:
        def check(w: World, out: str) -> None:
            (f,) = Path(out).glob("*.parquet")
            assert f.name.endswith(f".{label}.parquet"), f.name
        return check

    def reproduce_config(w: World) -> None:
        from pipeline.stages.reproduce import ReproduceConfig

        cfg = ReproduceConfig(dataset="HOSTILE", models="UKGE_LOGI,Ukge_Logi", calibrations="NONE,d+l",
                              baselines="LOGICE_NE", alpha="HYBRID", beta="EQUAL")
        assert (cfg.dataset, cfg.models, cfg.calibrations, cfg.baselines, cfg.alpha, cfg.beta) == (
            "hostile", ("ukge_logi",), ("none", "D+L"), ("logice_ne",), "hybrid", "equal")

    tiny_l = ("--train-queries", "{train}", "--valid-queries", "{valid}", "--l-epochs", "1", "--workers", "1")
    return [
        Case(cat, "sample --types 1P,2I --split TEST --alpha ZERO", store=True, ok="",
             cli=("sample", "HOSTILE", "--types", "1P,2I", "--split", "TEST", "--alpha", "ZERO", "--beta", "EQUAL",
                  "--per-type", "1", "--no-browse", "--store", "{store}", "--out", "{out}"),
             api=lambda w: pl.sample("Hostile", types=["1P", "2i"], split="Test", alpha="Zero", per_type=1,
                                     browse=False, store=w.store_uri, out=w.out(), quiet=True),
             check=sampled_types),
        Case(cat, "train --model UKGE_LOGI --device CPU --select-on LAST", ok="", check=trained,
             cli=("train", "HOSTILE", "--model", "UKGE_LOGI", "--device", "CPU", "--select-on", "LAST", "--epochs",
                  "1", "--dim", "4", "--out", "{out}"),
             api=lambda w: pl.train("HOSTILE", model="Ukge_Logi", device="CPU", select_on="Last", epochs=1, dim=4,
                                    out=w.out(), quiet=True)),
        Case(cat, "answer --method SRC --calibration NONE --executor LOCAL", ok="", check=labelled("SRC"),
             cli=("answer", "{test}", "--adjacency", "{adj}", "--method", "SRC", "--calibration", "NONE",
                  "--executor", "LOCAL", "--out", "{out}"),
             api=lambda w: pl.answer(w.paths["test"], adjacency=w.paths["adj"], method="Src", calibration="None",
                                     executor="Local", out=w.out(), quiet=True)),
        Case(cat, "answer --calibration l --l-shapes 1P,2I --l-variant DEFAULT", ok="", check=labelled("SRC(L)"),
             cli=("answer", "{test}", "--adjacency", "{adj}", "--calibration", "l", "--l-shapes", "1P,2I",
                  "--l-variant", "DEFAULT", *tiny_l, "--out", "{out}"),
             api=lambda w: pl.answer(w.paths["test"], adjacency=w.paths["adj"], calibration="l", l_shapes="1P,2I",
                                     train_queries=w.paths["train"], valid_queries=w.paths["valid"], l_epochs=1,
                                     workers=1, out=w.out(), quiet=True)),
        Case(cat, "query --dataset HOSTILE --graph TEST", ok="[hostile, graph test",
             cli=("query", "knows(p0, ?y)", "--dataset", "HOSTILE", "--graph", "TEST"),
             api=lambda w: pl.query("knows(p0, ?y)", dataset="HOSTILE", graph="Test")),
        Case(cat, "stats HOSTILE --store in capitals", store=True, ok="hostile: 12 entities",
             cli=("stats", "HOSTILE", "--store", "{store}"),
             api=lambda w: pl.dataset("HOSTILE", store=w.store_uri).stats()),
        Case(cat, "train-qe HOSTILE --model LOGICE_NE --loss WEIGHTED", ok="", check=qe_trained,
             cli=("train-qe", "HOSTILE", "--model", "LOGICE_NE", "--loss", "WEIGHTED", "--train-queries", "{train}",
                  "--valid-queries", "{valid}", "--epochs", "1", "--dim", "4", "--hidden", "4", "--device", "CPU",
                  "--out", "{out}")),
        Case(cat, "ls QUERY-TYPES, a store named EMBEDDED", ok="2il", cli=("ls", "QUERY-TYPES")),
        Case(cat, "reproduce's settings in capitals (the config it records)", ok="", api=reproduce_config),
        Case(cat, "ls Calibrations", ok="D+L", cli=("ls", "Calibrations")),
        Case(cat, "an unknown name in another case: a did-you-mean", needle="--types 1P,2X: unknown query type '2X'",
             api_needle="types='1P,2X': unknown query type '2X'",
             cli=("sample", "hostile", "--types", "1P,2X", "--store", DEAD, "--out", "{out}"),
             api=lambda w: pl.sample("hostile", types="1P,2X", store=DEAD, out=w.out())),
        Case(cat, "a model misspelled in capitals: did you mean", needle="(did you mean ukge_logi?)",
             cli=("train", "hostile", "--model", "UKGE_LGI", "--out", "{out}"),
             api=lambda w: pl.train("hostile", model="UKGE_LGI", out=w.out())),
    ]


def control_characters() -> list[Case]:
    """Names with control characters are refused naming the line (or row) and field; names merged by
    removing surrounding spaces are said in a warning line."""
    cat = "control characters"
    out: list[Case] = []
    codes = {"esc": "\\x1b", "bell": "\\x07", "del": "\\x7f", "bidi": "\\u202e"}
    for field in ("head", "relation", "tail"):
        for label, code in codes.items():
            key = f"ctl_{field}_{label}_tsv"
            out.append(Case(cat, f"{field} with {code} in a TSV",
                            needle=f"line 5, field '{field}': the name", api_needle=f"field '{field}'",
                            cli=("ingest", "evil", "--from", "{" + key + "}", "--store", DEAD),
                            api=lambda w, key=key: pl.ingest("evil", w.paths[key], store=DEAD)))
    rows = KG_ROWS[:3] + [("p1", "knows", ESC, 0.5)]
    frame = pd.DataFrame(rows, columns=["head", "relation", "tail", "confidence"], index=[10, 11, 12, 13])
    out += [
        Case(cat, "an escape in a CSV", needle="ctl.csv, line 5, field 'tail'",
             cli=("ingest", "evil", "--from", "{ctl_csv}", "--store", DEAD),
             api=lambda w: pl.ingest("evil", w.paths["ctl_csv"], store=DEAD)),
        Case(cat, "an escape in a Parquet file", needle="ctl.parquet, line 4, field 'tail'",
             cli=("ingest", "evil", "--from", "{ctl_parquet}", "--store", DEAD),
             api=lambda w: pl.ingest("evil", w.paths["ctl_parquet"], store=DEAD)),
        Case(cat, "an escape in a DataFrame", api_needle="DataFrame for 'evil', index 13, field 'tail'",
             api=lambda w: pl.ingest("evil", frame, store=DEAD)),
        Case(cat, "a bidi override in a DataFrame relation", api_needle="index 10, field 'relation'",
             api=lambda w: pl.ingest("evil", frame.assign(relation=["\u202eknows", "knows", "knows", "knows"]),
                                     store=DEAD)),
        Case(cat, "names differing only by surrounding spaces: a warning line", store=True,
             ok="names that differ only by surrounding spaces are taken as one entity: ' p1'",
             api_ok="names that differ only by surrounding spaces are taken as one entity: ' p1'",
             cli=("ingest", "spaced", "--from", "{spaced_csv}", "--store", "{store}"),
             api=lambda w: pl.ingest("spaced", w.paths["spaced_csv"], store=w.store_uri, quiet=True)),
        Case(cat, "a DataFrame with spaced names: the row named", store=True,
             ok="", api_ok="'p1 ' (DataFrame for 'spaced2', index 'b', field 'head') is 'p1'",
             api=lambda w: pl.ingest("spaced2", pd.DataFrame(
                 {"head": ["p0", "p1 ", "p2"], "relation": ["knows"] * 3, "tail": ["p1", "p2", "p0"],
                  "confidence": [0.9, 0.8, 0.7], "split": ["train"] * 3}, index=["a", "b", "c"]),
                 store=w.store_uri, quiet=True)),
        Case(cat, "an endpoint holding CR LF (a header smuggled in)", needle="--endpoint",
             cli=("llm-eval", "{items}", "--endpoint", "http://127.0.0.1:1/v1\r\nX-Evil: 1", "--model", "m")),
        Case(cat, "a query naming an escape: shown escaped", needle="unknown entity 'evil\\x1b]0;PWNED\\x07'",
             cli=("query", f'knows("{ESC}", ?y)', "--dataset", "hostile", "--graph", "test"),
             api=lambda w: pl.query(f'knows("{ESC}", ?y)', dataset="hostile", graph="test")),
    ]
    return out


def bad_bytes() -> list[Case]:
    """Undecodable bytes in files: one line naming the file (and line)."""
    cat = "bad bytes"
    return [
        Case(cat, "a TSV of facts", needle="bad.tsv, line 5: not valid UTF-8",
             cli=("ingest", "bad", "--from", "{bad_tsv}", "--store", DEAD),
             api=lambda w: pl.ingest("bad", w.paths["bad_tsv"], store=DEAD)),
        Case(cat, "a --config JSON", needle="--config", api_needle="config=",
             cli=("train", "hostile", "--config", "{bad_json}", "--out", "{out}"),
             api=lambda w: pl.train("hostile", config=w.paths["bad_json"], out=w.out())),
        Case(cat, "a reproduction's --config", needle="bad.json: not valid JSON", api_needle="bad.json",
             cli=("reproduce", "hostile", "--config", "{bad_json}", "--out", "{out}")),
        Case(cat, "an items file", needle="bad.jsonl, line 1: not valid UTF-8",
             cli=("llm-eval", "{bad_jsonl}")),
        Case(cat, "a SQUK file", needle="valid_type0001_equal_zero_soft_efo1_qaa.json",
             cli=("import-squk", "hostile", "{bad_squk}", "--out", "{out}")),
        Case(cat, "a damaged answers file in a folder: skipped with a line", ok="damaged.parquet: not a readable",
             cli=("evaluate", "{answers_dir}")),
        Case(cat, "a statement with an undecodable byte", needle="STATEMENT", api_needle="statement: not valid Unicode",
             cli=("cypher", 'RETURN "x' + S + '"', "--store", DEAD),
             api=lambda w: pl.cypher('RETURN "x' + S + '"', store=DEAD)),
    ]


def surrogates() -> list[Case]:
    """A lone surrogate (an undecodable byte of an argument) in any text argument: one line naming it."""
    cat = "surrogates"
    out: list[Case] = []
    commands: list[tuple[str, tuple[str, ...], int]] = [  # (name, args, index of the argument spoiled)
        ("sample DATASET", ("sample", "hostile", "--store", DEAD, "--out", "{out}"), 1),
        ("sample --types", ("sample", "hostile", "--types", "1p", "--store", DEAD, "--out", "{out}"), 3),
        ("sample --out", ("sample", "hostile", "--store", DEAD, "--out", "{out}"), 5),
        ("stats DATASET", ("stats", "hostile", "--store", DEAD), 1),
        ("stats --store", ("stats", "hostile", "--store", "falkordb://h:1"), 3),
        ("train --model", ("train", "hostile", "--model", "ukge_logi", "--out", "{out}"), 3),
        ("train --out", ("train", "hostile", "--model", "ukge_logi", "--out", "{out}"), 5),
        ("export RUN_DIR", ("export", "{run}"), 1),
        ("answer --l-shapes", ("answer", "{test}", "--adjacency", "{adj}", "--calibration", "L", "--l-shapes", "1p"), 7),
        ("query TEXT", ("query", "knows(p0, ?y)", "--dataset", "hostile", "--graph", "test"), 1),
        ("evaluate --plot", ("evaluate", "{answers}", "--plot", "{out}.png"), 3),
        ("ingest --columns", ("ingest", "x", "--from", "{kg}", "--columns", "h,r,t,c", "--store", DEAD), 5),
        ("browse QUERY_ID", ("browse", "q1", "--html", "{out}.html", "--store", DEAD), 1),
        ("llm-items --out", ("llm-items", "hostile", "--queries", "{test}", "--out", "{out}.jsonl"), 5),
        ("llm-items --per-type", ("llm-items", "hostile", "--queries", "{test}", "--out", "{out}", "--per-type", "1p=1"), 7),
        ("train-qe --out", ("train-qe", "hostile", "--model", "logice_ne", "--train-queries", "{train}",
                            "--valid-queries", "{valid}", "--out", "{out}"), 9),
        ("reproduce --run", ("reproduce", "hostile", "--run", "ukge_logi={run}", "--out", "{out}"), 3),
        ("reproduce --qe", ("reproduce", "hostile", "--baselines", "logice_ne", "--qe", "lr=0.1", "--out", "{out}"), 5),
        ("cypher --param", ("cypher", "RETURN $x", "--param", "x=ann", "--store", DEAD), 3),
        ("cypher --param map key", ("cypher", "RETURN $x", "--param", 'x={"k": 1}', "--store", DEAD), 3),
    ]
    for name, args, at in commands:
        spoiled = list(args)
        spoiled[at] = spoiled[at][:3] + S + spoiled[at][3:]  # inside the value (a key of a JSON map included)
        needle = "unknown model 'ukg\\udcffe_logi'" if name == "train --model" else "not valid Unicode: a lone surrogate \\udcff"
        out.append(Case(cat, name, cli=tuple(spoiled), needle=needle))
    out += [
        Case(cat, "pl.cypher parameter", api_needle="x: not valid Unicode",
             api=lambda w: pl.cypher("RETURN $x", {"x": "a" + S}, store=DEAD)),
        Case(cat, "pl.cypher map key", api_needle="x: map key: not valid Unicode",
             api=lambda w: pl.cypher("RETURN $x", {"x": {"k" + S: 1}}, store=DEAD)),
        Case(cat, "pl.query text", api_needle="text: not valid Unicode",
             api=lambda w: pl.query("knows(p0, ?y)" + S, dataset="hostile", graph="test")),
        Case(cat, "pl.sample out", api_needle="out=",
             api=lambda w: pl.sample("hostile", out=w.out() + S, store=DEAD)),
        Case(cat, "pl.dataset store", api_needle="not valid Unicode",
             api=lambda w: pl.dataset("hostile", store="falkordb://h" + S + ":1").stats()),
        Case(cat, "a name in an object column of a DataFrame", api_needle="index 1, field 'tail'",
             api=lambda w: pl.ingest("sur", pd.DataFrame(
                 {"head": ["p0", "p1"], "relation": ["knows"] * 2, "tail": pd.Series(["p1", "p" + S], dtype=object),
                  "confidence": [0.5, 0.5]}), store=DEAD)),
    ]
    return out


def nested_json() -> list[Case]:
    """JSON nested too deeply for Python's reader, wherever JSON enters: one line naming the file."""
    cat = "nested JSON"
    deep = "nested too deeply"
    return [
        Case(cat, "train --config (an array)", needle=deep, cli=("train", "hostile", "--config", "{nested}", "--out", "{out}"),
             api=lambda w: pl.train("hostile", config=w.paths["nested"], out=w.out())),
        Case(cat, "train --config (an object)", needle=deep,
             cli=("train", "hostile", "--config", "{nested_obj}", "--out", "{out}")),
        Case(cat, "reproduce --config", needle=deep, cli=("reproduce", "hostile", "--config", "{nested}", "--out", "{out}")),
        Case(cat, "import-squk", needle=f"test_type0000_equal_zero_soft_efo1_qaa.json, line 1: not JSON: {deep}",
             cli=("import-squk", "hostile", "{nested_squk}", "--out", "{out}")),
        Case(cat, "llm-eval ITEMS", needle=f"nested.jsonl, line 1: not JSON ({deep}",
             cli=("llm-eval", "{nested_jsonl}")),
        Case(cat, "an export's manifest", needle="manifest.json: unreadable",
             cli=("query", "knows(p0, ?y)", "--dataset", "hostile", "--adjacency", "{adj_nested}"),
             api=lambda w: pl.query("knows(p0, ?y)", dataset="hostile", adjacency=w.paths["adj_nested"])),
        Case(cat, "a run's config.json", needle="run_nested/config.json", cli=("export", "{run_nested}", "--out", "{out}"),
             api=lambda w: pl.export(w.paths["run_nested"], out=w.out())),
        Case(cat, "cypher --param", needle=f"--param x: {deep}",
             cli=("cypher", "RETURN $x", "--param", "x=" + "[" * DEEP + "]" * DEEP, "--store", DEAD)),
        Case(cat, "reproduce --qe: a long value cut in the line", needle="--qe lr=[[[",
             cli=("reproduce", "hostile", "--baselines", "logice_ne", "--qe", "lr=" + "[" * DEEP, "--out", "{out}")),
    ]


def duplicated_columns() -> list[Case]:
    """Two columns of one name (or of one name in two cases): refused naming both, never a guess."""
    cat = "duplicated columns"
    base = pd.DataFrame(KG_ROWS[:3], columns=["head", "relation", "tail", "confidence"])
    return [
        Case(cat, "a DataFrame with head twice",
             api_needle="DataFrame for 'dup', field 'head': the frame has 2 columns named 'head' (column 1) and "
                        "'head' (column 5)",
             api=lambda w: pl.ingest("dup", pd.concat([base, base[["head"]]], axis=1), store=DEAD)),
        Case(cat, "a DataFrame with tail and Tail", api_needle="'tail' (column 3) and 'Tail' (column 5)",
             api=lambda w: pl.ingest("dup", base.assign(Tail=base["tail"]), store=DEAD)),
        Case(cat, "a DataFrame with split twice", api_needle="field 'split': the frame has 2 columns named 'split'",
             api=lambda w: pl.ingest("dup", pd.concat([base.assign(split="train"),
                                                       pd.DataFrame({"split": ["train"] * 3})], axis=1), store=DEAD)),
        Case(cat, "a TSV header with head twice", needle="dup.tsv, line 1, field 'head': the header has 2 columns",
             cli=("ingest", "dup", "--from", "{dup_tsv}", "--store", DEAD),
             api=lambda w: pl.ingest("dup", w.paths["dup_tsv"], store=DEAD)),
        Case(cat, "a CSV header with tail and Tail", needle="dup_case.csv, line 1, field 'tail'",
             cli=("ingest", "dup", "--from", "{dup_case_csv}", "--store", DEAD)),
        Case(cat, "a Parquet file with tail twice", needle="dup.parquet, field 'tail': the file has 2 columns",
             cli=("ingest", "dup", "--from", "{dup_parquet}", "--store", DEAD),
             api=lambda w: pl.ingest("dup", w.paths["dup_parquet"], store=DEAD)),
        Case(cat, "a column name mapped with --columns, held twice", needle="field 'tail'",
             cli=("ingest", "dup", "--from", "{dup_case_csv}", "--columns", "head,relation,TAIL,confidence",
                  "--store", DEAD)),
    ]


def numbers() -> list[Case]:
    """Zero, infinities and NaN where a count or a real number goes: one line naming the option."""
    cat = "zero/inf/nan"
    out: list[Case] = []
    answer_l = ("answer", "{test}", "--adjacency", "{adj}", "--calibration", "L", "--train-queries", "{train}",
                "--valid-queries", "{valid}", "--out", "{out}")
    grid: list[tuple[tuple[str, ...], str, tuple[str, ...]]] = [
        (("export", "{run}", "--out", "{out}"), "--threshold", ("nan", "inf", "-1")),
        (("export", "{run}", "--out", "{out}"), "--top-k", ("0",)),
        (("sample", "hostile", "--store", DEAD, "--out", "{out}"), "--per-type", ("0",)),
        (("train", "hostile", "--model", "ukge_logi", "--out", "{out}"), "--epochs", ("0",)),
        (("train", "hostile", "--model", "ukge_logi", "--out", "{out}"), "--lr", ("nan", "inf")),
        (answer_l, "--l-epochs", ("0",)),
        (answer_l, "--l-lr", ("nan", "inf", "0")),
        (("answer", "{test}", "--adjacency", "{adj}", "--out", "{out}"), "--cycle-cap", ("0",)),
        (("llm-items", "hostile", "--queries", "{test}", "--out", "{out}"), "--margin", ("inf", "nan", "0")),
        (("llm-items", "hostile", "--queries", "{test}", "--out", "{out}"), "--per-type", ("0", "1p=0", "9" * 30)),
        (("llm-items", "hostile", "--queries", "{test}", "--out", "{out}"), "--seed", ("-1",)),
        (("llm-eval", "{items}", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m"), "--timeout",
         ("nan", "inf", "0")),
        (("llm-eval", "{items}", "--endpoint", "http://127.0.0.1:1/v1", "--model", "m"), "--retries", ("-1",)),
        (("cypher", "RETURN 1", "--store", "{store}"), "--timeout", ("nan", "inf", "0")),
        (("reproduce", "hostile", "--calibrations", "L", "--out", "{out}"), "--l-epochs", ("0",)),
        (("train-qe", "hostile", "--model", "logice_ne", "--train-queries", "{train}", "--valid-queries", "{valid}",
          "--out", "{out}"), "--lr", ("nan", "inf")),
    ]
    for args, flag, values in grid:
        for v in values:
            needle = f"{flag} {v}" if flag not in ("--margin", "--seed", "--timeout", "--retries") else flag
            out.append(Case(cat, f"{args[0]} {flag} {v[:12]}", cli=(*args, flag, v), needle=needle))
    out += [
        Case(cat, "pl.answer l_epochs=0: L never trained is not answered as SRC(L)",
             api_needle="l_epochs=0: calibration L would train no step",
             api=lambda w: pl.answer(w.paths["test"], adjacency=w.paths["adj"], calibration="D+L", l_epochs=0,
                                     train_queries=w.paths["train"], valid_queries=w.paths["valid"], out=w.out())),
        Case(cat, "pl.run l_epochs=0", api_needle="l_epochs=0: calibration L would train no step",
             api=lambda w: pl.run("hostile", calibrations="none,L", l_epochs=0, out=w.out())),
        Case(cat, "pl.export threshold=nan", api_needle="threshold=nan: must be a finite number",
             api=lambda w: pl.export(w.paths["run"], threshold=float("nan"), out=w.out())),
    ]
    return out


def unknown_names() -> list[Case]:
    """Unknown names in lists are refused with the close ones, never dropped; a run given for a backbone that
    is not trained is refused, never ignored."""
    cat = "unknown names"
    return [
        Case(cat, "sample --types 1p,3x", needle="--types 1p,3x: unknown query type '3x'",
             cli=("sample", "hostile", "--types", "1p,3x", "--store", DEAD, "--out", "{out}"),
             api_needle="types=['1p', '3x']: unknown query type '3x'",
             api=lambda w: pl.sample("hostile", types=["1p", "3x"], store=DEAD, out=w.out())),
        Case(cat, "reproduce --models ukge_logi,ukge_lgi", needle="unknown model 'ukge_lgi' (did you mean ukge_logi?)",
             cli=("reproduce", "hostile", "--models", "ukge_logi,ukge_lgi", "--out", "{out}"),
             api=lambda w: pl.run("hostile", models="ukge_logi,ukge_lgi", out=w.out())),
        Case(cat, "reproduce --calibrations none,DL", needle="unknown calibration 'DL'",
             cli=("reproduce", "hostile", "--calibrations", "none,DL", "--out", "{out}"),
             api=lambda w: pl.run("hostile", calibrations=["none", "DL"], out=w.out())),
        Case(cat, "reproduce --baselines logice", needle="(did you mean logice_ne?)",
             cli=("reproduce", "hostile", "--baselines", "logice", "--out", "{out}"),
             api=lambda w: pl.run("hostile", baselines="logice", out=w.out())),
        Case(cat, "answer --l-shapes 1p,2u (not a train type)", needle="--l-shapes 1p,2u: 2u not a train query type",
             cli=("answer", "{test}", "--adjacency", "{adj}", "--calibration", "L", "--train-queries", "{train}",
                  "--valid-queries", "{valid}", "--l-shapes", "1p,2u", "--out", "{out}")),
        Case(cat, "answer --l-shapes 1p,9z", needle="unknown query type '9z'",
             cli=("answer", "{test}", "--adjacency", "{adj}", "--calibration", "L", "--l-shapes", "1p,9z")),
        Case(cat, "llm-items --per-type 1p=2,zz=3: never dropped", needle="--per-type 1p=2,zz=3: unknown query type 'zz'",
             cli=("llm-items", "hostile", "--queries", "{test}", "--out", "{out}", "--per-type", "1p=2,zz=3")),
        Case(cat, "llm-items --per-type 1P=2,1p=3", needle="type 1p is given twice",
             cli=("llm-items", "hostile", "--queries", "{test}", "--out", "{out}", "--per-type", "1P=2,1p=3")),
        Case(cat, "reproduce --run ukge_lgi=RUN (misspelled)", needle="--run ukge_lgi=",
             api_needle="runs={'ukge_lgi'",
             cli=("reproduce", "hostile", "--run", "ukge_lgi={run}", "--out", "{out}"),
             api=lambda w: pl.run("hostile", runs={"ukge_lgi": w.paths["run"]}, out=w.out())),
        Case(cat, "reproduce --run beurre=RUN (not in --models)", needle="beurre is not a backbone this reproduction trains",
             cli=("reproduce", "hostile", "--run", "beurre={run}", "--out", "{out}"),
             api=lambda w: pl.run("hostile", runs={"beurre": w.paths["run"]}, out=w.out())),
        Case(cat, "reproduce --run of another backbone", needle="a run of ukge_logi on 'hostile', not of beurre",
             cli=("reproduce", "hostile", "--models", "beurre", "--run", "beurre={run}", "--out", "{out}")),
        Case(cat, "import-squk: the file name's type against its formula's",
             needle="is a query of type 1p (type0000), but the file name says type0001 (2p)",
             cli=("import-squk", "hostile", "{squk_mislabelled}", "--out", "{out}")),
        Case(cat, "a store URI whose host no resolver takes", needle="the host 'a..b' is not a valid host name",
             cli=("stats", "hostile", "--store", "falkordb://a..b:1"),
             api=lambda w: pl.cypher("RETURN 1", store="falkordb://a..b:1")),
        Case(cat, "an endpoint that is no http(s) URL", needle="--endpoint notaurl: not an http(s) URL",
             cli=("llm-eval", "{items}", "--endpoint", "notaurl", "--model", "m")),
        Case(cat, "a data set misspelled in capitals", needle="unknown data set 'HOSTLE' (did you mean hostile?)",
             cli=("query", "knows(p0, ?y)", "--dataset", "HOSTLE", "--graph", "test"),
             api=lambda w: pl.query("knows(p0, ?y)", dataset="HOSTLE", graph="test")),
    ]


CASES = [*other_case(), *control_characters(), *bad_bytes(), *surrogates(), *nested_json(), *duplicated_columns(),
         *numbers(), *unknown_names()]


# ------------------------------------------------------------------------------------------------ the runs


def _ids(doors: str) -> list[Any]:
    return [pytest.param(c, id=f"{c.category}: {c.name}") for c in CASES if (c.cli if doors == "cli" else c.api)]


def test_the_table_covers_every_category_at_both_doors() -> None:
    for cat in CATEGORIES:
        mine = [c for c in CASES if c.category == cat]
        assert len(mine) >= 5, cat
        assert any(c.cli for c in mine) and any(c.api for c in mine), cat
    names = [f"{c.category}: {c.name}" for c in CASES]
    assert len(names) == len(set(names))
    assert {c.category for c in CASES} == set(CATEGORIES)


@pytest.mark.parametrize("case", _ids("cli"))
def test_command_line(world: World, case: Case) -> None:
    out = world.out()
    args = [world.fill(a, out) for a in case.cli]
    res = CliRunner().invoke(cli, args)
    shown = res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), _traceback(res)
    assert "Traceback" not in shown, shown
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    if case.ok is None:
        assert res.exit_code == 2, f"accepted: {shown[-2000:]}"
        assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
        assert case.needle in lines[0], lines[0]
        assert "\x1b" not in lines[0] and "\x07" not in lines[0]
        assert len(lines[0]) < 1000
    else:
        assert res.exit_code == 0, shown[-2000:]
        assert case.ok in shown, shown[-2000:]
        if case.check is not None:
            case.check(world, out)


@pytest.mark.parametrize("case", _ids("api"))
def test_python(world: World, case: Case, capfd: pytest.CaptureFixture[str]) -> None:
    assert case.api is not None
    if case.ok is None:
        with pytest.raises(pl.PipelineError) as err:
            case.api(world)
        text = str(err.value)
        assert "\n" not in text and (case.api_needle or case.needle) in text, text
    else:
        case.api(world)
        seen = capfd.readouterr()
        assert case.api_ok in seen.err + seen.out, seen.err


def _traceback(res: Any) -> str:
    import traceback

    return "".join(traceback.format_exception(res.exception))[-3000:]


def test_a_refused_ingest_leaves_no_record(world: World) -> None:
    """What the refusals above did not do: record a data set or touch the store."""
    datasets = Path(world.root / "home" / "datasets")
    assert not {p.name for p in datasets.iterdir() if not p.name.startswith(".")} & {"evil", "bad", "dup", "sur", "x"}
