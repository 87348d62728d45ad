"""Which answering method ``pipeline answer`` builds, and from what: :class:`MethodOptions`, declared once
(:mod:`pipeline.core.options`), so the command line's options, the Python API's keywords and their checks
come from these fields. Calibration L's settings are their own class, :class:`LOptions` (MethodOptions
derives from it), so ``pipeline reproduce`` offers the very same declarations. No torch here: the command
line builds its options from this module at start."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipeline.core.options import check, setting

# L's named variants (pipeline.methods.src.variants): each a full set of defaults the other l_* options override
L_VARIANTS = ("default", "authors", "heldout")
# L's settings do something only where a calibration that uses L is chosen (pipeline answer's --calibration;
# pipeline reproduce's --calibrations, passed as context: pipeline.core.options.check)
USES_L = (("calibration", ("L", "D+L")),)


def l_setting(default: Any, **how: Any) -> Any:
    """One of L's settings (:func:`pipeline.core.options.setting`, needing a calibration that uses L)."""
    return setting(default, needs=USES_L, **how)


@dataclass(frozen=True, kw_only=True)
class LOptions:
    """Calibration L's settings. None: the variant's value (``l_variant``; docs/studies/calibration-l.md).
    Every value L trains with is recorded in the saved calibration (its key and ``L.json``). The bounds are
    far beyond any recipe that was tried (the authors' 5,000 steps at 5e-6; docs/studies/calibration-l.md): a learning
    rate of 1e30 or 10^12 steps is a typo, refused before any work; given without a calibration that uses L,
    each is refused (it would do nothing)."""

    l_variant: str = l_setting("default", choices=L_VARIANTS,
                             help="Calibration L's recipe: default (affine on the confidences, answers and "
                                  "uniform non-answers weigh the same), authors (the authors' code: affine on "
                                  "the raw score, relation embeddings trained, re-thresholded, 5,000 steps at "
                                  "5e-6), heldout (default fitted to the valid graph's utilities, a pull to the identity).")
    l_epochs: int = l_setting(20, low=0, high=10_000, help="Epochs of calibration L (passes over the train queries; L is scored on the valid queries after each).")
    l_steps: int | None = l_setting(None, low=0, high=10_000_000,
                                  help="Optimizer steps of L instead of epochs (0: use --l-epochs; authors: 5000).")
    l_check_every: int | None = l_setting(None, low=0, high=10_000_000,
                                        help="Steps between L's valid checks (0: once per epoch; authors: 500).")
    l_lr: float | None = l_setting(None, above=0.0, high=1.0, help="L's learning rate (default 1e-3; authors 5e-6).")
    l_schedule: str | None = l_setting(None, choices=("constant", "authors"),
                                     help="L's learning-rate schedule: constant, or authors (divided by 5 at step "
                                          "2,500, then again each time 1.5x as many steps have passed; Adam restarted).")
    l_batch: int | None = l_setting(None, low=1, high=65_536, help="Train queries per step of L (default 64).")
    l_negatives: int | None = l_setting(None, low=0, high=100_000, help="Uniform non-answers sampled per query (default 32; authors 128).")
    l_weights: str | None = l_setting(None, choices=("balanced", "authors"),
                                    help="L's loss: balanced (the answers' mean squared error and the sampled non-answers' "
                                         "weigh the same) or authors (one sampled answer and the negatives per query, "
                                         "the query weighted sqrt(1/(answers + 4))).")
    l_negative_weight: float | None = l_setting(None, low=0.0, high=1e6,
                                              help="Weight of the sampled non-answers' error under balanced weights (default 1).")
    l_train: str | None = l_setting(None, choices=("affine", "affine+relations"),
                                  help="What L trains: the affine map only (the backbone frozen), or also the "
                                       "backbone's relation embeddings (authors; UKGE backbones).")
    l_form: str | None = l_setting(None, choices=("confidence", "score"),
                                 help="What L corrects: the exported confidence, or the backbone's raw score before "
                                      "its mapping, then re-thresholded at the export's threshold (authors; UKGE backbones).")
    l_targets: str | None = l_setting(None, choices=("train", "valid"),
                                    help="Whose utilities L fits: the train graph's (default), or the valid graph's "
                                         "(train + valid facts: facts the backbone generalised to count as true).")
    l_terms: str | None = l_setting(None, choices=("all", "relation"),
                                  help="L's terms: all (head, relation and tail features) or relation (per-relation "
                                       "rho and lambda only: no fact is reordered within its relation; heldout).")
    l_identity: float | None = l_setting(None, low=0.0, high=1e6,
                                       help="Weight of a penalty on L's mean squared change of the stored confidences "
                                            "(0: none; heldout: 1).")
    l_shapes: tuple[str, ...] | None = l_setting(None, registry="query-types", help="The train query types L fits (default: every "
                                                          "train type; authors: 1p,2i, the shapes without variables or negation).")

    def __post_init__(self) -> None:
        check(self)

    def check_trains(self) -> None:
        """Refuse settings under which L would not be fitted (``l_epochs=0`` without steps: answers labelled L
        from an L never trained) or would fit no train type; for a caller whose calibration uses L."""
        from pipeline.methods.src.recipe import l_config

        l_config(self, 0)

    def l_settings(self) -> dict[str, Any]:
        """The L options given (those not at their default), by name: what ``pipeline reproduce`` records."""
        return {f.name: getattr(self, f.name) for f in fields(LOptions) if getattr(self, f.name) != f.default}


def l_options(settings: dict[str, Any]) -> LOptions:
    """LOptions from recorded settings (checked as at either door)."""
    return LOptions(**settings)


@dataclass(frozen=True, kw_only=True)
class MethodOptions(LOptions):
    """What the person chose about the method (each method reads the fields its
    :class:`~pipeline.methods.base.Capabilities` declare). kg: the loaded data set when the caller has it
    (not an option: saves loading it again)."""

    method: str | None = setting(None, registry="methods",
                                 help="Answering method (`pipeline ls methods`; default: src, or the baseline that trained --model).")
    adjacency: str | Path | None = setting(None, help="A neural adjacency export directory (SRC).")
    model: str | Path | None = setting(None, help="A query-embedding baseline run (`pipeline train-qe`) instead of SRC.")
    calibration: str = setting("none", registry="calibrations", help="SRC's calibration (`pipeline ls calibrations`).")
    union: str | None = setting(None, choices=("dnf", "conorm"),
                                help="Baselines: answer disjunctions by DNF (max over branches, default) or LogicE's t-conorm.")
    run: str | Path | None = setting(None, help="The backbone's run directory, for calibration L (default: the export's).")
    device: str | None = setting(None, kind="device", help="cpu | cuda | cuda:N (default: cuda when present).")
    seed: int = setting(0, low=0, high=2**32 - 1, help="Seed of calibration L's training.")
    cycle_cap: int | None = setting(None, low=1, help="SRC: at most this many candidates per cycle variable of a query "
                                                      "with cycles (its utilities are then lower bounds).")
    kg: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check(self)
        if self.calibration in USES_L[0][1]:
            self.check_trains()
