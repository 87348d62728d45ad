"""Fixtures of the executor tests: toy runs to export, and the toy answering pipeline of the calibration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.calibration.conftest import toy_pipeline  # noqa: F401  (a fixture, shared)
from tests.executors.helpers import train_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return train_runs(tmp_path_factory.mktemp("exec_runs"))
