"""`gnnforge train`: train a GNN; with no arguments, a GIN on RDKit's NCI molecules (TPSA)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gnnforge.train._config import (NODE_MODES, OPTIONAL_NUMBERS, SAMPLERS, TASK_DEFAULTS,
                                     TASKS, ConfigError, TrainConfig)

DESCRIPTION = ("train a GNN (default: GIN regressing TPSA on RDKit's NCI molecules with "
               "fixed-shape packed batches)")

_HELP = {
    "task": f"what to train: {', '.join(TASKS)}; without it the dataset's kind decides",
    "dataset": "a name `gnnforge datasets` prints, or a molecule CSV: node-labelled graphs "
               "train node classification, labelled graph collections graph prediction, "
               "unlabelled graphs link prediction (default: nci-tpsa, pubmed or rmat by task)",
    "epochs": "maximum number of epochs", "lr": "Adam learning rate",
    "max_steps": "stop after this many optimiser steps in all, across epochs (default: no "
                 "limit); the node task's sampled mode then ends with a line "
                 "`steps/s=S peak_rss_mib=M data_mib=D`",
    "synthetic_nodes": "--dataset synthetic-products: number of nodes (0: ogbn-products' "
                       "2,449,029; e.g. 262144 to 8388608 for scaling curves)",
    "warm_page_cache": "--dataset synthetic-products: read its CSR and features into "
                       "memory (front to back, in huge pages) before training instead of "
                       "memory-mapping them: on, off, or auto (when they take at most half "
                       "of the memory this process may use, cgroup limits included)",
    "weight_decay": "Adam weight decay", "hidden": "hidden width", "layers": "number of GNN layers",
    "dropout": "dropout probability",
    "input_dropout": "node task: dropout on the input features (default: --dropout; "
                     "--dataset synthetic-products: 0, as DGL's and PyG's ogbn-products "
                     "examples)",
    "seed": "seed for model init, splits and batch order",
    "patience": "early stopping: epochs without validation improvement (0: off)",
    "early_stopping": "which epoch is tested and what --patience watches: metric, loss or "
                      "loss-and-metric (node task; the GAT code's rule)",
    "out_dir": "folder for checkpoint.pt, metrics.csv and metrics.json",
    "checkpoint_every": "also checkpoint every N steps within an epoch (0: epoch ends only)",
    "resume": "continue from OUT_DIR/checkpoint.pt exactly where it stopped",
    "progress": "show tqdm progress bars",
    "threads": "torch intra-op threads",
    "workers": "processes that build the training batches (graph task packs, node task "
               "sampled minibatches); the same batches as with 0, built beside training",
    "batch_graphs": "graph task: average graphs per fixed-shape batch",
    "limit": "graph task: use only the first N graphs (0: all); varmisuse task: parse N "
             "files (default 30)",
    "pool": "graph task: readout, sum or mean",
    "folds": "graph task: K-fold cross-validation, stratified; the seed picks the fold "
             "(test: seed mod K, validation: the next fold; 0: a seeded 80/10/10 split)",
    "graph_model": "graph task: molecule-gin (OGB's GIN over embedded integer features) or "
                   "gin-0 (Xu et al.'s GIN-0: one-hot node labels, eps 0, every layer's "
                   "readout summed; --dropout acts on its scores)",
    "steps_per_epoch": "graph task: N steps per epoch, each on --batch-graphs training graphs "
                       "drawn at random, unpadded (Xu et al.'s iterations per epoch; 0: one "
                       "pass over the training graphs in packed batches)",
    "lr_step_epochs": "multiply the learning rate by --lr-gamma every N epochs (StepLR; 0: "
                      "constant)",
    "lr_gamma": "the factor --lr-step-epochs applies",
    "selection": "which epoch is reported: val (the best validation epoch's weights) or "
                 "fold-mean (--folds K --seeds K: every epoch is tested, the validation fold "
                 "trains, and the epoch with the best test accuracy averaged over the folds "
                 "is reported beside the last epoch's; Xu et al.'s protocol, optimistic)",
    "mode": f"node task: {' or '.join(NODE_MODES)}-graph training (link: sampled only)",
    "model": "node and link tasks: sage or gcn layers (node task also gat)",
    "sampler": f"node (--mode sampled) and link tasks: {' or '.join(SAMPLERS)} "
               "(default: neighbor)",
    "fanouts": "node (--mode sampled) and link tasks: neighbours per layer, one per --layers",
    "batch_size": "node task, --mode sampled: seed nodes per minibatch; link task: training "
                  "edges per minibatch",
    "dependent": "node task, --mode sampled: dependent minibatches sharing variates over K "
                 "consecutive batches (0: independent)",
    "cache_size": "node task, --mode sampled: feature cache rows (0: no cache)",
    "normalize_features": "node task: divide each input row by its sum (Kipf & Welling's "
                          "preprocessing)",
    "weight_decay_layers": "node task: weight decay on all layers or on the first only "
                           "(Kipf & Welling's reference code)",
    "activation": "node task: relu or elu between layers",
    "heads": "node task, --model gat: attention heads per hidden layer (--hidden per head)",
    "output_heads": "node task, --model gat: heads averaged in the output layer",
    "attention_dropout": "node task, --model gat: dropout on attention coefficients",
    "largest_component": "node task: keep the largest connected component only, before "
                         "the split (Shchur et al.'s protocol)",
    "distributed": "under torchrun: independent (each process its own minibatches, DDP) or "
                   "cooperative (node task, --mode sampled: the processes sample and compute "
                   "one global minibatch together)",
    "partition": "--distributed cooperative: vertex partition, random or metis",
    "device": "where the model trains: cpu, cuda, cuda:N or xla (--task graph, or node "
              "--mode full; torch_xla from `make xla-env`; samplers and packing stay on "
              "the CPU; batches are copied over through pinned memory)",
    "compile": "run the training step under torch.compile(fullgraph=True, dynamic=False) "
               "and end with the compile counts (frames, graph breaks, recompiles)",
    "partitioned": "node task, sampled, under torchrun: a directory from `gnnforge partition`; "
                   "each process loads only its part",
    "cooperate": "--distributed cooperative: all processes cooperate, or those of one node "
                 "(local: torchrun's LOCAL_WORLD_SIZE; nodes then train independently)",
    "prefetch": "--partitioned: minibatches sampled and fetched ahead by a background thread "
                "(0: off)",
    "async_exchange": "--partitioned, cooperative: issue the input feature rows' all_to_all "
                      "asynchronously, overlapping the next minibatch's sampling",
    "block_size": "varmisuse task: banded block size S (nodes per dense block)",
    "slots": "varmisuse task: nodes per batch, a multiple of --block-size",
    "backend": "varmisuse task: propagation the model trains with: sparse, banded or both "
               "(one model each; banded is several times slower per step on a CPU)",
}


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") \
            from error


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE.toml",
                        help="TOML file with the same keys (top level or under [train]); "
                             "flags override it")
    _configure_recipes(parser)
    defaults = TrainConfig()
    for name, value in defaults.to_dict().items():
        flag = "--" + name.replace("_", "-")
        if name == "step_delay":
            parser.add_argument(flag, type=float, default=None, help=argparse.SUPPRESS)
        elif name in OPTIONAL_NUMBERS:
            parser.add_argument(flag, type=OPTIONAL_NUMBERS[name], default=None,
                                help=_HELP[name])
        elif isinstance(value, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None,
                                help=_help(name, value))
        elif isinstance(value, list):
            parser.add_argument(flag, type=_int_list, default=None, help=_help(name, value))
        else:
            kind = type(value) if value is not None else str
            parser.add_argument(flag, type=kind, default=None, help=_help(name, value))


def _configure_recipes(parser: argparse.ArgumentParser) -> None:
    """--recipe, --seeds and --results (gnnforge/train/_recipes.py, _seeds.py)."""
    parser.add_argument("--recipe", metavar="NAME",
                        help="train with a paper's settings (`gnnforge recipes` lists them; "
                             "flags override them); instead of --config")
    parser.add_argument("--seeds", type=int, default=None, metavar="N",
                        help="run seeds SEED..SEED+N-1 and print mean ± std of the test "
                             "metric with a per-seed table (default with --recipe: 1)")
    parser.add_argument("--results", metavar="FILE.csv|FILE.json", default=None,
                        help="with --seeds or --recipe: also write the per-seed results")


def _help(name: str, default: object) -> str:
    """The flag's help with its default said once; per-task defaults are named."""
    by_task = {task: values[name] for task, values in TASK_DEFAULTS.items() if name in values}
    if default is None:
        return _HELP[name]
    shown = ",".join(map(str, default)) if isinstance(default, list) else str(default)
    if isinstance(default, bool):
        shown = "on" if default else "off"
    extra = "".join(f"; --task {task}: "
                    + (",".join(map(str, v)) if isinstance(v, list) else str(v))
                    for task, v in by_task.items())
    return f"{_HELP[name]} (default {shown}{extra})"


def build_task(config: TrainConfig) -> Any:
    """The task object for `config.task` (imports only what that task needs)."""
    if config.task == "graph":
        from gnnforge.train._graph_task import GraphTask

        return GraphTask(config)
    if config.task == "node" and config.partitioned is not None:
        from gnnforge.train._partitioned import PartitionedNodeTask

        return PartitionedNodeTask(config)
    if config.task == "node" and str(config.dataset).lower() == "synthetic-products":
        from gnnforge.train._mapped_node_task import MappedNodeTask

        return MappedNodeTask(config)
    if config.task == "node":
        from gnnforge.train._node_task import NodeTask

        return NodeTask(config)
    if config.task == "link":
        from gnnforge.train._link_task import LinkTask

        return LinkTask(config)
    raise ConfigError(f"build_task: no engine task for --task {config.task}")


# TrainConfig field -> VarMisuseConfig field, for the options the user set explicitly (the
# VarMisuse runner keeps its own defaults, e.g. 3 epochs and 30 files, otherwise).
_VARMISUSE_FIELDS = {"epochs": "epochs", "hidden": "hidden", "lr": "lr", "seed": "seed",
                     "progress": "progress", "layers": "num_steps", "limit": "max_files",
                     "block_size": "block_size", "slots": "num_slots", "threads": "threads",
                     "device": "device", "compile": "compile"}


def _varmisuse_options(config: TrainConfig, explicit: set[str]) -> dict[str, Any]:
    unsupported = sorted(explicit & {"resume", "checkpoint_every", "patience", "dropout",
                                     "weight_decay", "batch_graphs", "pool"})
    if unsupported:
        raise ConfigError(f"--task varmisuse does not take {unsupported}: its runner trains "
                          "in one pass without checkpoints; see docs/banded.md")
    if "limit" in explicit and config.limit == 0:
        raise ConfigError("--task varmisuse: --limit is the number of Python files to parse; "
                          "0 would take every file of the corpus (hours on 2 cores): give a "
                          "number, e.g. --limit 30")
    options = {_VARMISUSE_FIELDS[k]: getattr(config, k) for k in explicit
               if k in _VARMISUSE_FIELDS}
    options.setdefault("progress", config.progress)
    options["backends"] = ("sparse", "banded") if config.backend == "both" \
        else (config.backend,)
    if config.dataset is not None and config.dataset.lower() != "python-programs":
        options["root"] = config.dataset  # a folder of .py files
    return options


def run_varmisuse_task(config: TrainConfig, explicit: set[str]) -> int:
    """`--task varmisuse`: the banded work's VarMisuse runner (GGNN, sparse and banded);
    results go to stdout and to OUT_DIR/varmisuse.json and varmisuse.md."""
    import json
    from pathlib import Path

    options = _varmisuse_options(config, explicit)
    from gnnforge.train._varmisuse import VarMisuseConfig, format_results, run_varmisuse

    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = run_varmisuse(VarMisuseConfig(**options))
    table = format_results(results)
    print(results["corpus"], results["examples"], sep="\n")
    print(table)
    print(f"{results['seconds']:.0f} s, world size {results['world_size']}")
    counts = results.get("compile")
    compile_line = None if counts is None else (
        f"compile: frames={counts['frames']} graph_breaks={counts['graph_breaks']} "
        f"recompiles={counts['recompiles']}")
    if results["world_size"] == 1 or _rank() == 0:
        (out_dir / "varmisuse.json").write_text(json.dumps(results, indent=2, default=str))
        (out_dir / "varmisuse.md").write_text(table + "\n")
        print(f"results written to {out_dir / 'varmisuse.json'} and varmisuse.md")
    if compile_line is not None:  # the run's last line, as the engine's tasks end
        print(compile_line)
    if results.get("xla") is not None:
        _print_xla_counts(results)
    return 0


def _print_xla_counts(results: dict) -> None:
    """Each model's training counts, then the whole run's (evaluation included) last."""
    from gnnforge.train._xla_meter import format_counts

    for row in results["rows"]:
        print(format_counts(row["xla_train"],
                            f"xla training {row['train_backend']} T={row['num_steps']}"))
    print(format_counts(results["xla"]))


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def set_threads(threads: int) -> None:
    """Use `threads` threads in torch and in numba (the compiled kernels' pool).

    Both pools spin while waiting for work; on a shared 2-core machine an idle-spinning
    numba pool slowed every torch op beside it by 10-40x in our measurements.
    """
    import torch

    torch.set_num_threads(threads)
    try:
        import numba
    except ImportError:
        return
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def starting(args: argparse.Namespace) -> str:
    """The first line a run prints (before torch loads), naming what it is about to do."""
    what = [f"--{name.replace('_', '-')} {getattr(args, name)}"
            for name in ("recipe", "task", "dataset", "limit", "epochs", "seeds")
            if getattr(args, name, None) is not None]
    return f"gnnforge train {' '.join(what)}: loading torch and the data...".replace("  ", " ")


def _recipe(args: argparse.Namespace) -> Any:
    """The --recipe's `Recipe` (None without one), after checking the flags around it."""
    from gnnforge.train._seeds import check_results_path

    check_results_path(args.results)
    if args.recipe is None:
        if args.results is not None and args.seeds is None:
            raise ConfigError("--results writes the per-seed table: add --seeds N")
        return None
    if args.config is not None:
        raise ConfigError(f"--recipe {args.recipe} is a config file already: drop --config "
                          f"{args.config} (flags still override the recipe)")
    from gnnforge.train._recipes import load_recipe

    return load_recipe(args.recipe)


def run(args: argparse.Namespace) -> int:
    from gnnforge.train._checkpoint import check_out_dir
    from gnnforge.train._config import _read_toml, load_config
    from gnnforge.train._engine import finish_distributed, fit

    overrides = {k: v for k, v in vars(args).items() if k not in ("command", "config")}
    try:
        recipe = _recipe(args)
        config = load_config(overrides, args.config if recipe is None else recipe.path)
        if config.task != "varmisuse":
            check_out_dir(config.out_dir)  # fail now, not after the first epoch
        set_threads(config.threads)
        if config.selection == "fold-mean" and recipe is None and args.seeds is None:
            raise ConfigError("--selection fold-mean picks one epoch for several folds "
                              "together: run the folds with --seeds K (K = --folds "
                              f"{config.folds} for every fold once)")
        if recipe is not None or args.seeds is not None:
            from gnnforge.train._seeds import run_seeds_command

            return run_seeds_command(config, args.seeds or 1, recipe, args.results,
                                     build_task, fit)
        if config.task == "varmisuse":
            explicit = {k for k, v in overrides.items() if v is not None and k != "task"}
            if args.config is not None:
                explicit |= set(_read_toml(args.config)) - {"task"}
            return run_varmisuse_task(config, explicit)
        task = build_task(config)
    except (ConfigError, FileNotFoundError) as error:
        print(f"gnnforge train: error: {error}", file=sys.stderr)
        return 2
    summary = fit(config, task)
    report = task.resource_report(summary) if hasattr(task, "resource_report") else None
    if report is not None and _rank() == 0:
        print(report, flush=True)  # sampled node training: the run's last line
    if hasattr(task, "rank_report"):
        print(task.rank_report(), flush=True)  # every process: its own memory and traffic
    finish_distributed()
    return 0
