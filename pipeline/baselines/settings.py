"""What defines a query-embedding baseline run (:class:`QEConfig`, saved as its ``config.json``), declared
once (:mod:`pipeline.core.options`): ``pipeline train-qe``'s options, the ``--qe KEY=VALUE`` settings of
``pipeline reproduce --baselines`` (``qe={...}`` in ``pl.run``) and their checks come from these fields. No
torch here: the command line builds its options from this module when it starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.core.options import check, setting

LOSSES = ("weighted", "listwise", "weighted+listwise")  # pipeline.baselines.losses.compute_loss
TNORMS = ("product", "godel", "lukasiewicz")  # LogicE's (pipeline.baselines.logice.t_norm)


@dataclass(frozen=True)
class QEConfig:
    """Everything that defines a baseline run (saved as config.json; a resume must match it but epochs).
    The bounds are far above any run of docs/baselines.md: they stop a typo (``epochs=1e9``, ``lr=1e30``)
    at the door instead of days of work or a model of NaNs."""

    dataset: str
    model: str
    train_queries: tuple[str, ...]
    valid_queries: str
    dim: int = setting(400, low=1, high=1 << 14, help="Embedding dimension (and NE dimension).")
    hidden: int = setting(800, low=1, high=1 << 16, help="Hidden width of the MLPs.")
    gamma: float = setting(12.0, above=0.0, high=1e4, help="Margin of the scores.")
    lr: float = setting(1e-4, above=0.0, high=1.0, help="Adam learning rate.")
    epochs: int = setting(20, low=1, high=100_000, help="Training epochs.")
    batch_size: int = setting(256, low=1, high=1 << 20, help="Train queries per step.")
    negatives: int = setting(128, low=1, high=1 << 16, help="Uniformly sampled negatives per query.")
    batch_negatives: int = setting(0, low=0, high=1 << 16,
                                   help="More negatives per query drawn from the other answers of its batch "
                                        "(pushes away entities that answer many queries).")
    max_answers: int = setting(32, low=1, high=1 << 16, help="Answers scored per query and step (random subset).")
    loss: str = setting("weighted", choices=LOSSES, help="The training loss.")
    tnorm: str = setting("product", choices=TNORMS, help="LogicE's t-norm.")
    eval_every: int = setting(1, low=1, high=100_000, help="Epochs between valid evaluations.")
    max_valid: int = setting(0, low=0, high=10**9, help="Valid queries per type used for selection (0 = all).")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of the initialisation and the batches.")
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from loaders import dataset_name
        from pipeline.core.checks import check_text
        from pipeline.core.errors import PipelineError, option
        from pipeline.core.registry import registry

        check(self)
        # one spelling of each name (LOGICE_NE is logice_ne, PPI5K ppi5k) in the run's config.json, which
        # a resume and the answering stage compare with theirs
        try:
            object.__setattr__(self, "model", registry("baselines").canonical(check_text(self.model, "model")))
        except PipelineError as exc:
            raise PipelineError(f"{option('model', self.model)}: {exc}") from None
        object.__setattr__(self, "dataset", dataset_name(check_text(self.dataset, "dataset")))

    def model_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"dim": self.dim, "hidden": self.hidden, "gamma": self.gamma}
        if self.model == "logice_ne":
            kw["tnorm"] = self.tnorm
        return kw
