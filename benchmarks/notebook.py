"""What a researcher's notebook stores: each cell's output chunks in a real Jupyter kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.harness import BenchmarkError, Goal, Result, Table, benchmark
from benchmarks.processes import ROOT, env, pipeline_argv


def cells(work: Path, epochs: int) -> list[str]:
    first = [
        "import importlib.util as u\n"
        f"spec = u.spec_from_file_location('women', {str(ROOT / 'tests' / 'women.py')!r})\n"
        "women = u.module_from_spec(spec); spec.loader.exec_module(women)\n"
        f"import pipeline as pl\nW = {str(work)!r}\nwomen.write_women_tsv(W + '/women.tsv')\n"
        "ds = pl.ingest('women', source=W + '/women.tsv', progress=False)",
    ]
    flow = [
        f"run = pl.train('women', model='ukge_logi', out=W + '/run', epochs={epochs}, dim=16, device='cpu', seed=0)",
        "adj = pl.export(run, threshold=0.3, out=W + '/adj', allow_dense=True)",
        "qs = pl.sample('women', split='test', alpha='zero', beta='equal', per_type=3, seed=0, out=W + '/q', "
        "types='1p,2p')",
        "ans = pl.answer(qs, adjacency=adj, out=W + '/ans', workers=1)",
    ]
    return first + flow + flow  # the flow, then the same cells run again


@benchmark(
    "notebook-output",
    title="A researcher's cells in a notebook",
    goals=[
        # a bar and its summary lines, never a line per epoch (461 chunks for 60 epochs before widget bars)
        Goal("chunks", "output chunks of a cell (the most, with ipywidgets installed)", "<=", 5, "chunks")
    ],
    quick={"epochs": 5},
)
def notebook_output(*, repo: Path = ROOT, epochs: int = 60, work: Path | None = None) -> Result:
    """In a real Jupyter kernel (nbclient, ipykernel): ingest of the Southern Women graph (``tests/women.py``:
    32 entities, 3 relations, 499 facts), then ``pl.train(epochs=60, dim=16)``, ``pl.export``,
    ``pl.sample``, ``pl.answer``, then the same four cells again; each cell's output chunks (what a notebook
    stores and redraws), its "epoch" lines, the notebook's size. ``--repo``: the checkout whose ``pipeline``
    the kernel imports (an older commit unpacked with ``git archive`` can be measured beside this one)."""
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError:
        raise BenchmarkError(
            "nbclient and nbformat are not installed (pip install -e '.[notebook]')"
        ) from None
    try:
        import ipywidgets  # noqa: F401

        widgets = True
    except ImportError:
        widgets = False
    folder = Path(work or tempfile.mkdtemp(prefix="bench-notebook-"))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    saved = {k: os.environ.get(k) for k in ("PIPELINE_HOME", "PYTHONPATH")}
    os.environ.update(PIPELINE_HOME=str(folder / "home"), PYTHONPATH=str(repo))
    try:
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells(folder, epochs)])
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute()
        seconds = time.perf_counter() - t0
    finally:
        # the embedded store the kernel's ingest started in the throw-away home
        subprocess.run(pipeline_argv("store", "stop"), env=env(repo), capture_output=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    nbformat.write(nb, folder / "nb.ipynb")
    rows = []
    for i, c in enumerate(nb.cells):
        kinds: dict[str, int] = {}
        for o in c.outputs:
            k = o.output_type + (":" + o.get("name", "") if o.output_type == "stream" else "")
            kinds[k] = kinds.get(k, 0) + 1
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        err = "; ".join(
            f"{o.get('ename')}: {o.get('evalue', '')[:90]}" for o in c.outputs if o.output_type == "error"
        )
        code = c.source.splitlines()[0].split("(")[0] if i else "ingest"
        rows.append(
            [
                i,
                f"`{code}`" + (" (again)" if i > 4 else ""),
                len(c.outputs),
                ", ".join(f"{k} {v}" for k, v in kinds.items()) or None,
                text.count("epoch "),
                err or None,
            ]
        )
    return Result(
        [Table(["cell", "code", "output chunks", "kinds", "epoch lines", "error"], rows)],
        {"chunks": max(r[2] for r in rows) if widgets else None},
        [
            f"{(folder / 'nb.ipynb').stat().st_size:,} bytes of .ipynb, {seconds:.1f} s; ipywidgets "
            f"{'installed' if widgets else 'not installed (text bars)'}."
        ],
    )
