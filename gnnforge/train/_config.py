"""Training configuration: defaults, an optional TOML file, CLI overrides, validation.

One idea past 500 lines: every option's checks sit beside the others, because most are
about combinations (a flag valid for one task, mode or dataset and refused for the rest).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from gnnforge._device import process_device
from gnnforge.train._early_stopping import RULES as EARLY_STOPPING_RULES

__all__ = ["ConfigError", "TrainConfig", "load_config"]

TASKS = ("graph", "node", "link", "varmisuse")
# Each task's dataset when --dataset is not given.
DEFAULT_DATASETS = {"graph": "nci-tpsa", "node": "pubmed", "link": "rmat"}
NODE_MODES = ("full", "sampled")
NODE_MODELS = ("sage", "gcn", "gat")
WEIGHT_DECAY_LAYERS = ("all", "first")
WARM_PAGE_CACHE = ("auto", "on", "off")
ACTIVATIONS = ("relu", "elu")
# The node task's recipe options and their defaults (refused by the other tasks).
NODE_RECIPE_OPTIONS = {"normalize_features": False, "weight_decay_layers": "all",
                       "activation": "relu", "heads": 8, "output_heads": 1,
                       "attention_dropout": 0.0, "largest_component": False}
# Options of the node task that the graph and link tasks refuse when changed, with their
# defaults (besides NODE_RECIPE_OPTIONS, and --mode/--model/--sampler for the graph task).
NODE_ONLY_OPTIONS = (("dependent", 0), ("cache_size", 0), ("partition", "random"),
                     ("input_dropout", None))
SAMPLERS = ("neighbor", "labor")
DISTRIBUTED = ("independent", "cooperative")
PARTITIONS = ("random", "metis")
COOPERATE = ("all", "local")
# The graph task's model: gnnforge's OGB-style GIN or Xu et al.'s GIN-0 (GINClassifier).
GRAPH_MODELS = ("molecule-gin", "gin-0")
# Which epoch's test accuracy a run reports: 'val' (the epoch with the best validation
# metric) or 'fold-mean' (--folds, --seeds: Xu et al.'s epoch with the best test accuracy
# averaged over the folds; see gnnforge/train/_fold_mean.py).
SELECTIONS = ("val", "fold-mean")


class ConfigError(ValueError):
    """A bad option or an incompatible combination; the message says which and why."""


@dataclass
class TrainConfig:
    """Everything a run needs; `gnnforge train --help` documents each field as a flag."""

    task: str = "graph"
    # A name `gnnforge datasets` prints (or a molecule CSV); None: the task's default
    # (DEFAULT_DATASETS). Without --task, the dataset's kind picks the task.
    dataset: str | None = None
    epochs: int = 30
    # Stop after this many optimiser steps in all (across epochs; None: no limit); the
    # epoch it stops in is evaluated as usual.
    max_steps: int | None = None
    lr: float = 1e-3
    weight_decay: float = 0.0
    hidden: int = 64
    layers: int = 3
    dropout: float = 0.0
    # node task: dropout on the input features (None: --dropout). DGL's and PyG's
    # ogbn-products examples drop none (synthetic-products' default 0); without it a
    # sampled SAGE first layer reads its rows straight from the feature table.
    input_dropout: float | None = None
    seed: int = 0
    # Stop when the validation metric has not improved for this many epochs (0: never).
    patience: int = 10
    # Which epoch's weights are tested and what patience watches: 'metric' (the task's
    # validation metric), 'loss' (node task: validation loss) or 'loss-and-metric' (node
    # task: the GAT code's rule; see gnnforge/train/_early_stopping.py).
    early_stopping: str = "metric"
    out_dir: str = "runs/train"
    # Save a checkpoint every N optimiser steps inside an epoch (0: at epoch ends only).
    checkpoint_every: int = 0
    resume: bool = False
    progress: bool = True
    # Intra-op threads. 1 by default: a step's tensors are small, and on a shared CPU
    # OpenMP's spin-waiting made 2 threads 30x slower than 1 in our runs.
    threads: int = 1
    # graph task: graphs per batch on average, and a limit on molecules (0: all).
    batch_graphs: int = 32
    limit: int = 0
    pool: str = "sum"
    # graph task: K-fold cross-validation (the GIN paper's protocol; 0: the seeded
    # 80/10/10 split). The seed picks the fold; see gnnforge/train/_folds.py.
    folds: int = 0
    # graph task: 'molecule-gin' (embedded integer features, OGB's GIN) or 'gin-0' (Xu et
    # al.'s GIN-0: one-hot node labels, eps = 0, every layer's readout summed).
    graph_model: str = "molecule-gin"
    # graph task: an epoch of N steps, each on graphs drawn at random from the training
    # split (--batch-graphs of them, without replacement within a step; Xu et al.'s
    # "iterations per epoch"); 0: one pass over the split in packed batches.
    steps_per_epoch: int = 0
    # The learning rate is multiplied by --lr-gamma every --lr-step-epochs epochs (StepLR;
    # 0: constant).
    lr_step_epochs: int = 0
    lr_gamma: float = 0.5
    # 'val': test the weights of the epoch with the best validation metric. 'fold-mean'
    # (--folds with --seeds): the validation fold trains too, every epoch is tested, and
    # the summary takes the epoch whose test accuracy averaged over the seeds' folds is
    # best (Xu et al.'s protocol, optimistic), beside the last epoch's.
    selection: str = "val"
    # node task
    mode: str = "full"
    model: str = "sage"
    sampler: str | None = None
    fanouts: list[int] = field(default_factory=lambda: [10, 10, 10])
    batch_size: int = 1024
    # Dependent minibatches: kappa, the number of consecutive batches that share sampling
    # variates (LABOR paper, section 3.3); 0 means independent batches.
    dependent: int = 0
    cache_size: int = 0
    # synthetic-products: its number of nodes (0: ogbn-products' 2,449,029), for the
    # scaling curves (2**18..2**23) and small test runs.
    synthetic_nodes: int = 0
    # synthetic-products: read its files into memory before training instead of mapping
    # them (auto: when they fit in half the memory this process may use;
    # gnnforge/data/_in_memory.py).
    warm_page_cache: str = "auto"
    # node task, the papers' recipes (gnnforge/train/recipes/): row-normalise the input
    # features (Kipf & Welling's preprocessing: each bag-of-words row sums to 1); put the
    # weight decay on 'all' layers or on the 'first' only (Kipf's reference code
    # regularises the first layer's weights only); the activation between layers; GAT's
    # heads per hidden layer, heads averaged in the output layer and attention dropout.
    normalize_features: bool = False
    weight_decay_layers: str = "all"
    activation: str = "relu"
    heads: int = 8
    output_heads: int = 1
    attention_dropout: float = 0.0
    # node task: keep the largest connected component only, before the split (Shchur et
    # al. evaluate on it); the summary says how many nodes and edges it dropped.
    largest_component: bool = False
    # Under torchrun: 'independent' gives each process its own minibatches and averages
    # gradients with DDP; 'cooperative' (node task, sampled) has the processes sample and
    # compute one global minibatch together, each owning a partition of the vertices.
    distributed: str = "independent"
    # cooperative: how vertices are assigned to processes ('metis' cuts fewer edges, so
    # fewer embedding rows cross processes; needs pymetis).
    partition: str = "random"
    # Run the training step's loss and backward under torch.compile(fullgraph=True,
    # dynamic=False): one compile per distinct batch shape (packing makes it one).
    compile: bool = False
    # Where the model trains: 'cpu', 'cuda' or 'cuda:N'. Samplers and packing run on the
    # CPU; their batches reach the device through pinned, non-blocking copies.
    device: str = "cpu"
    # A directory written by `gnnforge partition`: each process loads only its part
    # (node task, sampled, under torchrun; see gnnforge/train/_partitioned.py).
    partitioned: str | None = None
    # cooperative: 'all' processes cooperate, or those of one node ('local', torchrun's
    # LOCAL_WORLD_SIZE), nodes then taking turns over the global batches.
    cooperate: str = "all"
    # --partitioned: minibatches sampled and fetched ahead by a background thread (0: off).
    prefetch: int = 1
    # --partitioned, cooperative: the input feature rows' all_to_all is issued with
    # async_op=True and awaited only when the step needs them, so the prefetching thread
    # samples the next minibatch meanwhile (off: a blocking exchange; same results).
    async_exchange: bool = True
    # --task varmisuse: banded block size S, nodes per batch (a multiple of S) and the
    # propagation the model is trained with ('both' trains one model per backend). Sparse
    # by default: on a CPU a banded step (dense S x S block products) costs several
    # sparse steps (docs/training.md), and it is evaluated both ways either way.
    block_size: int = 256
    slots: int = 1024
    backend: str = "sparse"
    # Processes that build the training batches (torch DataLoader workers, fork): graph
    # task packs, node task sampled minibatches. 0 builds them in the training process.
    # The batches are the same either way (their order and randomness are fixed in the
    # main process), so a run trains to the same loss with any number of workers.
    workers: int = 0
    # Seconds to sleep after each step: only for tests that kill a run mid-epoch.
    step_delay: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_FIELDS = {f.name: f for f in fields(TrainConfig)}

# Defaults that differ by task, used where neither the TOML file nor a flag sets the key.
# Node classification follows the GCN/GraphSAGE papers' Planetoid settings (2 layers,
# lr 0.01, dropout 0.5, weight decay 5e-4, up to 200 epochs with patience).
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "node": {"layers": 2, "lr": 0.01, "dropout": 0.5, "weight_decay": 5e-4, "epochs": 200,
             "patience": 50, "fanouts": [10, 10]},
    # Link prediction: GraphSAGE on sampled blocks (PyG's link-prediction examples' sizes).
    "link": {"layers": 2, "lr": 0.01, "epochs": 20, "patience": 5, "mode": "sampled",
             "fanouts": [10, 10]},
}


# Defaults for one dataset, between the task's and the user's: synthetic-products trains
# the issue-32 workload, GraphSAGE as DGL's and PyG's ogbn-products examples configure it
# (3 layers, hidden 256, fanouts 15,10,5 from the input layer, batch 1024), sampled: its
# full graph is not held as a Graph.
DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "synthetic-products": {"mode": "sampled", "layers": 3, "hidden": 256,
                           "fanouts": [15, 10, 5], "batch_size": 1024, "input_dropout": 0.0},
}
# Fields whose default is None but whose values are numbers (the rest of the None defaults
# are strings).
OPTIONAL_NUMBERS: dict[str, type] = {"max_steps": int, "input_dropout": float}


def _read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError as error:
        raise ConfigError(f"--config: no such file {str(path)!r}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config {path}: not valid TOML ({error})") from error
    data = data.get("train", data)  # keys at the top level or under [train]
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ConfigError(f"--config {path}: unknown keys {unknown}; known: {sorted(_FIELDS)}")
    return {key.replace("-", "_"): value for key, value in data.items()}


def load_config(overrides: dict[str, Any], toml_path: str | Path | None = None) -> TrainConfig:
    """Defaults, then the TOML file, then `overrides` (None values are ignored); validated.

    Raises:
        ConfigError: unknown keys, wrong value types, or incompatible options.
    """
    values: dict[str, Any] = {}
    if toml_path is not None:
        values.update(_read_toml(toml_path))
    values.update({k: v for k, v in overrides.items() if v is not None and k in _FIELDS})
    if "task" not in values and values.get("dataset") is not None:
        values["task"] = _kind(str(values["dataset"])).task
    dataset_defaults = DATASET_DEFAULTS.get(str(values.get("dataset")).lower(), {})
    if values.get("task", "graph") != "node":
        dataset_defaults = {}
    values = {**TASK_DEFAULTS.get(values.get("task", "graph"), {}), **dataset_defaults,
              **values}
    for key, value in values.items():
        _check_type(key, value)
    config = TrainConfig(**values)
    validate(config)
    return config


def _check_type(key: str, value: Any) -> None:
    default = getattr(TrainConfig(), key)
    expected = type(default) if default is not None else OPTIONAL_NUMBERS.get(key, str)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return
    if expected is list:
        if not (isinstance(value, list) and all(isinstance(v, int) for v in value)):
            raise ConfigError(f"{key}: expected a list of integers, got {value!r}")
        return
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(f"{key}: expected {expected.__name__}, got {value!r}")


def _kind(dataset: str):
    """The dataset's kind (see `dataset_kind`), its errors as ConfigError."""
    from gnnforge.train._dataset_kinds import dataset_kind

    try:
        return dataset_kind(dataset)
    except KeyError as error:
        raise ConfigError(f"--dataset: {error.args[0]}") from None
    except (ValueError, FileNotFoundError) as error:
        raise ConfigError(f"--dataset: {error}") from None


def _validate_dataset(config: TrainConfig) -> None:
    if config.dataset is None:
        return
    if config.task == "varmisuse" and Path(config.dataset).is_dir():
        return  # a folder of Python files
    kind = _kind(config.dataset)
    # Any single graph can be trained for link prediction, labelled or not.
    if kind.task != config.task and not (config.task == "link" and kind.task == "node"):
        raise ConfigError(f"--task {config.task} cannot train {config.dataset!r}: it is "
                          f"{kind.what}; use --task {kind.task} --dataset {config.dataset} "
                          "(or leave out --task)")


def _flag(name: str) -> str:
    return name.replace("_", "-")


def validate(config: TrainConfig) -> None:
    """Raise ConfigError naming the first bad value or incompatible combination."""
    if config.task not in TASKS:
        raise ConfigError(f"--task must be one of {TASKS}, got {config.task!r}")
    for name in ("epochs", "hidden", "layers", "batch_graphs", "batch_size", "threads"):
        if getattr(config, name) < 1:
            raise ConfigError(f"--{_flag(name)} must be >= 1, got {getattr(config, name)}")
    if config.max_steps is not None and config.max_steps < 1:
        raise ConfigError(f"--max-steps must be a positive integer (optimiser steps in all), "
                          f"got {config.max_steps}; leave it out for no limit")
    _validate_synthetic_nodes(config)
    if config.folds and (config.task != "graph" or config.folds < 3):
        raise ConfigError(f"--folds {config.folds}: cross-validation needs --task graph and "
                          "at least 3 folds (test, validation, training)")
    for name in ("patience", "checkpoint_every", "limit", "cache_size", "dependent",
                 "workers"):
        if getattr(config, name) < 0:
            raise ConfigError(f"--{_flag(name)} must be >= 0, got {getattr(config, name)}")
    _validate_early_stopping(config)
    _validate_graph_protocol(config)
    for name in ("dropout", "input_dropout"):
        rate = getattr(config, name)
        if rate is not None and not 0.0 <= rate < 1.0:
            raise ConfigError(f"--{_flag(name)} must lie in [0, 1), got {rate}")
    if not (math.isfinite(config.lr) and config.lr > 0):
        raise ConfigError(f"--lr must be a finite number > 0, got {config.lr}")
    if not (math.isfinite(config.weight_decay) and config.weight_decay >= 0):
        raise ConfigError(f"--weight-decay must be a finite number >= 0, got "
                          f"{config.weight_decay}")
    if not (math.isfinite(config.step_delay) and config.step_delay >= 0):
        raise ConfigError(f"--step-delay must be a finite number >= 0, got {config.step_delay}")
    if config.task == "node":
        _validate_node(config)
    elif config.task == "link":
        _validate_link(config)
    else:
        for name, default in (("mode", "full"), ("model", "sage"), ("sampler", None),
                              *NODE_ONLY_OPTIONS, *NODE_RECIPE_OPTIONS.items()):
            if getattr(config, name) != default:
                raise ConfigError(f"--{name.replace('_', '-')} applies to --task node only "
                                  f"(got --task {config.task})")
    _validate_varmisuse(config)
    _validate_dataset(config)
    try:
        process_device(config.device)  # under torchrun: this process's GPU (cuda:LOCAL_RANK)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    _validate_distributed(config)
    if config.compile and not (config.task == "graph"
                               or (config.task == "node" and config.mode == "full")
                               or (config.task == "varmisuse" and config.backend == "banded")):
        raise ConfigError("--compile needs fixed shapes: --task graph (packed batches), "
                          "--task node --mode full (the whole graph each step) or --task "
                          "varmisuse --backend banded (K*S slots per batch); sampled "
                          f"minibatches change shape every step (got --task {config.task}"
                          + (f" --mode {config.mode}" if config.task == "node" else "")
                          + (f" --backend {config.backend}" if config.task == "varmisuse"
                             else "") + ")")
    _validate_xla(config)
    _validate_workers(config)
    if config.pool not in ("sum", "mean"):
        raise ConfigError(f"--pool must be 'sum' or 'mean', got {config.pool!r}")


def _validate_graph_protocol(config: TrainConfig) -> None:
    """--graph-model, --steps-per-epoch, --selection (graph task) and the lr schedule."""
    if config.lr_step_epochs < 0:
        raise ConfigError(f"--lr-step-epochs must be >= 0 (0: constant learning rate), got "
                          f"{config.lr_step_epochs}")
    if not (math.isfinite(config.lr_gamma) and 0.0 < config.lr_gamma <= 1.0):
        raise ConfigError(f"--lr-gamma must lie in (0, 1], got {config.lr_gamma}")
    if config.lr_gamma != 0.5 and not config.lr_step_epochs:
        raise ConfigError(f"--lr-gamma {config.lr_gamma} multiplies the learning rate every "
                          "--lr-step-epochs epochs: give --lr-step-epochs N as well")
    if config.steps_per_epoch < 0:
        raise ConfigError(f"--steps-per-epoch must be >= 0 (0: one pass over the training "
                          f"graphs), got {config.steps_per_epoch}")
    if config.graph_model not in GRAPH_MODELS:
        raise ConfigError(f"--graph-model must be one of {GRAPH_MODELS}, got "
                          f"{config.graph_model!r}")
    if config.selection not in SELECTIONS:
        raise ConfigError(f"--selection must be one of {SELECTIONS}, got {config.selection!r}")
    if config.task != "graph":
        for name, default in (("graph_model", "molecule-gin"), ("steps_per_epoch", 0),
                              ("selection", "val")):
            if getattr(config, name) != default:
                raise ConfigError(f"--{_flag(name)} applies to --task graph only (got --task "
                                  f"{config.task})")
    if config.steps_per_epoch and (config.compile or str(config.device).startswith("xla")):
        raise ConfigError("--steps-per-epoch draws batches of varying shape (graphs at "
                          "random, unpacked); --compile and --device xla need fixed shapes: "
                          "drop one or the other")
    if config.selection == "fold-mean":
        if not config.folds:
            raise ConfigError("--selection fold-mean averages the test accuracy over "
                              "cross-validation folds: add --folds K (and --seeds K)")
        if config.patience:
            raise ConfigError(f"--selection fold-mean needs every fold to train every epoch: "
                              f"use --patience 0 (got --patience {config.patience})")


def _validate_synthetic_nodes(config: TrainConfig) -> None:
    """--synthetic-nodes sizes synthetic-products, which trains sampled only."""
    products = str(config.dataset).lower() == "synthetic-products"
    if config.synthetic_nodes and not products:
        raise ConfigError(f"--synthetic-nodes sizes --dataset synthetic-products (got "
                          f"--dataset {config.dataset})")
    if config.synthetic_nodes and not 1024 <= config.synthetic_nodes < 2**31:
        raise ConfigError(f"--synthetic-nodes must lie in [1024, 2**31), got "
                          f"{config.synthetic_nodes}")
    if config.warm_page_cache not in WARM_PAGE_CACHE:
        raise ConfigError(f"--warm-page-cache must be one of {WARM_PAGE_CACHE}, got "
                          f"{config.warm_page_cache!r}")
    if config.warm_page_cache != "auto" and not products:
        raise ConfigError(f"--warm-page-cache reads --dataset synthetic-products' files (got "
                          f"--dataset {config.dataset})")
    if products and config.task == "node" and config.mode != "sampled":
        raise ConfigError("--dataset synthetic-products trains with --mode sampled only: it "
                          "is held as a memory-mapped CSR, and full-graph training would "
                          "need the whole graph as an in-memory Graph (int64 COO, about 2 GiB "
                          "per index array at the default size)")
    if products and config.task != "node":
        raise ConfigError(f"--dataset synthetic-products trains --task node (sampled); "
                          f"got --task {config.task}")


def _validate_xla(config: TrainConfig) -> None:
    """--device xla trains the graph task (packed, fixed-shape batches), the node task on
    the full graph (one shape) and VarMisuse (K*S slots; sparse batches padded to one
    size), in one process; XLA compiles the step itself, so --compile does not apply."""
    if not str(config.device).strip().startswith("xla"):
        return
    if not (config.task in ("graph", "varmisuse")
            or (config.task == "node" and config.mode == "full")):
        mode = f" --mode {config.mode}" if config.task == "node" else ""
        raise ConfigError(f"--device xla trains --task graph (fixed-shape packs), --task "
                          f"node --mode full (one graph) or --task varmisuse, got --task "
                          f"{config.task}{mode}; use --device cpu or cuda for it")
    if config.compile:
        raise ConfigError("--compile with --device xla: XLA compiles every step itself; "
                          "drop --compile")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--device xla runs in one process; start it without torchrun")


def _validate_workers(config: TrainConfig) -> None:
    """--workers builds batches that are a pure function of (seed, epoch, step): the graph
    task's packs and the node task's sampled minibatches in one process or under DDP."""
    if not config.workers:
        return
    if config.task == "graph" or (config.task == "node" and config.mode == "sampled"
                                  and config.distributed != "cooperative"
                                  and config.partitioned is None):
        return
    raise ConfigError(
        f"--workers {config.workers}: worker processes build the batches of --task graph "
        "and of --task node --mode sampled (not cooperative or --partitioned, whose "
        "batches need collectives); got --task " + config.task
        + (f" --mode {config.mode}" if config.task == "node" else "")
        + (" --distributed cooperative" if config.distributed == "cooperative" else "")
        + (" --partitioned" if config.partitioned else "") + "; use --workers 0")


def _validate_early_stopping(config: TrainConfig) -> None:
    if config.early_stopping not in EARLY_STOPPING_RULES:
        raise ConfigError(f"--early-stopping must be one of {EARLY_STOPPING_RULES}, got "
                          f"{config.early_stopping!r}")
    if config.early_stopping != "metric" and (config.task != "node"
                                              or config.partitioned is not None):
        raise ConfigError(f"--early-stopping {config.early_stopping} reads the validation "
                          "loss, which only --task node (in memory) reports; use "
                          "--early-stopping metric")


VARMISUSE_BACKENDS = ("sparse", "banded", "both")


def _validate_varmisuse(config: TrainConfig) -> None:
    if config.task != "varmisuse":
        for name, default in (("block_size", 256), ("slots", 1024), ("backend", "sparse")):
            if getattr(config, name) != default:
                raise ConfigError(f"--{_flag(name)} applies to --task varmisuse only "
                                  f"(got --task {config.task})")
        return
    if config.backend not in VARMISUSE_BACKENDS:
        raise ConfigError(f"--backend must be one of {VARMISUSE_BACKENDS}, got "
                          f"{config.backend!r}")
    for name in ("block_size", "slots"):
        if getattr(config, name) < 1:
            raise ConfigError(f"--{_flag(name)} must be >= 1, got {getattr(config, name)}")
    if config.slots % config.block_size:
        raise ConfigError(f"--slots ({config.slots}) must be a multiple of --block-size "
                          f"({config.block_size}): a batch is slots / block-size blocks")


def _validate_link(config: TrainConfig) -> None:
    if config.mode != "sampled":
        raise ConfigError("--task link trains on sampled blocks (each batch's edges removed "
                          "from them); use --mode sampled")
    for name, default in (*NODE_ONLY_OPTIONS, *NODE_RECIPE_OPTIONS.items()):
        if getattr(config, name) != default:
            raise ConfigError(f"--{name.replace('_', '-')} applies to --task node only "
                              "(got --task link)")
    if config.model not in ("sage", "gcn"):
        raise ConfigError(f"--model must be 'sage' or 'gcn', got {config.model!r}")
    _validate_sampling(config)


def _validate_node(config: TrainConfig) -> None:
    if config.model not in NODE_MODELS:
        raise ConfigError(f"--model must be one of {NODE_MODELS}, got {config.model!r}")
    _validate_recipe_options(config)
    if config.mode not in NODE_MODES:
        raise ConfigError(f"--mode must be one of {NODE_MODES}, got {config.mode!r}")
    if config.mode == "full":
        for name, default in (("sampler", None), ("dependent", 0), ("cache_size", 0)):
            if getattr(config, name) != default:
                raise ConfigError(f"--{name.replace('_', '-')} needs --mode sampled "
                                  "(full-graph training does not sample)")
        return
    _validate_sampling(config)


def _validate_recipe_options(config: TrainConfig) -> None:
    """The node task's recipe options: known values, and GAT's only with --model gat."""
    changed = [name for name, default in NODE_RECIPE_OPTIONS.items()
               if getattr(config, name) != default]
    if config.partitioned is not None and changed:
        raise ConfigError(f"--{_flag(changed[0])} applies to in-memory node training, not to "
                          "--partitioned runs")
    for name, choices in (("weight_decay_layers", WEIGHT_DECAY_LAYERS),
                          ("activation", ACTIVATIONS)):
        if getattr(config, name) not in choices:
            raise ConfigError(f"--{_flag(name)} must be one of {choices}, got "
                              f"{getattr(config, name)!r}")
    smallest = min(("heads", "output_heads"), key=lambda name: getattr(config, name))
    if getattr(config, smallest) < 1:
        raise ConfigError(f"--{_flag(smallest)} must be >= 1, got {getattr(config, smallest)}")
    if not 0.0 <= config.attention_dropout < 1.0:
        raise ConfigError(f"--attention-dropout must lie in [0, 1), got "
                          f"{config.attention_dropout}")
    if config.model != "gat":
        for name in ("heads", "output_heads", "attention_dropout"):
            if getattr(config, name) != NODE_RECIPE_OPTIONS[name]:
                raise ConfigError(f"--{_flag(name)} applies to --model gat only (got --model "
                                  f"{config.model})")
    elif config.mode != "full" or config.partitioned is not None:
        raise ConfigError("--model gat trains on the full graph: use --mode full")


def _validate_sampling(config: TrainConfig) -> None:
    if config.sampler is not None and config.sampler not in SAMPLERS:
        raise ConfigError(f"--sampler must be one of {SAMPLERS}, got {config.sampler!r}")
    if len(config.fanouts) != config.layers:
        raise ConfigError(f"--fanouts has {len(config.fanouts)} entries for --layers "
                          f"{config.layers}; give one fanout per layer")
    if any(f < 1 for f in config.fanouts):
        raise ConfigError(f"--fanouts must all be >= 1, got {config.fanouts}")


def _validate_distributed(config: TrainConfig) -> None:
    if config.distributed not in DISTRIBUTED:
        raise ConfigError(f"--distributed must be one of {DISTRIBUTED}, got "
                          f"{config.distributed!r}")
    if config.partition not in PARTITIONS:
        raise ConfigError(f"--partition must be one of {PARTITIONS}, got {config.partition!r}")
    if config.distributed == "cooperative" and (config.task != "node"
                                                or config.mode != "sampled"):
        raise ConfigError("--distributed cooperative splits sampled minibatches between "
                          "processes, so it needs --task node --mode sampled (got --task "
                          f"{config.task}" + (f" --mode {config.mode}" if config.task == "node"
                                              else "") + "); use --distributed independent")
    if config.partition != "random" and config.distributed != "cooperative":
        raise ConfigError("--partition applies to --distributed cooperative only")
    if config.cooperate not in COOPERATE:
        raise ConfigError(f"--cooperate must be one of {COOPERATE}, got {config.cooperate!r}")
    if config.prefetch < 0:
        raise ConfigError(f"--prefetch must be >= 0, got {config.prefetch}")
    _validate_partitioned(config)


def _validate_partitioned(config: TrainConfig) -> None:
    if config.cooperate != "all" and config.distributed != "cooperative":
        raise ConfigError("--cooperate local needs --distributed cooperative")
    if config.partitioned is None:
        if config.prefetch != 1:
            raise ConfigError("--prefetch applies to --partitioned runs only")
        if not config.async_exchange:
            raise ConfigError("--no-async-exchange applies to --partitioned runs only")
        return
    if config.task != "node" or config.mode != "sampled":
        raise ConfigError("--partitioned trains sampled minibatches: it needs --task node "
                          "--mode sampled")
    if config.dataset is not None:
        raise ConfigError("--partitioned DIR brings its own data; drop --dataset "
                          f"{config.dataset}")
    if config.partition != "random":
        raise ConfigError("--partition chooses an in-memory partition; with --partitioned the "
                          "parts come from `gnnforge partition --method`")
