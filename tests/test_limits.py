"""pipeline/core/limits.py: every count of threads, processes and requests in flight is bounded by this
machine (``train-qe --threads 100000`` once started 32,212 threads and starved the machine). The bounds
against their definition on a machine of a chosen size (the affinity mask faked), the refusals' lines, and
each door that takes a count using them. Nothing here starts more than a handful of threads."""

from __future__ import annotations

import os

import numpy as np
import pytest

from pipeline.core import limits
from pipeline.core.errors import PipelineError


@pytest.fixture
def three_cores(monkeypatch):
    """This process may run on 3 cores (whatever the machine has)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    return 3


def test_the_bounds_are_a_few_per_core(three_cores):
    assert limits.cores() == 3
    assert limits.compute_bound() == limits.CPU_FACTOR * 3 == 12
    assert limits.io_bound() == limits.IO_FACTOR * 3 == 96


def test_a_count_up_to_its_bound_is_taken_and_one_above_refused(three_cores):
    assert limits.check_count("threads", 12) == 12
    assert limits.check_count("threads", np.int64(1)) == 1 and type(limits.check_count("threads", np.int64(1))) is int
    assert limits.check_count("concurrency", 96, "io") == 96
    assert limits.check_count("workers", 10**9, None) == 10**9  # bounded elsewhere (a Ray cluster's CPUs)
    with pytest.raises(PipelineError) as err:
        limits.check_count("threads", 13)
    assert str(err.value) == ("threads=13: at most 12 on this machine (4 per core x 3 cores this process may run "
                              "on; beyond a core each, they only wait for one another)")
    with pytest.raises(PipelineError, match=r"^concurrency=97: at most 96 on this machine \(32 per core"):
        limits.check_count("concurrency", 97, "io")


@pytest.mark.parametrize(("value", "why"), [
    (0, "must be at least 1"), (-5, "must be at least 1"), (2.0, "expected an integer, not a float"),
    (True, "expected an integer, not a bool"), ("4", "expected an integer, not text"), (None, "not NoneType"),
])  # fmt: skip
def test_what_is_no_count_is_refused(value, why):
    with pytest.raises(PipelineError, match=why):
        limits.check_count("workers", value)


def test_the_thread_variables_of_the_libraries_underneath(three_cores, monkeypatch):
    for name in limits.THREAD_VARIABLES:
        monkeypatch.setenv(name, "12")
    limits.check_thread_variables()
    monkeypatch.setenv("OMP_NUM_THREADS", "4,2")  # OpenMP's nested levels
    limits.check_thread_variables()
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "garbage")  # no count: its library's own business
    limits.check_thread_variables()
    for name, value in (("OMP_NUM_THREADS", "2,13"), ("NUMBA_NUM_THREADS", "100000"), ("MKL_NUM_THREADS", "13")):
        monkeypatch.setenv(name, value)
        with pytest.raises(PipelineError, match=f"^{name}={value}: at most 12 on this machine"):
            limits.check_thread_variables()
        monkeypatch.setenv(name, "1")


def test_the_store_memory_is_at_most_the_machine(monkeypatch):
    from pipeline.store import embedded

    monkeypatch.setattr(limits, "memory_bytes", lambda: 16 << 30)
    monkeypatch.setenv(embedded.MEMORY_ENV, "16")
    assert embedded.memory_limit_bytes() == 16 << 30
    for too_much in ("16.5", "1000000"):
        monkeypatch.setenv(embedded.MEMORY_ENV, too_much)
        with pytest.raises(PipelineError, match=f"PIPELINE_STORE_MEMORY='{too_much}': .* up to this machine's 16.0"):
            embedded.memory_limit_bytes()
    monkeypatch.delenv(embedded.MEMORY_ENV)
    assert embedded.memory_limit_bytes() == 4 << 30  # a quarter of the machine


def test_executors_bound_their_workers(three_cores):
    from pipeline.executors import answer_executor, make_executor

    for name in ("processes", "local", "ray"):
        with pytest.raises(PipelineError, match=r"^workers=13: at most 12 on this machine"):
            make_executor(name, workers=13)
    with pytest.raises(PipelineError, match=r"^workers=13: at most 12"):
        answer_executor("processes", workers=13)
    with make_executor("processes", workers=12) as ex:  # built, nothing forked yet
        assert ex.workers == 12


def test_a_ray_cluster_bounds_the_workers_by_its_own_cpus():
    """With an address the tasks run on the cluster: its CPUs bound them, once joined (a fake cluster)."""
    from pipeline.executors.ray import RayExecutor

    class Cluster:
        shut = False

        def cluster_resources(self):
            return {"CPU": 64.0}

        def shutdown(self):
            self.shut = True

    ex = RayExecutor.__new__(RayExecutor)  # no Ray needed for the check itself
    ex.address, ex.workers = "ray://head:10001", limits.CPU_FACTOR * 64
    ex._check_workers_fit(Cluster())
    ex.workers += 1
    cluster = Cluster()
    with pytest.raises(PipelineError, match=r"at most 256 on the Ray cluster at ray://head:10001 \(4 per CPU x its 64"):
        ex._check_workers_fit(cluster)
    assert cluster.shut
