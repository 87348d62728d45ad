"""What calibration L trains with: :class:`LConfig` (every value, all part of the saved fit's key and of
``L.json``) and the named variants (``--l-variant``), each a full set of defaults that the other ``--l-*``
options override (:func:`l_config`). No torch here.

- ``default``: the affine correction of the exported confidences over the frozen backbone's features,
  fitted to the train graph's utilities of alpha-0 train queries (answers and uniform non-answers weigh
  the same), 20 epochs at lr 1e-3, the best epoch on the valid queries kept (the identity included).
- ``authors``: what the authors' released code trains (rabi-fei/Soft-Queries-on-Uncertain-KG,
  ``Neural_SIU.py``, ``config/train/FIT_*_soft_Godel.yaml``): the affine map applied to the backbone's raw
  score before its mapping, the relation embeddings trained too, re-thresholded at the export threshold;
  one sampled answer plus 128 uniform negatives (target 0) per query, the query weighted
  ``sqrt(1/(n + 4))``; 5,000 steps of 64 queries at lr 5e-6, divided by 5 at step 2,500 and again each
  time 1.5x as many steps have passed (Adam restarted each time); only the shapes without an existential
  variable or a negation (1p, 2i). Checked on the valid queries every 500 steps (their evaluation period).
- ``heldout``: designed to help (docs/studies/calibration-l.md): fitted to the valid graph's utilities
  (train + valid facts, so a fact the backbone generalised to and the valid split holds is a target, not
  an error to erase), per-relation terms only (rho and lambda of the relation's features: an affine map
  with 1 + rho > 0 reorders no fact within its relation, so 1p's rankings stay and the entity terms,
  where the train graph's idiosyncrasies are learnt, are gone), a pull to the identity (the mean squared
  change of stored confidences, weight 1) and a lower learning rate (1e-4).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from pipeline.core.errors import PipelineError, option

# the authors' schedule: lr / 5 at this step, then again each time the step passes 1.5x the last one
AUTHORS_FIRST_DROP = 2500
AUTHORS_DROP_GROWTH = 1.5


@dataclass(frozen=True)
class LConfig:
    """Hyper-parameters of training L (all part of its cache key). steps > 0 trains that many optimizer
    steps (batches drawn epoch after epoch of a fresh shuffle) instead of ``epochs`` passes; check_every > 0
    scores the valid queries every that many steps (0: after every epoch)."""

    epochs: int = 20
    lr: float = 0.001
    batch_size: int = 64
    negatives: int = 32  # uniformly sampled entities per query besides its answers
    negative_weight: float = 1.0  # weight of the sampled non-answers' mean error (answers' weigh 1)
    weight_decay: float = 0.0
    seed: int = 0
    steps: int = 0
    check_every: int = 0
    schedule: str = "constant"  # or "authors"
    weights: str = "balanced"  # or "authors"
    train: str = "affine"  # or "affine+relations"
    form: str = "confidence"  # or "score"
    targets: str = "train"  # or "valid"
    identity: float = 0.0  # weight of the mean squared change of stored confidences
    terms: str = "all"  # or "relation": the head and tail terms stay 0
    shapes: tuple[str, ...] = ()  # train query types fitted; () = every one
    variant: str = "default"

    def record(self) -> dict[str, Any]:
        """Every value, for the key and L.json (tuples as lists, as JSON reads them back)."""
        d = asdict(self)
        d["shapes"] = list(self.shapes)
        return d

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (1-based) under the schedule."""
        if self.schedule != "authors":
            return self.lr
        return self.lr / 5 ** authors_drops(step)

    @property
    def total_steps(self) -> int | None:
        """Optimizer steps when set by steps (None: epochs x batches)."""
        return self.steps or None


def authors_drops(step: int) -> int:
    """How many times the authors' schedule has divided the rate by 5 at step ``step`` (1-based): at 2,500,
    3,750, 5,625, ... (each drop at 1.5x the last; their loop tests ``step >= warm_up`` then grows it)."""
    drops, at = 0, float(AUTHORS_FIRST_DROP)
    while step >= at:
        drops += 1
        at *= AUTHORS_DROP_GROWTH
    return drops


VARIANTS: dict[str, LConfig] = {
    "default": LConfig(),
    "authors": LConfig(
        lr=5e-6, batch_size=64, negatives=128, steps=5000, check_every=500, schedule="authors", weights="authors",
        train="affine+relations", form="score", shapes=("1p", "2i"), variant="authors",
    ),
    "heldout": LConfig(lr=1e-4, targets="valid", identity=1.0, terms="relation", variant="heldout"),
}

# LOptions field -> LConfig field (None in LOptions: the variant's value)
_FIELDS = {
    "l_epochs": "epochs", "l_steps": "steps", "l_check_every": "check_every", "l_lr": "lr",
    "l_schedule": "schedule", "l_batch": "batch_size", "l_negatives": "negatives", "l_weights": "weights",
    "l_negative_weight": "negative_weight", "l_train": "train", "l_form": "form", "l_targets": "targets",
    "l_identity": "identity", "l_shapes": "shapes", "l_terms": "terms",
}


def l_config(options: Any, seed: int) -> LConfig:
    """The LConfig of L options (pipeline.methods.options.LOptions: the variant's defaults, then every
    option given); ``l_epochs`` overrides a variant's only when it is not the option's default (20)."""
    from dataclasses import fields

    from pipeline.softquery.types import TRAIN_TYPES

    # the options' own declarations (pipeline.methods.options.LOptions, not imported: it imports this module)
    defaults = {f.name: f.default for f in fields(options)} if options is not None else {}
    base = VARIANTS[options.l_variant if options is not None else "default"]
    given = {}
    for name, target in _FIELDS.items():
        value = getattr(options, name, None)
        if value is None or (name == "l_epochs" and value == defaults.get("l_epochs")):
            continue
        given[target] = tuple(value) if target == "shapes" else value
    cfg = replace(base, seed=int(seed), **given)
    bad = [s for s in cfg.shapes if s not in TRAIN_TYPES]
    if bad:
        raise PipelineError(f"{option('l_shapes', ','.join(cfg.shapes))}: {', '.join(bad)} not a train query type "
                            f"({', '.join(TRAIN_TYPES)})")
    if cfg.steps == 0 and cfg.epochs == 0:
        # an L never fitted would answer as the identity under the label SRC(L): a result from nothing
        raise PipelineError(f"{option('l_epochs', 0)}: calibration L would train no step (and no steps are set), "
                            f"so its answers would come from an L never fitted; give at least 1 epoch, or a number "
                            f"of steps ({option('l_steps')})")
    return cfg
