"""Kernels on a busy machine: OpenMP's wait policy and thread count under oversubscription.

Data-loader workers, a second training job or a noisy neighbour leave fewer free cores
than torch's thread count. OpenMP threads that spin at barriers (libgomp's default: spin
about 300,000 iterations, then sleep) then take CPU from the thread that has work left,
and a kernel can slow down far more than the lost share of the machine. This times
copy_u_sum forward + backward (default kernels, R-MAT 2^16 nodes / 2^20 edges, F=64) in a
fresh process per configuration, with and without one competing busy process per core
minus one, for OMP_WAIT_POLICY unset / ACTIVE / PASSIVE and 1 or all threads, and prints
the median of --repeats calls.

    python benchmarks/oversubscription.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, statistics, sys, time, torch
from gnnforge import ops
from gnnforge.data import rmat
threads, repeats = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
graph = rmat(scale=16, num_edges=2**20, seed=0)
x = torch.randn(graph.num_nodes, 64, requires_grad=True)
grad = torch.randn(graph.num_nodes, 64)
def call():
    torch.autograd.grad(ops.copy_u_sum(graph, x), x, grad)
for _ in range(3):
    call()
times = []
for _ in range(repeats):
    start = time.perf_counter(); call(); times.append(time.perf_counter() - start)
print(json.dumps({"median_ms": 1e3 * statistics.median(times)}))
"""

BUSY = "while True: pass"


def _measure(policy: str | None, threads: int, repeats: int) -> float:
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    result = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(repeats)],
                            capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["median_ms"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    print(f"machine: {platform.processor() or platform.machine()}, {cores} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: python benchmarks/oversubscription.py --repeats {args.repeats}\n")
    rows = []
    for competitors in (0, max(1, cores - 1)):
        busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(competitors)]
        try:
            time.sleep(0.5)
            for policy in (None, "ACTIVE", "PASSIVE"):
                for threads in sorted({1, cores}):
                    ms = statistics.median(_measure(policy, threads, args.repeats)
                                           for _ in range(3))
                    rows.append([competitors, policy or "unset", threads, f"{ms:.2f}"])
        finally:
            for process in busy:
                process.kill()
    print("| busy processes | OMP_WAIT_POLICY | threads | copy_u_sum fwd+bwd ms |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
