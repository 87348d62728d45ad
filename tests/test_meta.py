"""Tests of the tests (as PyKEEN's): every registered component has a test class deriving from the case of
its kind (tests/cases.py), and every such class names a registered component. Adding a data set, model,
method, calibration, query type, metric or alpha/beta mode without its test class fails here."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from loaders import BENCHMARKS
from pipeline.core.registry import REGISTRIES
from pipeline.core.registry import registry as _registry
from tests.cases import ComponentCase

TESTS = Path(__file__).resolve().parent


def _test_classes() -> dict[str, set[str]]:
    """{kind: names} of the concrete case classes (those with a ``name``) across every test module."""
    for path in sorted(TESTS.rglob("test_*.py")):
        importlib.import_module(".".join(path.relative_to(TESTS.parent).with_suffix("").parts))
    found: dict[str, set[str]] = {}
    stack = list(ComponentCase.__subclasses__())
    while stack:
        cls = stack.pop()
        stack += cls.__subclasses__()
        if "name" in vars(cls):
            found.setdefault(cls.kind, set()).add(cls.name)
    return found


@pytest.mark.parametrize("kind", list(REGISTRIES))
def test_every_registered_component_has_a_test_class(kind: str) -> None:
    tested = _test_classes().get(kind, set())
    # data sets: the benchmarks registered in code (a user's recorded data sets are data, not components)
    registered = set(BENCHMARKS.names() if kind == "datasets" else _registry(kind).names())
    assert registered - tested == set(), f"registered {kind} without a test class deriving from tests/cases.py"
    assert tested - registered == set(), f"test classes of {kind} that name no registered component"
