"""Command line of the VarMisuse task (the training engine will route `gnnforge train` here).

Single process: ``python -m gnnforge.train.varmisuse_main --max-files 30``.
Data parallel on CPU: ``torchrun --standalone --nproc_per_node 2 -m gnnforge.train.varmisuse_main``.
"""

from __future__ import annotations

import argparse
from dataclasses import fields

import torch
import torch.distributed as dist

from gnnforge._device import process_device
from gnnforge.train._varmisuse import VarMisuseConfig, format_results, run_varmisuse

__all__ = ["main"]


def _boolean(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gnnforge.train.varmisuse_main",
                                     description="VarMisuse with a GGNN, sparse vs banded")
    defaults = VarMisuseConfig()
    for item in fields(VarMisuseConfig):
        flag = "--" + item.name.replace("_", "-")
        value = getattr(defaults, item.name)
        if item.name == "backends":
            parser.add_argument(flag, default=",".join(value), help="comma-separated")
        elif isinstance(value, bool):
            parser.add_argument(flag, type=_boolean, default=value)
        else:
            kind = (int if item.name in ("max_files", "model_seed")
                    else type(value) if value is not None else str)
            parser.add_argument(flag, type=kind, default=value)
    args = vars(parser.parse_args(argv))
    args["backends"] = tuple(b for b in args["backends"].split(",") if b)
    if args["max_files"] == 0:
        args["max_files"] = None
    torch.set_num_threads(args["threads"])
    try:
        process_device(args["device"])  # a one-line error, before anything loads
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    results = run_varmisuse(VarMisuseConfig(**args))
    if results["world_size"] == 1 or dist.get_rank() == 0:
        print(results["corpus"], results["examples"], sep="\n")
        for name, report in results["compiled"].items():
            print(f"[{name}] {report}")
        print(format_results(results))
        print(f"{results['seconds']:.0f} s, world size {results['world_size']}")
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
