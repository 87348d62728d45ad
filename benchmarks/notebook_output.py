"""What a researcher's notebook cell prints: runs a small flow (ingest, train 60
epochs, export, sample, answer; then the same cells again) on the Southern Women graph in a real Jupyter
kernel through nbclient and prints each cell's output chunks, its "epoch" lines and the notebook's size.

    pip install nbclient ipykernel nbformat ipywidgets
    python benchmarks/notebook_output.py [--repo DIR] [--work DIR]

--repo: the checkout whose ``pipeline`` the kernel imports (PYTHONPATH; default this one), so an older
commit (``git archive COMMIT | tar -x -C DIR``) can be measured beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def cells(work: Path) -> list[str]:
    first = [
        "import importlib.util as u\n"
        f"spec = u.spec_from_file_location('women', {str(REPO / 'tests' / 'women.py')!r})\n"
        "women = u.module_from_spec(spec); spec.loader.exec_module(women)\n"
        f"import pipeline as pl\nW = {str(work)!r}\nwomen.write_women_tsv(W + '/women.tsv')\n"
        "ds = pl.ingest('women', source=W + '/women.tsv', progress=False)",
    ]
    flow = [
        "run = pl.train('women', out=W + '/run', epochs=60, dim=16, device='cpu', seed=0)",
        "adj = pl.export(run, threshold=0.3, out=W + '/adj', allow_dense=True)",
        "qs = pl.sample('women', split='test', alpha='zero', beta='equal', per_type=3, seed=0, out=W + '/q', "
        "types='1p,2p')",
        "ans = pl.answer(qs, adjacency=adj, out=W + '/ans', workers=1)",
    ]
    return first + flow + flow  # the flow, then the same cells run again


def main() -> None:
    import nbformat
    from nbclient import NotebookClient

    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=str(REPO))
    ap.add_argument("--work", default="/tmp/notebook-output")
    args = ap.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ.update(PIPELINE_HOME=str(work / "home"), PYTHONPATH=args.repo)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells(work)])
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute()
    seconds = time.perf_counter() - t0
    nbformat.write(nb, work / "nb.ipynb")
    print("| cell | code | outputs | kinds | epoch lines | error |")
    print("|---|---|---:|---|---:|---|")
    for i, c in enumerate(nb.cells):
        kinds: dict[str, int] = {}
        for o in c.outputs:
            k = o.output_type + (":" + o.get("name", "") if o.output_type == "stream" else "")
            kinds[k] = kinds.get(k, 0) + 1
        text = "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        err = "; ".join(f"{o.get('ename')}: {o.get('evalue', '')[:90]}" for o in c.outputs if o.output_type == "error")
        code = c.source.splitlines()[0][:40] if i else "ingest"
        print(f"| {i} | `{code}` | {len(c.outputs)} | {kinds} | {text.count('epoch ')} | {err} |")
    print(f"\n{(work / 'nb.ipynb').stat().st_size:,} bytes of .ipynb, {seconds:.1f} s")


if __name__ == "__main__":
    main()
