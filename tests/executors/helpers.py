"""Task functions the executor tests send to workers (module level, so a Ray worker imports them)."""

from __future__ import annotations

import filecmp
import os
from pathlib import Path
from typing import Any

from pipeline.executors import LocalExecutor
from pipeline.models import default_config, train
from pipeline.stages.export import write_export
from pipeline.stages.options import ExportOptions
from tests.models.toy import toy_kg

N, THRESHOLD, ROWS = 120, 0.3, 17  # 17-head blocks: shards end mid-relation and the last block is short


def die_once(marker: str, x: int) -> int:
    """Kill the worker process on the first attempt (as an out-of-memory kill would), succeed on the retry."""
    m = Path(marker)
    if not m.exists():
        m.write_text("killed once")
        os._exit(1)
    return 2 * x


def train_runs(root: Path) -> dict[str, Path]:
    """Two toy runs (UKGE logi, BEUrRE) of N entities, 3 relations."""
    kg = toy_kg(n_entities=N, n_relations=3, n_facts=500)
    out = {}
    for model in ("ukge_logi", "beurre"):
        train(kg, default_config("toy", model, epochs=2, dim=8, batch_size=64, lr=0.05, seed=0), root / model, progress=False)
        out[model] = root / model
    return out


def export(run: Path, out: Path, **kw: Any) -> dict[str, Any]:
    # an executor object (the tests' own: failing, counting) goes to the stage's body, write_export
    executor = kw.pop("executor", None)
    options = ExportOptions(threshold=kw.pop("threshold", THRESHOLD), out=out, progress=False, block_rows=ROWS,
                            allow_dense=True, **kw)
    return write_export(run, options, executor)


def same_files(a: Path, b: Path, manifest: dict[str, Any]) -> bool:
    return all(filecmp.cmp(a / r["file"], b / r["file"], shallow=False) for r in manifest["relations"])


class Stop(Exception):
    pass


class StopAfter(LocalExecutor):
    """A local executor whose run dies after ``k`` tasks (as a killed driver would): shards stay behind."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def map(self, fn: Any, tasks: Any, shared: Any = None, **kw: Any) -> Any:
        for i, item in enumerate(super().map(fn, tasks, shared, **kw)):
            yield item
            if i + 1 == self.k:
                raise Stop
