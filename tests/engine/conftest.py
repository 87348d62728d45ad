"""Engine tests run torch on one thread: on a shared 2-core machine extra threads spin against other
processes and make small kernels 10x slower. Restored after each test, so other suites are unaffected."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
