"""A tiny real pipeline for calibration tests: a toy KG, a short UKGE training, its export, query sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipeline.core.kg import observed_graph
from pipeline.engine import Adjacency
from pipeline.formats.queryset import write_query_set
from pipeline.sampling.truth import ground_truth
from pipeline.softquery.model import Atom, Const, Query, Var
from tests.answer.toy import rows_of
from tests.models.toy import toy_kg

Y, X = Var("y"), Var("x")


def make_queries(kg, split: str, per_type: int, alpha: float, seed: int) -> tuple[list[Query], list[str]]:
    """Queries of types 1p, 2i, 2in, 2p grounded on facts of the split's graph (anchors that have answers)."""
    facts = kg.graph(split)[["h", "r", "t"]].to_numpy()
    rng = np.random.default_rng(seed)
    out: list[Query] = []
    types: list[str] = []
    by_tail: dict[int, list[tuple[int, int]]] = {}
    by_head: dict[int, list[tuple[int, int]]] = {}
    for h, r, t in facts:
        by_tail.setdefault(int(t), []).append((int(h), int(r)))
        by_head.setdefault(int(h), []).append((int(r), int(t)))
    multi = [t for t, hs in by_tail.items() if len(hs) >= 2]
    for _ in range(per_type):
        h, r, t = facts[rng.integers(len(facts))]
        out.append(Query.of([Atom(Const(int(h)), int(r), Y, alpha)]))
        types.append("1p")
        y = multi[rng.integers(len(multi))]
        (h1, r1), (h2, r2) = (by_tail[y][i] for i in rng.choice(len(by_tail[y]), 2, replace=False))
        out.append(Query.of([Atom(Const(h1), r1, Y, alpha), Atom(Const(h2), r2, Y, alpha)]))
        types.append("2i")
        out.append(Query.of([Atom(Const(h1), r1, Y, 0.0, 1.0, True), Atom(Const(h2), r2, Y, alpha)]))
        types.append("2in")
        r2_, x = by_head[int(h)][rng.integers(len(by_head[int(h)]))]
        if x in by_head:
            r3, _ = by_head[x][rng.integers(len(by_head[x]))]
            out.append(Query.of([Atom(Const(int(h)), r2_, X, alpha), Atom(X, r3, Y, alpha)]))
            types.append("2p")
    return out, types


def write_set(kg, split: str, path: Path, per_type: int, alpha: float, seed: int) -> Path:
    queries, types = make_queries(kg, split, per_type, alpha, seed)
    truth = ground_truth(queries, Adjacency.from_graph(observed_graph(kg, split)))
    rows = rows_of(queries, truth, types, f"{split}-{seed}")
    meta = {"dataset": kg.name, "split": split, "alpha": str(alpha), "beta": "equal", "source": "test"}
    return write_query_set(rows, path, meta)


@pytest.fixture(scope="session")
def toy_pipeline(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A trained UKGE run on a toy KG (40 entities, 3 relations), its export and train/valid/test query sets."""
    from pipeline.models import default_config, train
    from pipeline.stages.export import export_adjacency

    root = tmp_path_factory.mktemp("toy_pipeline")
    kg = toy_kg(n_entities=40, n_relations=3, n_facts=700, seed=1, softlogic=False)
    cfg = default_config("toy", "ukge_logi", dim=16, epochs=15, lr=0.01, batch_size=128, seed=0, device="cpu")
    train(kg, cfg, root / "run", progress=False)
    manifest = export_adjacency(
        root / "run", threshold=0.3, out=root / "export", device="cpu", progress=False, allow_dense=True
    )
    return {
        "kg": kg,
        "root": root,
        "run": root / "run",
        "export": Path(manifest["path"]),
        "train": write_set(kg, "train", root / "q" / "train.parquet", 12, 0.0, 0),
        "valid": write_set(kg, "valid", root / "q" / "valid.parquet", 8, 0.3, 1),
        "test": write_set(kg, "test", root / "q" / "test.parquet", 8, 0.3, 2),
    }
