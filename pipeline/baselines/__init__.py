"""The SRC paper's query-embedding baselines with number embedding: LogicE+NE and ConE+NE.

number_embedding (the NE code g), logice / cone (pure operators), plan (query graph -> computation tree),
models (torch modules), losses, runs (run directory files); the resumable trainer over query sets (the
`pipeline train-qe` stage) is pipeline.stages.train_qe, the answering method pipeline.methods.qe (answers in
the same format as SRC).
"""

from __future__ import annotations

from typing import Any

__all__ = ["QE_MODELS", "get_qe_model_class"]


def __getattr__(name: str) -> Any:
    """The registry and its lookup, imported on first use: ``pipeline.baselines.settings`` (the options the
    command line builds at start) stays free of torch."""
    if name in __all__:
        from pipeline.baselines import models

        return getattr(models, name)
    raise AttributeError(f"module 'pipeline.baselines' has no attribute {name!r}")
