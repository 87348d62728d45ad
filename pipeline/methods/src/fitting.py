"""What fitting SRC's calibrations reads besides the method, and the content keys of saved fits.

:meth:`SRC.fit_l <pipeline.methods.src.method.SRC.fit_l>` and :meth:`SRC.choose_delta
<pipeline.methods.src.method.SRC.choose_delta>` fit for one answering run or reuse a saved fit with the same
key. Saved fits live under the backbone's run, ``RUN/calibration/``: ``L-<key>/``
(:mod:`pipeline.methods.src.affine`) and ``D-<key>.json`` (:mod:`pipeline.formats.calibration`); the keys
hash every input (model hash, threshold, query set checksums, settings, L's version), so a changed input
never reuses an old fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipeline.methods.src.calibrations import L_VERSION

if TYPE_CHECKING:
    from pipeline.formats.queryset import QuerySet


@dataclass(frozen=True, kw_only=True)
class FitSettings:
    """What fitting L / choosing delta reads besides the method: run_path (the backbone's run, L's
    features), calib_dir (where fits are saved; None: not saved), key_parts (the inputs every key hashes:
    model hash, threshold, valid checksum), device, seed, l_options (L's options, a
    :class:`~pipeline.methods.options.LOptions`; None: the defaults), progress, kg (the loaded data set
    whose train graph gives L its targets; None: loaded by name)."""

    run_path: Path
    calib_dir: Path | None
    key_parts: dict[str, Any] = field(default_factory=dict)  # L: complete with l_key_parts
    device: str = "cpu"
    seed: int = 0
    l_options: Any = None
    progress: bool = True
    kg: Any = None


def l_config(fit: FitSettings) -> Any:
    """L's hyper-parameters for these settings (:class:`pipeline.methods.src.recipe.LConfig`)."""
    from pipeline.methods.src.recipe import l_config as resolve

    return resolve(fit.l_options, fit.seed)


def l_key_parts(base: dict[str, Any], train: QuerySet, fit: FitSettings, uses_delta: bool) -> dict[str, Any]:
    """The inputs L's key hashes: the base parts (model hash, threshold, valid checksum), the train set,
    L's settings, how it is selected and L's version. D's key under D+L hashes them too (and L's key)."""
    from pipeline.formats.queryset import checksum

    # L alone is selected on the valid score at delta 0; under D+L on the best valid score over the delta
    # grid (L and delta are chosen together: an L that lowers confidences is only useful with a delta that
    # lowers the thresholds with them). Two selections, two saved calibrations.
    return {**base, "train": checksum(train.frame), "l_config": l_config(fit).record(),
            "l_select": "max-over-delta-grid" if uses_delta else "delta-0", "l_version": L_VERSION}
