"""Compiled vs eager training throughput: `gnnforge train` with and without `--compile`.

Runs each mode in its own process (fresh dynamo state, the same thread settings) for
`--epochs` epochs without early stopping, reads the per-epoch throughput from
metrics.json and prints the median over epochs 2.. (epoch 1 of the compiled run includes
compilation, reported separately) with the compile counts.

    python benchmarks/compile.py                        # the main job (nci-tpsa GIN)
    python benchmarks/compile.py --epochs 6 -- --limit 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(mode: str, epochs: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out_dir:
        command = [sys.executable, "-m", "gnnforge.cli", "train", "--epochs", str(epochs),
                   "--patience", "0", "--no-progress", "--out-dir", out_dir, *extra]
        if mode == "compiled":
            command.append("--compile")
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        document = json.loads((Path(out_dir) / "metrics.json").read_text())
    rows = document["epochs"]
    rate = next(key for key in rows[0] if key.endswith("_per_s"))
    last = result.stdout.strip().splitlines()[-1]
    return {"mode": mode, "first epoch s": rows[0]["train_seconds"],
            "median items/s (epochs 2..)": statistics.median(r[rate] for r in rows[1:]),
            "per epoch": [round(r[rate]) for r in rows],
            "compile": last if last.startswith("compile:") else "-"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("extra", nargs="*", help="flags passed to gnnforge train (after --)")
    args = parser.parse_args()
    results = [run(mode, args.epochs, args.extra) for mode in ("eager", "compiled")]
    print(f"gnnforge train {' '.join(args.extra)}: {args.epochs} epochs per mode")
    print(f"{'mode':<9} {'first epoch s':>14} {'median items/s':>15}  per-epoch items/s")
    for row in results:
        print(f"{row['mode']:<9} {row['first epoch s']:>14.1f} "
              f"{row['median items/s (epochs 2..)']:>15.0f}  {row['per epoch']}")
    ratio = results[1]["median items/s (epochs 2..)"] / results[0]["median items/s (epochs 2..)"]
    print(f"compiled / eager: {ratio:.2f}x   {results[1]['compile']}")


if __name__ == "__main__":
    main()
