"""Fixtures of the baselines' tests: the toy query sets (train, valid) of tests/baselines/toy.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.baselines.toy import toy_set


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("toyq")
    return toy_set(root / "train.parquet", "train"), toy_set(root / "valid.parquet", "valid")
