"""Training: tasks, the shared loop with exact resume, configuration and the CLI."""

from gnnforge.train._checkpoint import CheckpointError
from gnnforge.train._config import ConfigError, TrainConfig, load_config
from gnnforge.train._engine import Task, fit
from gnnforge.train._graph_task import GraphTask, split_indices
from gnnforge.train._nci_tpsa import load_nci_tpsa
from gnnforge.train._node_task import NodeTask, load_node_dataset
from gnnforge.train._packed_split import PackedSplit
from gnnforge.train._varmisuse import VarMisuseConfig, VarMisuseModel, run_varmisuse
from gnnforge.train._varmisuse_data import split_by_file, varmisuse_examples

__all__ = [
    "CheckpointError",
    "ConfigError",
    "GraphTask",
    "NodeTask",
    "PackedSplit",
    "Task",
    "TrainConfig",
    "VarMisuseConfig",
    "VarMisuseModel",
    "fit",
    "load_config",
    "load_nci_tpsa",
    "load_node_dataset",
    "run_varmisuse",
    "split_by_file",
    "split_indices",
    "varmisuse_examples",
]
