"""Tests of the tests (as PyKEEN's): every registered component has a test class deriving from the case of
its kind (tests/cases.py), and every such class names a registered component. Adding a data set, model,
method, calibration, query type, metric, alpha/beta mode, executor or store without its test class fails
here, with a message naming the base to derive from and the row of docs/architecture.md's "How to add a
component" table; that table is checked against the code here too.

The guard runs in the default install: every test module must import without the optional packages
(skips go in marks, fixtures or tests, never at import), and a module that does not import fails here by
name instead of hiding its test classes."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tests.cases
from loaders import BENCHMARKS
from pipeline.core.registry import REGISTRIES, Registry
from pipeline.core.registry import registry as _registry
from tests.cases import ComponentCase
from tests.how_to_add import ROOT, Row, missing_files, read_table

TESTS = Path(__file__).resolve().parent
# Not dependencies of the project, yet imported by some tests: triton (comes with torch's CUDA builds) and
# networkx (comes with torch); the optional extras of pyproject.toml are added to these.
NOT_DEPENDENCIES = ("triton", "networkx")


def module_names() -> list[str]:
    """Every test module of the suite, as an importable name (tests.executors.test_ray, ...)."""
    return [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in sorted(TESTS.rglob("test_*.py"))]


def import_failures(names: list[str]) -> list[str]:
    """'module: Error: message' for each test module that does not import; a module-level skip
    (importorskip) counts as a failure: it would hide the module's test classes from the meta-test."""
    failures = []
    for name in names:
        try:
            importlib.import_module(name)
        except (Exception, pytest.skip.Exception, pytest.fail.Exception) as err:  # Skipped is no Exception: not unseen
            failures.append(f"{name}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    return failures


def _test_classes() -> dict[str, set[str]]:
    """{kind: names} of the concrete case classes across every test module: those with a ``name``, in a
    test module, that pytest collects (``Test*``, not ``__test__ = False``); fails naming the modules that
    do not import."""
    modules = module_names()
    failures = import_failures(modules)
    if failures:
        pytest.fail("test modules that do not import (their test classes cannot be counted):\n  " + "\n  ".join(failures))
    found: dict[str, set[str]] = {}
    stack = list(ComponentCase.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        collected = cls.__name__.startswith("Test") and getattr(cls, "__test__", True) and cls.__module__ in modules
        if "name" in vars(cls) and collected:
            found.setdefault(cls.kind, set()).add(cls.name)
    return found


def _base_of(kind: str) -> str:
    """The base class to derive from for ``kind``: its table row's, else the case of that kind in tests/cases.py."""
    rows = {r.kind: r for r in read_table()}
    if kind in rows:
        return rows[kind].bases[0]
    bases = [n for n, c in vars(tests.cases).items() if isinstance(c, type) and vars(c).get("kind") == kind]
    return bases[0] if bases else f"ComponentCase (with kind = {kind!r}: tests/cases.py has no base for it yet)"


def untested_components(kind: str) -> list[str]:
    """What the meta-test reports for ``kind``: registered components without a test class and test classes
    naming no registered component (empty when every component of the kind has its test class)."""
    tested = _test_classes().get(kind, set())
    # data sets: the benchmarks registered in code (a user's recorded data sets are data, not components)
    registered = set(BENCHMARKS.names() if kind == "datasets" else _registry(kind).names())
    problems = []
    if registered - tested:
        base = _base_of(kind)
        row = next((r.describe() for r in read_table() if r.kind == kind), f"no row for {kind!r} in docs/architecture.md")
        problems.append(
            f"registered {kind} without a test class: {', '.join(sorted(registered - tested))}. Add, for each, "
            f"`class TestXxx({base}): name = \"<its name>\"` ({base} is in tests/cases.py; files: {row})"
        )
    if tested - registered:
        problems.append(f"test classes of {kind} that name no registered component: {', '.join(sorted(tested - registered))}")
    return problems


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_every_registered_component_has_a_test_class(kind: str) -> None:
    problems = untested_components(kind)
    assert not problems, "\n".join(problems)


def test_the_meta_test_reports_a_component_without_a_test_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard is on: a metric registered (in a copy of the registry, patched in for this test only)
    without a test class is reported, naming it, the base to derive from and the table row."""
    from pipeline.core import metrics

    class Fake:
        name = "fake_metric"
        description = "registered by tests/test_meta.py, never tested"

    real = metrics.METRICS
    assert untested_components("metrics") == []
    monkeypatch.setattr(metrics, "METRICS", Registry(real.kind, [*real.values(), Fake()]))
    assert "fake_metric" in _registry("metrics")
    (problem,) = untested_components("metrics")
    assert problem.startswith("registered metrics without a test class: fake_metric.")
    assert "class TestXxx(MetricCase)" in problem
    assert "row 'a metric': pipeline/core/metrics.py, tests/metrics/test_metrics.py" in problem
    monkeypatch.undo()
    assert "fake_metric" not in _registry("metrics") and "fake_metric" not in real  # nothing left registered


def test_a_test_module_that_does_not_import_fails_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module-level importorskip (or any import error) is a named failure, not a silent skip."""
    pkg = tmp_path / "meta_probe"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "test_skips.py").write_text("import pytest\npytest.importorskip('no_such_package_here')\n")
    (pkg / "test_breaks.py").write_text("import no_such_package_here\n")
    (pkg / "test_fine.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        got = import_failures(["meta_probe.test_skips", "meta_probe.test_breaks", "meta_probe.test_fine"])
    finally:
        for name in [m for m in sys.modules if m.split(".")[0] == "meta_probe"]:
            del sys.modules[name]
    assert [g.split(":")[0] for g in got] == ["meta_probe.test_skips", "meta_probe.test_breaks"]
    assert "Skipped" in got[0] and "ModuleNotFoundError" in got[1]


def _optional_modules() -> list[str]:
    """The import names of pyproject's optional extras (but dev: the tests need it) and NOT_DEPENDENCIES."""
    tomllib = pytest.importorskip("tomllib", reason="Python 3.10 has no tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].replace("-", "_") for k, v in extras.items() if k != "dev" for spec in v}
    return sorted(names | set(NOT_DEPENDENCIES))


def test_every_test_module_imports_without_the_optional_packages() -> None:
    """As on a fresh install (`pip install -e '.[dev]'`): in a fresh interpreter where ray, neo4j_viz,
    triton and networkx cannot be imported (None in sys.modules: import fails, find_spec says absent),
    every test module imports, so the meta-test runs and sees every test class."""
    hidden = _optional_modules()
    assert {"ray", "neo4j_viz"} <= set(hidden)
    script = (
        "import json, sys\n"
        f"for name in {hidden!r}: sys.modules[name] = None\n"
        "from tests.test_meta import import_failures, module_names\n"
        "print(json.dumps(import_failures(module_names())))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    failures = json.loads(out.stdout.strip().splitlines()[-1])
    assert failures == [], "test modules that do not import without " + ", ".join(hidden) + ":\n  " + "\n  ".join(failures)


# ------------------------------------------------------------------------------ the "how to add" table


def table_problems(rows: list[Row]) -> list[str]:
    """Where the table and the code disagree, one line each (empty when they agree)."""
    problems = []
    seen: dict[str, str] = {}
    for row in rows:
        where = f"row '{row.what}'"
        if row.kind in seen:
            problems.append(f"{where}: kind {row.kind!r} already has row '{seen[row.kind]}'")
        seen[row.kind] = row.what
        if row.kind not in REGISTRIES:
            problems.append(f"{where}: {row.kind!r} is no kind of pipeline.core.registry.REGISTRIES ({', '.join(REGISTRIES)})")
        elif row.registry != REGISTRIES[row.kind]:
            problems.append(f"{where}: registry {'.'.join(row.registry)}, but REGISTRIES[{row.kind!r}] is {'.'.join(REGISTRIES[row.kind])}")
        problems += [f"{where}: no such file {rel}" for rel in missing_files(row)]
        defined = re.compile(rf"^{re.escape(row.registry[1])}\s*[:=]", re.MULTILINE)
        if not any((ROOT / rel).is_file() and defined.search((ROOT / rel).read_text()) for rel in row.files):
            problems.append(f"{where}: none of its files defines {row.registry[1]} (list the module that registers it)")
        for i, name in enumerate(row.bases):
            base = getattr(tests.cases, name, None)
            if not (isinstance(base, type) and issubclass(base, ComponentCase)):
                problems.append(f"{where}: {name} is no case base in tests/cases.py")
            elif i == 0 and base.kind != row.kind:
                problems.append(f"{where}: {name} tests kind {base.kind!r}, not {row.kind!r}")
    problems += [f"REGISTRIES kind {k!r} has no row" for k in REGISTRIES if k not in seen]
    return problems


def test_the_how_to_add_table_matches_the_code() -> None:
    """docs/architecture.md's "How to add a component": a row per REGISTRIES kind, with that kind's registry,
    files that exist (one of them defining the registry) and bases of tests/cases.py. After a file moves
    this names every stale entry."""
    problems = table_problems(read_table())
    assert not problems, "docs/architecture.md, 'How to add a component' is stale:\n  " + "\n  ".join(problems)


def test_the_table_check_finds_stale_entries() -> None:
    """The check above catches each kind of drift (a made-up row of each)."""
    good = {r.kind: r for r in read_table()}["metrics"]
    bad = [
        Row("a metric", "metrics", ("pipeline.metrics", "METRICS"), ("pipeline/gone.py", "tests/x/test_NEW.py"), ("MetricCase",)),
        Row("a widget", "widgets", good.registry, good.files, ("WidgetCase",)),
        Row("a metric again", "metrics", good.registry, good.files, ("ModelCase",)),
    ]
    got = "\n".join(table_problems(bad))
    for expected in (
        "row 'a metric': registry pipeline.metrics.METRICS, but REGISTRIES['metrics'] is pipeline.core.metrics.METRICS",
        "row 'a metric': no such file pipeline/gone.py",
        "row 'a metric': no such file tests/x/test_NEW.py",
        "row 'a metric': none of its files defines METRICS",
        "row 'a widget': 'widgets' is no kind",
        "row 'a widget': WidgetCase is no case base",
        "row 'a metric again': kind 'metrics' already has row 'a metric'",
        "row 'a metric again': ModelCase tests kind 'models', not 'metrics'",
        "REGISTRIES kind 'stores' has no row",
    ):
        assert expected in got, expected
    with pytest.raises(ValueError, match="no section"):
        read_table("# Architecture\n")
    with pytest.raises(ValueError, match=r":4: expected `kind`"):
        read_table("## How to add a component\n| to add | kind | registry | files to touch | test base |\n|---|---|---|---|---|\n| a x | x | `a.B` | `a/b.py` | `C` |\n")
