"""Content keys (pipeline.core.provenance.stable_key): the reproduction's stage ledgers and the saved calibrations
(calibration/L-KEY, D-KEY) are found again by these keys, so their format is pinned to what earlier runs wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pipeline.core.provenance import stable_key


def test_stable_key_is_the_first_16_hex_of_sha256_over_sorted_json() -> None:
    # the exact text earlier code hashed: sorted keys, default separators, str() for other values
    text = '{"a": 1, "b": [2, "x"], "p": "/tmp/q"}'
    assert stable_key(b=[2, "x"], a=1, p=Path("/tmp/q")) == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_stable_key_changes_with_any_part() -> None:
    base = stable_key(dataset="ppi5k", seed=0, sampling=2)
    assert base == stable_key(sampling=2, seed=0, dataset="ppi5k")  # order of the parts does not matter
    assert base != stable_key(dataset="ppi5k", seed=0, sampling=3)
    assert base != stable_key(dataset="ppi5k", seed=0)
