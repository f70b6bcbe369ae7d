"""What `benchmarks/report.py` runs: one section per capability, one run per command.

To add a table to BENCHMARKS.md, add a `Run` to its capability's section here (or a new
`Section`) and regenerate just it: `python benchmarks/report.py --only SECTION.RUN`. The
run's arguments are what a reader types to reproduce the table, so keep them the
script's documented defaults unless a smaller workload is the point.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Run", "SECTIONS", "Section"]


@dataclass(frozen=True)
class Run:
    """One benchmark command and the `###` heading its tables go under.

    Attributes:
        name: id within its section (`SECTION.name` is what `--only` takes).
        title: the run's `###` heading in BENCHMARKS.md.
        argv: the arguments after the interpreter, e.g. `("benchmarks/spmm.py", "--quick")`,
            run from the repository root with it on PYTHONPATH.
        peer: True when the script compares against DGL or PyG, so it runs under
            `--peer-python` (the benchmark venv with both) when one is given.
        interpreter: a Python of another environment of this repository that the run
            needs (relative to its root, e.g. `.venv-xla/bin/python`); None: report.py's.
        env: extra environment variables for the run, as (name, value) pairs.
        on_page: False for a run whose whole output goes to its details file
            (benchmarks/results/SECTION.RUN.md), BENCHMARKS.md keeping its heading, command,
            machine line and a pointer: variants and supporting runs, so the page stays one.
    """

    name: str
    title: str
    argv: tuple[str, ...]
    peer: bool = False
    interpreter: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    on_page: bool = True


@dataclass(frozen=True)
class Section:
    """One capability: its marker name, `##` heading and runs in the order they print."""

    name: str
    title: str
    runs: tuple[Run, ...]


# Held-out graphs x widths x modes x GCN/GAT/SAGE: 72 configurations, ~5-10 min on 2 cores
_PLANNER_EVAL = ("--graphs", "cora", "facebook", "rmat-s13-b", "mycielski-11", "--widths",
                 "32:256,256:32,256:256", "--samples", "5", "--min-seconds", "0.5",
                 "--max-samples", "20")

SECTIONS: tuple[Section, ...] = (
    Section("kernels", "Aggregation kernels (g-SpMM / g-SDDMM)", (
        Run("spmm", "copy_u_sum, mean / max and u_dot_v vs torch.sparse.mm, PyG and DGL "
            "(R-MAT and Pubmed)", ("benchmarks/spmm.py", "--quick"), peer=True),
        Run("spmm-workloads", "copy_u_sum on the other workloads",
            ("benchmarks/spmm.py", "--workloads",
             "grid_shuffled,grid_rowmajor,uniform,github,slashdot,luxembourg_osm"), peer=True,
            on_page=False),
        Run("selection", "Kernel selection: the default path vs every candidate vs DGL",
            ("benchmarks/kernel_selection.py", "--restrictions"), peer=True, on_page=False),
        Run("binary", "Binary-reduce, SDDMM and edge softmax grid vs DGL",
            ("benchmarks/binary.py", "--repeats", "5"), peer=True),
        Run("layers", "GCN / GAT / SAGE layers vs DGL and PyG, same weights",
            ("benchmarks/layers.py", "--repeats", "15", "--min-seconds", "2.0"), peer=True),
        Run("layers_avx2", "The same with both sides restricted to AVX2 (DGL: "
            "LIBXSMM_TARGET=hsw)", ("benchmarks/layers.py", "--restriction", "avx2", "--repeats",
                                    "15", "--min-seconds", "2.0"),
            peer=True),
        Run("dense_product", "The layers' GEMMs: torch's library (MKL) vs oneDNN, and the "
            "recorded choice", ("benchmarks/dense_product.py",), on_page=False),
        Run("sage_root", "SAGE's first layer on ungathered rows: one product over [aggr | "
            "root] rows vs two (products-sized block)", ("benchmarks/sage_root.py",)),
        Run("oversubscription", "Kernels on a busy machine: OpenMP wait policy and threads",
            ("benchmarks/oversubscription.py",), on_page=False),
        Run("tuner_isa", "The tuner's sum/mean classes at F >= 32: SSE2 vs AVX2 (vs AVX-512) builds",
            ("benchmarks/tuner_isa.py",), on_page=False),
        Run("before_after", "Before and after the one-way layering (issue 34): layers and "
            "the default copy_u_sum path, one run",
            ("benchmarks/before_after.py", "--before", "0a9e661", "--after", "cf57780"),
            on_page=False),
    )),
    Section("packing", "Tuple packing", (
        Run("report", "Efficiency at the dataset-maximum limits (the paper's Table 2 "
            "setting)", ("-m", "gnnforge.cli", "pack", "--report", "--no-progress")),
        Run("speed", "Speed", ("benchmarks/packing.py", "speed")),
        Run("improve", "Improvement step under a budget",
            ("benchmarks/packing.py", "improve", "--repeats", "3"), on_page=False),
        Run("search", "Limit search (paper Figure 5)",
            ("-m", "gnnforge.cli", "pack", "--search", "--source", "nci", "--no-progress"),
                on_page=False),
        Run("train", "End-to-end: GIN on Tox21 with three batching schemes",
            ("benchmarks/packing.py", "train", "--steps", "120", "--eval-every", "20")),
    )),
    Section("banded", "Banded dense propagation", (
        Run("reorder", "Reordering statistics (paper Fig. 1)",
            ("-m", "gnnforge.cli", "reorder", "--max-files", "0", "--no-progress"), on_page=False),
        Run("ggnn", "GGNN training on program graphs: sparse vs banded",
            ("benchmarks/banded.py", "--max-files", "30", "--repeats", "5")),
    )),
    Section("sampling", "Sampling and cooperative minibatching", (
        Run("throughput", "Throughput (NS and LABOR-0, fanouts [10, 10, 10], batch 1024)",
            ("benchmarks/sampling.py", "throughput")),
        Run("targets", "LABOR-0 vs NS: sampled vertices (target: >= 20% fewer)",
            ("benchmarks/sampling.py", "targets")),
        Run("saturation", "LABOR-0's saving vs batch size and vs graph size",
            ("benchmarks/sampling.py", "saturation"), on_page=False),
        Run("curve", "Work vs batch size (the concavity curve)",
            ("-m", "gnnforge.cli", "sample", "--graph", "musae-git,rmat", "--curve",
             "--batch-sizes", "64,256,1024,4096", "--batches", "2", "--no-progress")),
        Run("cooperative", "Cooperative vs independent minibatching at P = 2",
            ("benchmarks/sampling.py", "cooperative"), on_page=False),
        Run("cache", "Feature-cache miss rate vs kappa (dependent minibatches)",
            ("benchmarks/sampling.py", "cache")),
        Run("memory", "Sampling memory vs graph size", ("benchmarks/scale_out.py", "memory"),
            on_page=False),
        Run("ranks", "Scale-out: 4 ranks on partitioned R-MAT 2^17",
            ("benchmarks/scale_out.py", "ranks"), on_page=False),
        Run("overlap", "Scale-out: overlap of sampling and the feature-row exchange",
            ("benchmarks/scale_out.py", "overlap"), on_page=False),
    )),
    Section("planner", "Composition planner", (
        Run("table3", "Planner vs fixed plans on held-out graphs, fitted kernels",
            ("benchmarks/planner.py", *_PLANNER_EVAL)),
        Run("table3_numba", "The same with the numba kernels forced, models not refitted",
            ("benchmarks/planner.py", *_PLANNER_EVAL, "--backend", "numba"), on_page=False),
        Run("table3_avx2", "The same with the native kernels restricted to AVX2, models "
            "not refitted", ("benchmarks/planner.py", *_PLANNER_EVAL, "--isa", "avx2"),
                on_page=False),
        Run("table3_keep", "The fitted-kernel table with malloc keeping freed memory (no "
            "page faults from re-allocated tensors)",
            ("benchmarks/planner.py", *_PLANNER_EVAL, "--keep-freed-memory"), on_page=False),
        Run("table3_threads2", "The same at 2 threads (the default here), the models "
            "fitted at 2 threads", ("benchmarks/planner.py", *_PLANNER_EVAL, "--threads", "2"),
                on_page=False),
        Run("rgcn", "RGCN's relation-wise and basis orders: candidates and choices",
            ("benchmarks/planner_rgcn.py",), on_page=False),
        Run("quick_profile", "`gnnforge plan profile --quick`: a refit on this machine",
            ("-m", "gnnforge.cli", "plan", "profile", "--quick", "--no-progress", "--out",
             "/tmp/gnnforge-quick-models")),
        Run("overhead", "Planning overhead vs one iteration of the chosen plan",
            ("benchmarks/planner_overhead.py",), on_page=False),
    )),
    Section("compile", "Compiled vs eager training (`--compile`)", (
        Run("graph", "Graph task: nci-tpsa GIN on packs",
            ("benchmarks/compile.py", "--epochs", "6"), on_page=False),
        Run("node", "Node task: full-graph GCN on Pubmed",
            ("benchmarks/compile.py", "--task", "node", "--epochs", "30"), on_page=False),
    )),
    Section("end_to_end", "End to end", (
        Run("training", "Training time vs PyG (and DGL), same models",
            ("benchmarks/end_to_end.py",), peer=True),
        Run("products", "Sampled GraphSAGE on the products-sized graph (2.45M nodes), each "
            "side in its own process", ("benchmarks/end_to_end.py", "--products",
                                        "--products-steps", "30", "--keep-freed-memory",
                                        "--products-dropout", "0.5,0", "--products-sides",
                                        "gnnforge,DGL,GraphBolt"),
            peer=True),
        Run("products_threads2", "The same at 2 threads (every side's pools)",
            ("benchmarks/end_to_end.py", "--products", "--products-steps", "30", "--threads",
             "2", "--keep-freed-memory", "--products-dropout", "0.5,0", "--products-sides",
             "gnnforge,DGL,GraphBolt"), peer=True,
            on_page=False),
        Run("products_pyg", "With PyG's NeighborLoader (torch-sparse built from source), "
            "5 steps", ("benchmarks/end_to_end.py", "--products", "--products-steps", "5",
                        "--products-dropout", "0.5"), peer=True, on_page=False),
        Run("products_pyg_threads2", "The same at 2 threads",
            ("benchmarks/end_to_end.py", "--products", "--products-steps", "5", "--threads", "2",
             "--products-dropout", "0.5"), peer=True, on_page=False),
        Run("products_gcn", "Full-graph GCN on the products-sized graph, each side in its own "
            "process", ("benchmarks/end_to_end.py", "--products", "--products-gcn",
                        "--products-steps", "1"), peer=True),
        Run("scaling", "Cost growth from 2^18 to 2^23 nodes (synthetic-products; DGL's "
            "sampled step beside ours)",
            ("benchmarks/scaling.py", "--sizes", "18,19,20,21,22,23", "--full-sizes",
             "18,19,20,21", "--steps", "50", "--rounds", "3", "--repeats", "3", "--dgl",
             "--png", "docs/scaling.png"), peer=True, on_page=False),
        Run("larger_than_memory", "Larger than memory: 2^24 nodes (9.5 GiB of data) under an "
            "8 GiB memory cgroup", ("benchmarks/larger_than_memory.py",), on_page=False),
        Run("larger_than_memory_labor", "The same with LABOR-0 sampling (kappa 1 and 256)",
            ("benchmarks/larger_than_memory.py", "--configs", "labor"), on_page=False),
    )),
    Section("parsing", "Dataset parsing", (
        Run("edge_list", "Edge-list parsing vs np.loadtxt and pandas",
            ("benchmarks/bench_parsing.py",)),
    )),
    Section("gpu", "GPU (Triton kernels)", (
        Run("all", "Every GPU table", ("benchmarks/gpu.py",), peer=True),
    )),
    Section("xla", "XLA (torch_xla on its CPU backend)", (
        Run("batching", "gnnforge train's model on XLA: packed vs plain disjoint unions vs "
            "padded to the largest graph", ("benchmarks/xla.py",),
            interpreter=".venv-xla/bin/python", env=(("PJRT_DEVICE", "CPU"),)),
        Run("ggnn", "VarMisuse's GGNN on XLA: banded vs sparse padded to one size vs sparse as "
            "on the CPU", ("benchmarks/xla.py", "--table", "ggnn"),
            interpreter=".venv-xla/bin/python", env=(("PJRT_DEVICE", "CPU"),)),
    )),
)
