"""The alpha levels of a data set as the SQUK benchmark defines them (design section 1): per relation, the
25th/50th/75th percentile of the confidences of EVERY published row of train, val and test (duplicates kept,
CN15k's zero-confidence test negatives left out), numpy's linear interpolation, 4 decimals. A property of
the data, so it lives with the loaders: ingest stores it on the relation vocabulary, sampling and `pipeline
stats` read it from there, tests hold it to the published values.
"""

from __future__ import annotations

import numpy as np

LEVEL_DECIMALS = 4  # the published percentile files carry 4 decimals


def alpha_percentiles(
    rel: np.ndarray, conf: np.ndarray, n_relations: int
) -> dict[int, tuple[float, float, float]]:
    """The low/normal/high alpha levels of each relation id that has rows (design section 1).

    rel, conf: (n_rows,) relation id and confidence of EVERY published row of train, val and test as read
    (duplicate (h, r, t) rows kept, not merged: the SQUK benchmark counts each row; the caller leaves out
    CN15k's zero-confidence test negatives, which are not facts). Returns {rid: (p25, p50, p75)} with
    numpy's default linear interpolation, rounded to 4 decimals. This reproduces all 21 values of SQUK's
    published PPI5k ``percentile_25_50_75.json`` (tests/sampling/test_levels_squk.py)."""
    rel = np.asarray(rel, dtype=np.int64)
    conf = np.asarray(conf, dtype=np.float64)
    out: dict[int, tuple[float, float, float]] = {}
    for r in range(n_relations):
        c = conf[rel == r]
        if len(c):
            q = np.round(np.percentile(c, [25.0, 50.0, 75.0]), LEVEL_DECIMALS)
            out[r] = (float(q[0]), float(q[1]), float(q[2]))
    return out


def alpha_levels(kg) -> dict[int, tuple[float, float, float]]:
    """{rid: (p25, p50, p75)} of a loaded data set (loaders.KGData): over ``kg.rows``, every published row
    of the three splits as read (the loader has already set CN15k's test negatives apart)."""
    return alpha_percentiles(kg.rows["r"].to_numpy(), kg.rows["conf"].to_numpy(), kg.n_relations)
