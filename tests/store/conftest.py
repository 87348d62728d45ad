"""Fixtures of the store tests."""

import pytest

from pipeline.store import embedded


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private PIPELINE_HOME under tmp_path (tmp_path/home), the embedded store chosen; its server
    stopped afterwards, whatever the test did. A module's own ``home`` fixture overrides this one."""
    monkeypatch.setenv("PIPELINE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("PIPELINE_STORE", raising=False)
    yield tmp_path / "home"
    embedded.stop()
