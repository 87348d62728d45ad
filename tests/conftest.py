"""Session-wide test settings: the shared data mirror and a throw-away PIPELINE_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PIPELINE_DATA", REPO.parent / "shared" / "data")).resolve()


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("PIPELINE_DATA", str(SHARED_DATA))


@pytest.fixture(scope="session", autouse=True)
def pipeline_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every test session gets its own PIPELINE_HOME, so caches and stores never leak between runs."""
    home = tmp_path_factory.mktemp("pipeline_home")
    os.environ["PIPELINE_HOME"] = str(home)
    return home


def require_data(name: str) -> Path:
    """The mirrored folder of a data set, or skip (with the reason) where the mirror is absent."""
    folder = SHARED_DATA / name
    if not folder.is_dir():
        pytest.skip(f"data mirror {folder} not present")
    return folder


@pytest.fixture(scope="session")
def ppi5k():
    from loaders import load

    require_data("ppi5k")
    return load("ppi5k")


@pytest.fixture(scope="session")
def cn15k():
    from loaders import load

    require_data("cn15k")
    return load("cn15k")
