"""The toy query sets the baselines train on (fixture ``toy`` in ``conftest.py``) and a small training
configuration over them: shared by tests/baselines/test_training.py and ``BaselineMethodCase``."""

from __future__ import annotations

from pathlib import Path

from pipeline.formats.queryset import query_to_records, write_query_set
from pipeline.softquery.model import Atom, Const, Query, Var
from pipeline.stages.train_qe import QEConfig

Y = Var("y")


def toy_set(path: Path, split: str) -> Path:
    """1p and 2i queries over the first entities of ppi5k's id space with hand-made answers: anchor e
    answers e+1 (utility 1.0) then e+2 (0.5) through relation 0, and e+3 (0.8) through relation 1."""
    rows = []
    for e in range(8):
        for q, answers, utils, qtype in (
            (Query.of([Atom(Const(e), 0, Y)]), [e + 1, e + 2], [1.0, 0.5], "1p"),
            (Query.of([Atom(Const(e), 1, Y, 0.2, 0.8)]), [e + 3], [0.8], "1p"),
            (Query.of([Atom(Const(e), 0, Y), Atom(Const(e + 1), 0, Y)]), [e + 2], [1.5], "2i"),
        ):
            rows.append(
                {
                    "id": f"{split}-{qtype}-{len(rows):05d}",
                    "type": qtype,
                    "text": "",
                    "atoms": query_to_records(q),
                    "answers_easy": answers,
                    "utilities_easy": utils,
                    "answers_hard": answers,
                    "utilities_hard": utils,
                    "seed": 0,
                }
            )
    return write_query_set(
        rows, path, {"dataset": "ppi5k", "split": split, "alpha": "zero", "beta": "equal", "source": "toy"}
    )


def toy_config(toy: tuple[Path, Path], model: str, epochs: int, loss: str = "weighted") -> QEConfig:
    """A small run of ``model`` on the toy sets (train, valid)."""
    return QEConfig(
        dataset="ppi5k",
        model=model,
        train_queries=(str(toy[0]),),
        valid_queries=str(toy[1]),
        dim=8,
        hidden=16,
        lr=0.05,
        epochs=epochs,
        batch_size=8,
        negatives=16,
        loss=loss,
        eval_every=4,
        seed=3,
    )
