#!/usr/bin/env bash
# A venv for end_to_end.py --products' GraphBolt side (benchmarks/_end_to_end_graphbolt.py):
# DGL 2.1 ships GraphBolt's library for torch 2.0.0-2.2.1 only, so this venv has torch
# 2.2.1 (the peers' venv, torch 2.13, imports dgl.graphbolt without its operators).
# From PyPI torch 2.2.1 brings its CUDA libraries (about 2.5 GB); set TORCH_INDEX to a CPU
# wheel index (https://download.pytorch.org/whl/cpu) where one is reachable.
# Usage: benchmarks/graphbolt_venv.sh VENV; then end_to_end.py --graphbolt-python VENV/bin/python
set -euo pipefail
venv=${1:?usage: benchmarks/graphbolt_venv.sh VENV}
python3.11 -m venv "$venv"
"$venv/bin/pip" install -q ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "torch==2.2.1" "numpy<2"
"$venv/bin/pip" install -q "dgl==2.1.0" "torchdata==0.7.1" "numpy<2" pydantic pyyaml pandas
"$venv/bin/python" -c "import torch, dgl.graphbolt
assert hasattr(torch.ops.graphbolt, 'fused_csc_sampling_graph'), 'GraphBolt has no operators'
print('GraphBolt ready: torch', torch.__version__)"
