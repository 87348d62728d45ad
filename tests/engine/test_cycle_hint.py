"""A slow cycle enumeration says how to bound it (a 12-variable cycle query ran 99 s with no
word about ``--cycle-cap``): the progress line of a nested enumeration names the option, and a capped run
says it is capped and approximate."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.core.kg import GraphTensors
from pipeline.engine.search import solve
from pipeline.softquery.parser import parse

# every pair of a complete variable graph on ?a ?b ?c ?d: substituting one cycle variable leaves cycles
K4 = "#0(?a, ?b) & #0(?b, ?c) & #0(?c, ?a) & #0(?a, ?d) & #0(?d, ?b) & #0(?c, ?d) & #0(?d, ?y)"


@pytest.fixture(scope="module")
def dense() -> GraphTensors:
    n = 12
    h, t = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    h, t = h.ravel(), t.ravel()
    conf = np.full(len(h), 0.5, dtype=np.float32)
    return GraphTensors.from_arrays(h, np.zeros_like(h), t, conf, n, 1, "dense")


def test_a_nested_cycle_enumeration_names_the_cap(dense: GraphTensors, capsys: pytest.CaptureFixture) -> None:
    res = solve([parse(K4)], dense)
    err = capsys.readouterr().err
    assert "12 candidates, each with cycles left; --cycle-cap N bounds it (approximate)" in err
    assert not bool(res.approximate[0])
    assert float(res.utility[0, 0]) == pytest.approx(3.5)  # 7 atoms at c = 0.5, exact


def test_a_capped_enumeration_says_so(dense: GraphTensors, capsys: pytest.CaptureFixture) -> None:
    res = solve([parse(K4)], dense, cycle_cap=3)
    err = capsys.readouterr().err
    assert "3 candidates, each with cycles left; capped at 3, approximate" in err
    assert bool(res.approximate[0])
