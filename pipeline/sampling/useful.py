"""The usefulness filter of valid/test queries (design section 1).

A valid/test query is useful only if its answers on the split's graph differ from those on the train
graph: different entity ids (in order) or different values once both are rounded to 4 decimals.
Answers are lists best first, as :func:`pipeline.sampling.truth.cut_answers` returns them (the top 100 and
the whole tie group at the cut, a group listed by entity id).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DECIMALS = 4


def round_values(values: Sequence[float]) -> list[float]:
    """Values rounded to 4 decimals, half to even (numpy's rule), as plain floats."""
    return [float(v) for v in np.round(np.asarray(values, dtype=np.float64), DECIMALS)]


def is_useful(
    easy_ids: Sequence[int],
    easy_values: Sequence[float],
    hard_ids: Sequence[int],
    hard_values: Sequence[float],
) -> bool:
    """True when the split's answers (hard) differ from the train graph's answers (easy).

    Lists are compared in order, so the same entities ranked differently also count as a difference."""
    if [int(i) for i in easy_ids] != [int(i) for i in hard_ids]:
        return True
    return round_values(easy_values) != round_values(hard_values)
