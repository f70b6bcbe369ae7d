"""Shared test fixtures: the real-data folder, the GPU skip and the XLA skip."""

from __future__ import annotations

import os

import pytest
import torch

# Triton decorates a kernel once, when gnnforge's Triton modules are first imported, in
# interpreter mode or compiled. Without CUDA the suite checks the kernels through the
# interpreter, so the switch is set here, before any test module is collected: test_opcheck
# imports the Triton ops before test_triton would set it, and every kernel then failed.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from gnnforge._compat import available
from gnnforge.data import shared_datasets_dir


@pytest.fixture(scope="session")
def datasets_dir():
    """The shared real datasets; tests that need them skip (saying so) when absent."""
    path = shared_datasets_dir()
    if path is None:
        pytest.skip("shared/datasets not found beside the checkout (set GNNFORGE_DATASETS)")
    return path


@pytest.fixture
def one_thread():
    """torch on one intra-op thread for the test, as `gnnforge train` runs (--threads 1):
    stable timings, and on a shared CPU spinning OpenMP threads slow small steps
    many-fold."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_xla = pytest.mark.skip(reason="needs torch_xla: run `make test-xla` (the .venv-xla "
                                       "environment)")
    cuda, xla = torch.cuda.is_available(), available("torch_xla")
    for item in items:
        if "gpu" in item.keywords and not cuda:
            item.add_marker(skip_gpu)
        if "xla" in item.keywords and not xla:
            item.add_marker(skip_xla)
