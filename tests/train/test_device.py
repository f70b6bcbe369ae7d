"""`--device`: parsed and checked up front, a one-line error without CUDA, and the CPU
device plumbing (model, packs, blocks, features) runs every task end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gnnforge._compat import available
from gnnforge._device import resolve_device, to_device
from gnnforge.train import fit
from gnnforge.train._config import ConfigError, load_config
from gnnforge.train._graph_task import GraphTask
from gnnforge.train._node_task import NodeTask
from tests.nn.test_models import molecules
from tests._timeouts import SUBPROCESS_TIMEOUT_S


def test_resolve_device_names_the_option_and_value():
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "cuda:x", "cpu:0", ""):
        with pytest.raises(ValueError, match="--device must be 'cpu', 'cuda', 'cuda:N' or 'xla'"):
            resolve_device(bad)


@pytest.mark.skipif(available("torch_xla"), reason="checks the environment without torch_xla")
def test_xla_without_torch_xla_says_how_to_get_it():
    with pytest.raises(ValueError, match="--device xla: torch_xla is not installed .*make "
                                         "xla-env"):
        resolve_device("xla")
    with pytest.raises(ConfigError, match="torch_xla is not installed"):
        load_config({"device": "xla"})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cuda_without_cuda_is_one_line_without_traceback():
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda:0")
    result = subprocess.run([sys.executable, "-m", "gnnforge.cli", "train", "--device", "cuda",
                             "--epochs", "1"], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == [result.stderr.strip().splitlines()[-1]], result.stderr  # one line, last
    assert "--device cuda: CUDA is not available" in errors[0]
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cooperative_cuda_without_cuda_names_the_device():
    # Cooperative and partitioned runs take --device (tests/train/test_handover.py); without
    # CUDA the device check is what stops them.
    with pytest.raises(ConfigError, match="--device cuda: CUDA is not available"):
        load_config({"task": "node", "mode": "sampled", "distributed": "cooperative",
                     "device": "cuda"})


def test_to_device_keeps_cpu_tensors():
    x = torch.arange(4)
    assert to_device(x, torch.device("cpu")) is x


def test_graph_task_trains_with_device_cpu(tmp_path):
    config = load_config({"device": "cpu", "epochs": 1, "hidden": 8, "layers": 1,
                          "batch_graphs": 8, "out_dir": str(tmp_path), "progress": False})
    task = GraphTask(config, molecules(40, seed=2), "index")
    summary = fit(config, task, printer=lambda line: None)
    assert summary["epochs run"] == 1


@pytest.mark.parametrize("mode", ["full", "sampled"])
def test_node_task_trains_with_device_cpu(tmp_path, mode):
    config = load_config({"task": "node", "dataset": "sbm", "device": "cpu", "epochs": 1,
                          "mode": mode, "out_dir": str(tmp_path), "progress": False,
                          "batch_size": 256})
    summary = fit(config, NodeTask(config), printer=lambda line: None)
    assert 0.0 <= summary["best val_accuracy"] <= 1.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_varmisuse_device_is_checked_before_any_work():
    from gnnforge.train._varmisuse import VarMisuseConfig, run_varmisuse

    with pytest.raises(ValueError, match="--device cuda: CUDA is not available"):
        run_varmisuse(VarMisuseConfig(device="cuda", root="/nonexistent"))


def test_graph_batch_to_keeps_the_batch():
    from gnnforge.graph import GraphBatch

    batch = GraphBatch.from_graphs(molecules(3, seed=1)).pad(40, 60, 5)
    moved = batch.to("cpu")
    assert isinstance(moved, GraphBatch)
    assert torch.equal(moved.graph_ptr, batch.graph_ptr)
    assert torch.equal(moved.graph_mask, batch.graph_mask)
    assert moved == batch


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_varmisuse_main_device_error_is_one_line():
    result = subprocess.run([sys.executable, "-m", "gnnforge.train.varmisuse_main", "--device",
                             "cuda"], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "python -m gnnforge.train.varmisuse_main: error: --device cuda: CUDA is not available "
        "(this torch build has no CUDA support); use --device cpu"]
