"""The answering stage with SRC's options flat, as the calibration and executor tests call it."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def answer_src(
    queries: str | Path,
    adjacency: str | Path,
    calibration: str = "none",
    out_dir: str | Path | None = None,
    valid_queries: str | Path | None = None,
    train_queries: str | Path | None = None,
    run_dir: str | Path | None = None,
    *,
    device: str | None = None,
    seed: int = 0,
    l_epochs: int = 20,
    progress: bool = True,
    kg: Any = None,
    allow_split_mismatch: bool = False,
    explain: int = 0,
    executor: Any = None,
    **l_options: Any,
) -> dict[str, Any]:
    """`pipeline answer QUERIES --adjacency DIR --calibration C ...` through :func:`answer_queries`
    (l_options: calibration L's other settings, ``l_lr=...``). As `pipeline reproduce` does, the tests
    pass one set of settings for every calibration: each goes only where it applies (L's settings and the
    train queries to L and D+L, the valid queries to every calibration but none), since the stage refuses
    a setting that would do nothing."""
    from pipeline.methods import MethodOptions
    from pipeline.methods.src.calibrations import CALIBRATIONS
    from pipeline.stages.answer import AnswerOptions, answer_queries

    uses_l = CALIBRATIONS[calibration].uses_l
    if not uses_l:
        l_options, train_queries = {}, None
    if calibration == "none":
        valid_queries = None
    method = MethodOptions(method="src", adjacency=adjacency, calibration=calibration, run=run_dir, device=device,
                           seed=seed, kg=kg, **({"l_epochs": l_epochs, **l_options} if uses_l else {}))
    how = AnswerOptions(out=out_dir, valid_queries=valid_queries, train_queries=train_queries,
                        allow_split_mismatch=allow_split_mismatch, explain=explain, progress=progress,
                        **({} if executor is None else {"executor": executor}))
    return dict(answer_queries(queries, method, how))
