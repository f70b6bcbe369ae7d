"""Layers side by side: gnnforge vs DGL (int64 and int32 graphs) vs PyG, same weights.

For 2-layer GCN (hidden 64), GAT (8 heads x 8, then 1 head) and SAGE-mean (hidden 64) on
PubMed (its 500 features, 3 classes) and the GitHub MUSAE graph (37,700 nodes, 289,003
undirected edges; random 128-wide features, its 2 classes), it times one training step
(forward, cross-entropy, backward, Adam) and one inference forward, the median of
--repeats interleaved rounds (benchmarks/_interleaved.py: each timed call right after an
untimed call of the same model, the models in a new order each round) after a warm-up
round, for:

    gnnforge   gnnforge.nn layers, default kernels (selection by measurement) and GEMM
               library (`ops.dense_product`: torch's MKL or oneDNN, measured per product
               class; the peers' projections run on torch's MKL)
    dgl64/32   DGL 2.1 GraphConv(norm='both') / GATConv / SAGEConv('mean') on an int64 /
               int32 graph (for GCN and GAT with self-loops added to the graph, as PyG's
               and our layers add them), libxsmm as DGL ships it
    pyg        torch_geometric GCNConv / GATConv / SAGEConv (edge_index int64)
    pyg-csr    the same layers on PyG's sparse layout, a torch CSR adj_t
               (`ToSparseTensor(layout=torch.sparse_csr)`), GCN with cached=True (its
               normalised adjacency computed once): PyG's fastest full-graph setup

All models get the same weights (copied from gnnforge's), and the table prints the
largest difference of each peer's inference output from gnnforge's, so the rows compute
the same function. Run in a venv with DGL and PyG (../shared/peers/install_peers.sh).
`--restriction avx2` runs it again with both sides restricted to AVX2 (gnnforge's
candidates, numba, MKL, and DGL's libxsmm with LIBXSMM_TARGET=hsw; benchmarks/
_restrictions.py), standing in for a CPU without AVX-512.

    python benchmarks/layers.py
    python benchmarks/layers.py --restriction avx2
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from gnnforge.data import load_dataset, shared_datasets_dir
from gnnforge.graph import Graph
from gnnforge.nn import GATConv, GCNConv, SAGEConv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _interleaved import interleaved_median_ms  # noqa: E402
from _restrictions import RESTRICTIONS, applied, rerun_under  # noqa: E402


# ----------------------------------------------------------------------------- data


def _undirected(graph: Graph) -> Graph:
    src = torch.cat([graph.src, graph.dst])
    dst = torch.cat([graph.dst, graph.src])
    keep = src != dst
    keys = torch.unique(src[keep] * graph.num_nodes + dst[keep])
    return Graph(keys // graph.num_nodes, keys % graph.num_nodes, graph.num_nodes)


def load(name: str):
    """(graph without self-loops, x, y)."""
    if name == "pubmed":
        dataset = load_dataset("pubmed")
        x, y = dataset.graph.node_data["x"], dataset.graph.node_data["y"]
    else:
        dataset = load_dataset("musae-git")
        y = dataset.graph.node_data["y"]
        x = torch.randn(dataset.graph.num_nodes, 128, generator=torch.Generator().manual_seed(0))
    return _undirected(dataset.graph), x.float(), y.long()


# ----------------------------------------------------------------------------- models


class Ours(torch.nn.Module):
    def __init__(self, kind: str, width: int, classes: int):
        super().__init__()
        if kind == "gcn":
            self.one, self.two = GCNConv(width, 64), GCNConv(64, classes)
        elif kind == "gat":
            self.one, self.two = GATConv(width, 8, heads=8), GATConv(64, classes, heads=1)
        else:
            self.one = SAGEConv(width, 64, aggr="mean")
            self.two = SAGEConv(64, classes, aggr="mean")

    def forward(self, graph, x):
        return self.two(graph, F.elu(self.one(graph, x)))


class Dgl(torch.nn.Module):
    def __init__(self, kind: str, ours: Ours):
        super().__init__()
        from dgl.nn import GATConv as DGAT
        from dgl.nn import GraphConv, SAGEConv as DSAGE

        self.layers = torch.nn.ModuleList()
        for layer in (ours.one, ours.two):
            if kind == "gcn":
                theirs = GraphConv(layer.in_channels, layer.out_channels, norm="both")
                theirs.weight.data.copy_(layer.lin.weight.t())
                theirs.bias.data.copy_(layer.bias)
            elif kind == "gat":
                theirs = DGAT(layer.in_channels, layer.out_channels, layer.heads,
                              negative_slope=layer.negative_slope, bias=True)
                theirs.fc.weight.data.copy_(layer.lin.weight)
                theirs.attn_l.data.copy_(layer.att_src)
                theirs.attn_r.data.copy_(layer.att_dst)
                theirs.bias.data.copy_(layer.bias)
            else:
                theirs = DSAGE(layer.in_channels, layer.out_channels, "mean")
                theirs.fc_neigh.weight.data.copy_(layer.lin_l.weight)
                theirs.fc_self.weight.data.copy_(layer.lin_r.weight)
                theirs.fc_self.bias.data.copy_(layer.lin_l.bias)
            self.layers.append(theirs)
        self.kind = kind

    def forward(self, graph, x):
        h = self.layers[0](graph, x)
        h = F.elu(h.flatten(1))
        out = self.layers[1](graph, h)
        return out.flatten(1) if self.kind != "gat" else out.mean(1)


class Pyg(torch.nn.Module):
    def __init__(self, kind: str, ours: Ours, cached: bool = False):
        super().__init__()
        import torch_geometric.nn as pyg

        self.layers = torch.nn.ModuleList()
        for layer in (ours.one, ours.two):
            if kind == "gcn":
                theirs = pyg.GCNConv(layer.in_channels, layer.out_channels, cached=cached)
            elif kind == "gat":
                theirs = pyg.GATConv(layer.in_channels, layer.out_channels, heads=layer.heads,
                                     negative_slope=layer.negative_slope)
            else:
                theirs = pyg.SAGEConv(layer.in_channels, layer.out_channels, aggr="mean")
            theirs.load_state_dict(layer.state_dict(), strict=False)
            if kind == "gat":
                theirs.lin.weight.data.copy_(layer.lin.weight)
            self.layers.append(theirs)

    def forward(self, edge_index, x):
        return self.layers[1](F.elu(self.layers[0](x, edge_index)), edge_index)


# ----------------------------------------------------------------------------- timing


def _step(model, graph, x, y):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train():
        optimizer.zero_grad()
        F.cross_entropy(model(graph, x), y).backward()
        optimizer.step()

    def infer():
        with torch.no_grad():
            return model(graph, x)

    return train, infer


def _csr_adj_t(edge_index, num_nodes: int):
    """PyG's transposed adjacency as a torch CSR tensor (row = destination)."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import ToSparseTensor

    data = ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=edge_index,
                                                        num_nodes=num_nodes))
    return data.adj_t


def runs(kind: str, graph: Graph, x, y, dgl):
    """name -> (train step, inference, inference output before any training)."""
    classes = int(y.max()) + 1
    torch.manual_seed(0)
    ours = Ours(kind, x.shape[1], classes)
    models = {"gnnforge": (ours, graph)}
    if dgl is not None:
        for bits, idtype in ((64, torch.int64), (32, torch.int32)):
            # GCN and GAT add one self-loop per node (PyG's and ours do it inside the layer).
            loops = torch.arange(graph.num_nodes if kind != "sage" else 0)
            dgl_graph = dgl.graph((torch.cat([graph.src, loops]), torch.cat([graph.dst, loops])),
                                  num_nodes=graph.num_nodes, idtype=idtype)
            dgl_graph.create_formats_()
            models[f"dgl{bits}"] = (Dgl(kind, ours), dgl_graph)
    edge_index = torch.stack([graph.src, graph.dst])
    models["pyg"] = (Pyg(kind, ours), edge_index)
    models["pyg-csr"] = (Pyg(kind, ours, cached=True), _csr_adj_t(edge_index, graph.num_nodes))
    result = {}
    for name, (model, structure) in models.items():
        train, infer = _step(model, structure, x, y)
        result[name] = (train, infer, infer())
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="pubmed,github")
    parser.add_argument("--layers", default="gcn,gat,sage")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="extend cheap cells' rounds until the timed calls of all "
                        "methods add up to this many seconds (odd count, at most 101 rounds)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--restriction", choices=tuple(RESTRICTIONS), default="all",
                        help="instruction sets both sides may use (benchmarks/_restrictions.py)")
    args = parser.parse_args(argv)
    if not applied(args.restriction):
        return rerun_under(args.restriction, __file__, argv)
    torch.set_num_threads(args.threads)
    if shared_datasets_dir() is None:
        print("layers: the shared datasets folder is absent; set GNNFORGE_DATASETS")
        return 0
    try:
        import dgl
    except Exception as error:  # noqa: BLE001  (a peer: report and go on without it)
        print(f"DGL skipped: cannot import it ({type(error).__name__}: {error})")
        dgl = None
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} "
          f"threads, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"command: python benchmarks/layers.py --datasets {args.datasets} --layers "
          f"{args.layers} --repeats {args.repeats} --min-seconds {args.min_seconds} "
          f"--restriction {args.restriction}\n")
    methods = ("gnnforge", "dgl64", "dgl32", "pyg", "pyg-csr")
    header = ["dataset", "layer", "mode", *(f"{name} ms" for name in methods),
              "vs fastest peer", "max |peer - ours|"]
    rows = []
    cells = [(d, k) for d in args.datasets.split(",") for k in args.layers.split(",")]
    data = {}
    for dataset, kind in tqdm(cells, desc="layers", file=sys.stderr):
        if dataset not in data:
            data[dataset] = load(dataset)
        graph, x, y = data[dataset]
        result = runs(kind, graph, x, y, dgl)
        reference = result["gnnforge"][2]
        difference = max(float((out - reference).abs().max())
                         for name, (_, _, out) in result.items() if name != "gnnforge")
        for mode, index in (("train", 0), ("infer", 1)):
            ms = interleaved_median_ms({name: runs_[index] for name, runs_ in result.items()},
                                       args.repeats, args.min_seconds)
            peers = [value for name, value in ms.items() if name != "gnnforge"]
            rows.append([dataset, kind, mode, *(f"{ms.get(n, float('nan')):.2f}"
                                                for n in methods),
                         f"{min(peers) / ms['gnnforge']:.2f}x", f"{difference:.1e}"])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
