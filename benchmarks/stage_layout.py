"""How much code one `pipeline answer` crosses, and how many files each "how to add X" touches.

Prints a table: the lines of ``pipeline/cli.py``; for one ``pipeline answer`` on a toy export (calibration
none and D) a run-time trace (``sys.setprofile``) of the distinct ``pipeline`` modules entered while the
command runs and the call hops (pipeline frames on the stack) from the command to the first call into the
max-plus search; and the files each extension touches: each kind of component as docs/architecture.md's
"How to add a component" table lists them (read through tests/how_to_add.py; tests/test_meta.py checks the
table against the code), and a column of the answers file (the modules that spell a column name).

    PYTHONPATH=. python benchmarks/stage_layout.py [--json]

Builds its toy inputs (a trained UKGE run on 40 entities, its export, valid/test query sets) in a
temporary folder: about 20 s on one CPU core.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PKG = str(ROOT / "pipeline")
SEARCH = str(ROOT / "pipeline" / "engine" / "search.py")

# a column of the answers file: its format module, plus every module that spells a column name itself
COLUMN_NAMES = ("truth_rank", "rank_first", "truth_utility", "entity_name")


def _column_files() -> list[str]:
    pat = re.compile("|".join(rf"[\"']{c}[\"']" for c in COLUMN_NAMES))
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "pipeline").rglob("*.py") if pat.search(p.read_text()))


def _toy(root: Path) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT))
    from pipeline.models import default_config, train
    from pipeline.stages.export import export_adjacency
    from tests.calibration.conftest import write_set
    from tests.models.toy import toy_kg

    kg = toy_kg(n_entities=40, n_relations=3, n_facts=700, seed=1, softlogic=False)
    cfg = default_config("toy", "ukge_logi", dim=16, epochs=5, lr=0.01, batch_size=128, seed=0, device="cpu")
    train(kg, cfg, root / "run", progress=False)
    man = export_adjacency(root / "run", threshold=0.3, out=root / "export", device="cpu", progress=False, allow_dense=True)
    return {
        "export": Path(man["path"]),
        "valid": write_set(kg, "valid", root / "q" / "valid.parquet", 8, 0.3, 1),
        "test": write_set(kg, "test", root / "q" / "test.parquet", 8, 0.3, 2),
    }


def trace_answer(args: list[str]) -> dict[str, Any]:
    """Run `pipeline answer ARGS` in process under a profiler: distinct pipeline modules entered, and the
    hops (pipeline frames) from the click command to the first max-plus search call."""
    from click.testing import CliRunner

    from pipeline.cli import cli

    modules: set[str] = set()
    hops: list[int] = []
    chain: list[str] = []

    def prof(frame: Any, event: str, _arg: Any) -> None:
        if event != "call":
            return
        fn = frame.f_code.co_filename
        if not fn.startswith(PKG):
            return
        modules.add(fn)
        if not hops and fn == SEARCH and frame.f_code.co_name != "<module>":
            stack = []
            f = frame
            while f is not None:
                if f.f_code.co_filename.startswith(PKG):
                    stack.append(f"{Path(f.f_code.co_filename).relative_to(ROOT)}:{f.f_code.co_name}")
                f = f.f_back
            stack.reverse()
            start = next((i for i, s in enumerate(stack) if s.endswith("answer_cmd")), None)
            if start is None:  # a frame of search.py outside the command (its class bodies while imported)
                return
            if any(s.endswith(":<module>") for s in stack[start:]):  # a module (or a class body in it) being imported
                return
            hops.append(len(stack) - start - 1)
            chain.extend(stack[start:])

    sys.setprofile(prof)
    try:
        res = CliRunner().invoke(cli, ["answer", *args, "--json"], catch_exceptions=False)
    finally:
        sys.setprofile(None)
    assert res.exit_code == 0, res.output
    return {
        "modules": len(modules),
        "hops": hops[0] if hops else None,
        "chain": chain,
        "chain_modules": len(dict.fromkeys(c.split(":")[0] for c in chain)),
    }


def _fresh(args: list[str]) -> dict[str, Any]:
    """trace_answer in a fresh interpreter (module imports count as entries only the first time)."""
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--trace", *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--trace", nargs=argparse.REMAINDER, help="(internal) trace one `pipeline answer ARGS`")
    a = ap.parse_args()
    if a.trace is not None:
        print(json.dumps(trace_answer(a.trace)))
        return
    sys.path.insert(0, str(ROOT))
    from tests.how_to_add import missing_files, read_table

    how_to_add = read_table()
    missing = [p for row in how_to_add for p in missing_files(row)]
    assert not missing, f"docs/architecture.md's 'How to add a component' names missing files: {missing}"
    doc: dict[str, Any] = {"cli_lines": len((ROOT / "pipeline" / "cli.py").read_text().splitlines())}
    with tempfile.TemporaryDirectory() as tmp:
        toy = _toy(Path(tmp))
        # --workers 1: the default answers in forked workers, where this process's profiler sees no search
        base = [str(toy["test"]), "--adjacency", str(toy["export"]), "--device", "cpu", "--out", f"{tmp}/a", "--workers", "1"]
        doc["answer none"] = _fresh(base)
        doc["answer D"] = _fresh([*base, "--calibration", "D", "--valid-queries", str(toy["valid"])])
    doc["how_to_add"] = {row.what: len(row.files) for row in how_to_add}
    doc["column_files"] = _column_files()
    doc["how_to_add"]["a column of the answers file"] = len(doc["column_files"])
    if a.json:
        print(json.dumps(doc, indent=2))
        return
    print(f"| measure | value |\n|---|---|\n| lines of pipeline/cli.py | {doc['cli_lines']} |")
    for run in ("answer none", "answer D"):
        t = doc[run]
        print(f"| `pipeline {run}`: pipeline modules entered | {t['modules']} |")
        print(f"| `pipeline {run}`: call hops cli -> search ({t['chain_modules']} modules on the way) | {t['hops']} |")
    for k, n in doc["how_to_add"].items():
        print(f"| files to add {k} | {n} |")
    print("\nmodules spelling answers columns: " + ", ".join(doc["column_files"]))
    print("\nchain (answer none):\n  " + "\n  ".join(doc["answer none"]["chain"]))


if __name__ == "__main__":
    main()
