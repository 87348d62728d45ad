"""The benchmark suite: the runner writes one record per benchmark into the JSON the pages render, merged so
that a run changes only its own record; every module of benchmarks/ holds named benchmarks with goals; the
records of docs/benchmarks.json belong to registered benchmarks and are shown on a page; the GPU machine's
scripts call the runner with options it takes. No timed assertion: the figures are what the machine gives."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as runner
from benchmarks import harness, render
from benchmarks.harness import Goal, Result, Table

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tables_benchmarks = _load(ROOT / "tools" / "tables_benchmarks.py", "_tables_benchmarks")
pages = _load(ROOT / "tools" / "pages.py", "_pages_for_benchmarks")


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """A registry holding one toy benchmark whose figures follow from its options by hand, and a default
    JSON path in tmp_path (a test must never write docs/benchmarks.json)."""
    monkeypatch.setattr(harness, "REGISTRY", {})
    monkeypatch.setattr(harness, "DEFAULT_JSON", tmp_path / "default.json")
    monkeypatch.setattr(harness, "discover", lambda: dict(harness.REGISTRY))

    @harness.benchmark(
        "toy",
        title="A toy",
        goals=[
            Goal("rate", "the toy's rate", ">=", 10, "q/s"),
            Goal("never", "a figure it never gives", "<=", 1),
        ],
        quick={"n": 2},
    )
    def toy_benchmark(
        *, n: int = 5, names: tuple[str, ...] = ("a", "b"), scale: float = 1.5, where: Path | None = None
    ) -> Result:
        rows = [[name, n * (i + 1), n * scale] for i, name in enumerate(names)]
        return Result(
            [Table(["name", "count", "scaled"], rows, title="Toy rows")],
            {"rate": 3.0 * n},
            [f"where={where}"],
        )

    return tmp_path


def _run(argv: list[str]) -> int:
    return runner.main(["run", *argv])


def test_a_run_writes_one_record_with_its_command_machine_goals_and_tables(toy, capsys):
    out = toy / "b.json"
    assert _run(["toy", "--n", "4", "--names", "x,y,z", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == 1 and list(doc["benchmarks"]) == ["toy"]
    rec = doc["benchmarks"]["toy"]
    assert rec["command"] == "python -m benchmarks run toy --n 4 --names x,y,z"
    assert rec["options"] == {"n": 4, "names": ["x", "y", "z"]}
    assert rec["quick"] is False and rec["source"] == "measured"
    assert rec["tables"] == [
        {
            "title": "Toy rows",
            "columns": ["name", "count", "scaled"],
            "formats": {},
            "rows": [["x", 4, 6.0], ["y", 8, 6.0], ["z", 12, 6.0]],
        }
    ]
    assert [(g["key"], g["value"], g["met"]) for g in rec["goals"]] == [
        ("rate", 12.0, True),
        ("never", None, None),
    ]
    m = rec["machine"]
    assert m["cores"] >= 1 and len(m["load"]) == 2 and m["python"] and "gpu" in m
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", rec["date"])
    # what the runner printed is what the page shows, goals apart
    printed = capsys.readouterr().out
    assert render.record(rec) in printed
    assert "- Goal: the toy's rate ≥ 10 q/s. Now: 12.0, met." in printed


def test_the_page_renders_the_record_the_runner_wrote(toy):
    assert _run(["toy", "--n", "3", "--json", str(toy / "benchmarks.json")]) == 0
    page = (
        "# P\n\n<!-- table benchmarks.goals -->\n<!-- /table -->\n\n"
        "<!-- table benchmarks.toy -->\nold\n<!-- /table -->\n"
    )
    (toy / "benchmarks.md").write_text(page)
    new, changed = pages.render_page(page, tables_benchmarks.tables(toy), toy, "benchmarks.md")
    assert changed == ["benchmarks.goals", "benchmarks.toy"]
    rec = json.loads((toy / "benchmarks.json").read_text())["benchmarks"]["toy"]
    block = new.split("<!-- table benchmarks.toy -->\n")[1].split("<!-- /table -->")[0]
    lines = block.splitlines()
    assert lines[0].startswith(f"`{rec['command']}` · ") and lines[0].endswith(f" · {rec['date']}")
    assert "load average" in lines[0] and "Goal:" not in block  # the goals' table holds them on the page
    assert "| a | 3 | 4.50 |" in lines and "| b | 6 | 4.50 |" in lines and "**Toy rows**" in lines
    assert lines[-1] == "where=None"
    goals = new.split("<!-- table benchmarks.goals -->\n")[1].split("<!-- /table -->")[0]
    assert "| `toy` | the toy's rate ≥ 10 q/s; now 9.00, **not met** |" in goals and "| below |" in goals
    assert "| `toy` | a figure it never gives ≤ 1; not measured | - | - |" in goals


def test_a_record_holds_json_values_only(toy):
    """numpy scalars become numbers, a figure that is not finite becomes None (JSON has no NaN), tuples lists."""
    import numpy as np

    bench = harness.REGISTRY["toy"]
    result = Result(
        [Table(["a", "b"], [[np.float32(1.5), float("nan")], [(1, 2), np.int64(3)]])],
        {"rate": np.float64(float("inf"))},
    )
    rec = harness.make_record(
        bench,
        result,
        command="c",
        options={"where": Path("/x")},
        quick=False,
        host={"description": "m"},
        date="d",
        seconds=None,
    )
    assert rec["tables"][0]["rows"] == [[1.5, None], [[1, 2], 3]]
    assert rec["goals"][0]["value"] is None and rec["goals"][0]["met"] is None
    assert rec["options"] == {"where": "/x"}
    assert json.loads(harness.dumps(rec)) == rec


def test_a_run_changes_only_its_own_record(toy):
    out = toy / "b.json"
    assert _run(["toy", "--json", str(out)]) == 0
    assert _run(["toy", "--label", "other", "--n", "7", "--json", str(out)]) == 0
    first = json.loads(out.read_text())["benchmarks"]
    assert sorted(first) == ["toy", "toy.other"] and first["toy.other"]["options"] == {"n": 7}
    assert _run(["toy", "--n", "8", "--json", str(out)]) == 0
    second = json.loads(out.read_text())["benchmarks"]
    assert second["toy.other"] == first["toy.other"]
    assert second["toy"]["options"] == {"n": 8} and second["toy"]["goals"][0]["value"] == 24.0


def test_an_option_takes_the_next_word_even_one_that_starts_with_dashes(toy):
    """What a benchmark passes on to a command (``--args "--epochs 100"``) is a value, not an option."""
    out = toy / "b.json"
    assert _run(["toy", "--names", "--x,--y", "--n", "2", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["benchmarks"]["toy"]
    assert rec["options"] == {"names": ["--x", "--y"], "n": 2}
    assert [r[0] for r in rec["tables"][0]["rows"]] == ["--x", "--y"]


def test_quick_takes_the_quick_size_and_writes_only_where_told(toy, capsys):
    assert _run(["toy", "--quick"]) == 0
    assert not harness.DEFAULT_JSON.exists()
    assert "not written" in capsys.readouterr().err
    out = toy / "q.json"
    assert _run(["toy", "--quick", "--json", str(out)]) == 0
    rec = json.loads(out.read_text())["benchmarks"]["toy"]
    assert (
        rec["quick"] is True
        and rec["options"] == {"n": 2}
        and rec["command"] == "python -m benchmarks run toy --quick"
    )
    assert render.provenance(rec).endswith(" · quick size")
    assert (
        _run(["toy", "--n", "5"]) == 0 and harness.DEFAULT_JSON.exists()
    )  # a full run writes the default file


@pytest.mark.parametrize(
    ("argv", "rc", "message"),
    [
        (["tyo"], 2, "no benchmark 'tyo' (did you mean 'toy'?)"),
        (["toy", "--nn", "3"], 2, "--nn: no benchmark named here takes it (did you mean --n?)"),
        (["toy", "--n", "three"], 1, "--n 'three': not an integer"),
        (["toy", "--label", "Big Label"], 2, "--label 'Big Label': lower-case letters, digits and '-'"),
        (["toy", "extra", "--n", "1"], 2, "no benchmark 'extra'"),
    ],
)
def test_a_wrong_run_is_one_line(toy, capsys, argv, rc, message):
    assert _run(argv) == rc
    assert message in capsys.readouterr().err


def test_a_benchmark_without_its_input_names_the_option(toy, capsys):
    @harness.benchmark("needs", title="Needs an input", goals=[Goal("x", "x", "<=", 1)])
    def needs(*, queries: Path, n: int = 1) -> Result:
        return Result([])

    assert _run(["needs", "--n", "2"]) == 1
    assert "needs needs --queries" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1234, "1,234"),
        (0, "0"),
        (1234.6, "1,235"),
        (56.78, "56.8"),
        (0.893, "0.89"),
        (0.0044, "0.0044"),
        (-0.35, "-0.35"),
    ],
)
def test_numbers_read_as_the_tables_show_them(value, text):
    assert render.number(value) == text


def test_cells_say_what_they_are():
    assert [render.cell(v) for v in (None, True, False, "a|b")] == ["-", "yes", "no", "a\\|b"]
    assert render.cell(0.5, ".3f") == "0.500"


def test_a_real_benchmark_at_its_quick_size_writes_what_the_page_renders(tmp_path):
    """The checksum benchmark in a fresh process, as a user runs it; the page rendered from what it wrote."""
    out = tmp_path / "benchmarks.json"
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "checksums", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    rec = json.loads(out.read_text())["benchmarks"]["checksums"]
    (table,) = rec["tables"]
    without, with_check, check = table["rows"]
    cpu = table["columns"].index("CPU s (best of 2)")
    # the goal reads the table's own figures
    assert rec["goals"][0]["value"] == (with_check[cpu] - without[cpu]) / without[cpu]
    assert check[cpu] == with_check[cpu] - without[cpu]
    page = "<!-- table benchmarks.checksums -->\n<!-- /table -->\n"
    new, _ = pages.render_page(page, tables_benchmarks.tables(tmp_path), tmp_path)
    for row in table["rows"]:
        cells = [render.cell(v, table["formats"].get(c)) for c, v in zip(table["columns"], row, strict=True)]
        assert "| " + " | ".join(cells) + " |" in new.splitlines()
    assert rec["command"] in new and "200,000 facts" in new and "quick size" in new


def _plain_type(hint) -> bool:
    """A type the runner converts from the command line: int, float, str, bool, Path, a tuple of one of
    those (comma-separated), or one of those or None."""
    import types
    import typing

    simple = (int, float, str, bool, Path)
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and _plain_type(rest[0])
    if typing.get_origin(hint) is tuple:
        return args[1:] == (Ellipsis,) and args[0] in simple
    return hint in simple


def _registry() -> dict[str, harness.Benchmark]:
    return harness.discover()


def test_every_module_of_the_suite_holds_named_benchmarks_with_goals():
    registry = _registry()
    modules = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - harness.SUPPORT - {"__init__"}
    owners = {b.fn.__module__.rsplit(".", 1)[1] for b in registry.values()}
    assert modules == owners, "a module of benchmarks/ holds no benchmark (a one-off script?)"
    assert {p.suffix for p in (ROOT / "benchmarks").iterdir() if p.is_file()} <= {".py", ".sh"}
    for b in registry.values():
        assert b.goals, b.name
        for g in b.goals:
            assert g.direction in (">=", "<=") and isinstance(g.target, (int, float)) and g.text, (b.name, g)
        assert len({g.key for g in b.goals}) == len(b.goals), b.name
        for name, hint in b.types().items():  # every option can be given on the command line
            if name != "return":
                assert _plain_type(hint), (b.name, name, hint)


def test_list_names_every_benchmark_and_its_goals(capsys):
    assert runner.main(["list"]) == 0
    out = capsys.readouterr().out
    for b in _registry().values():
        assert re.search(rf"^{re.escape(b.name)}\s", out, re.M), b.name
        assert render.goal_text(b.goals[0].as_dict(None)) in out
    assert runner.main(["list", "cold-answer"]) == 0
    assert "--queries (path; required)" in capsys.readouterr().out


def test_every_record_of_the_docs_belongs_to_a_benchmark_and_is_shown():
    registry = _registry()
    doc = harness.read(ROOT / "docs" / "benchmarks.json")
    shown = tables_benchmarks.pages_of(ROOT / "docs")
    for key, rec in doc["benchmarks"].items():
        name, _, label = key.partition(".")
        assert rec["benchmark"] == name and name in registry, key
        assert not label or runner.LABEL.match(label), key
        want = [(g.key, g.text, g.direction, g.target, g.unit) for g in registry[name].goals]
        assert [
            (g["key"], g["text"], g["direction"], g["target"], g["unit"]) for g in rec["goals"]
        ] == want, key
        assert rec["command"] and rec["date"] and rec["machine"], key
        for t in rec["tables"]:
            assert all(len(r) == len(t["columns"]) for r in t["rows"]), key
        assert key in shown, f"{key}: no page shows it"
    assert set(registry) <= {rec["benchmark"] for rec in doc["benchmarks"].values()}, (
        "a benchmark with no figure"
    )


def test_the_benchmarks_page_is_current_figures_only():
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    assert not [ln for ln in text.splitlines() if re.match(r"#+ .*\d{4}-\d{2}-\d{2}", ln)]


def test_the_gpu_machine_scripts_call_the_runner_with_options_it_takes():
    registry = _registry()
    calls = 0
    for script in (ROOT / "benchmarks").glob("gpu_machine_*.sh"):
        text = script.read_text().replace("\\\n", " ")
        assert "benchmarks/bench_" not in text, script.name
        for m in re.finditer(r"-m benchmarks run ([a-z0-9-]+)(.*)", text):
            name, rest = m.group(1), m.group(2)
            assert name in registry, (script.name, name)
            options = {p.replace("_", "-") for p in registry[name].options()} | harness.RUNNER_FLAGS
            for opt in re.findall(
                r"(?<![\w-])--([a-z][a-z0-9-]*)", rest.split('"--args')[0].split("--args")[0]
            ):
                assert opt in options or opt.removeprefix("no-") in options, (script.name, name, opt)
            calls += 1
    assert calls >= 8
