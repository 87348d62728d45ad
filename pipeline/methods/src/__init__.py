"""SRC, the exact max-plus search over predicted facts, and its calibrations (design section 2):

- :mod:`.method`: the answering method (:class:`SRC`, built by ``pipeline answer``; ``pipeline query`` too);
- :mod:`.calibrations`: none, D, L, D+L by name, with their table labels (no torch);
- :mod:`.delta`: D, alphas lowered by delta; :mod:`.affine`: L, the learned affine correction;
- :mod:`.fitting`: what fitting reads and the content keys of saved fits (:meth:`SRC.fit_l`,
  :meth:`SRC.choose_delta` fit or reuse them; :meth:`SRC.apply_saved` applies a saved calibration);
- :mod:`.saved`: saved calibrations as a person names them (``pipeline query --calibration``).

Names load on first use, so the labels (:mod:`.calibrations`) import without torch.
"""

from __future__ import annotations

from typing import Any

_LAZY = {"SRC": "pipeline.methods.src.method", "rebuild": "pipeline.methods.src.method",
         "CALIBRATIONS": "pipeline.methods.src.calibrations"}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pipeline.methods.src' has no attribute {name!r}")
