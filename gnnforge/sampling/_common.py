"""What the samplers share: input checks and the layer-by-layer loop that builds blocks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from gnnforge.graph import Graph
from gnnforge.sampling._block import Block
from gnnforge.sampling._kernels import compact
from gnnforge.sampling._variates import VariateKey



@dataclass(frozen=True)
class InEdges:
    """In-edges of a set of destinations as a CSR whose columns are global vertex ids.

    For a whole graph, row v holds vertex v's in-edges (`nodes` is None). For a partition
    (`gnnforge.distributed.Partition`), row i holds the in-edges of `nodes[i]`, the part's
    owned vertices in ascending order; the samplers find a destination's row by binary
    search, so no array indexed by global id is needed.

    Attributes:
        rowptr: [rows + 1] int32/int64.
        col: [E] int32/int64 global source id of each in-edge, in the whole graph's CSR
            order within a row (so a partition samples exactly what the graph would).
        eids: [E] int32/int64 id of each edge in the parent graph, or an empty array
            when the ids are the CSR positions (a graph stored as CSR, such as
            `gnnforge.data.load_synthetic_products`'s: no [E] array of ids is held).
        num_nodes: vertices of the whole graph.
        nodes: None, or [rows] int64 sorted global ids of the rows.
    """

    rowptr: np.ndarray
    col: np.ndarray
    eids: np.ndarray
    num_nodes: int
    nodes: np.ndarray | None = None

    def rows(self, frontier: np.ndarray) -> np.ndarray:
        """CSR rows of the destinations `frontier` (global ids).

        Raises:
            ValueError: when a destination's in-edges are not stored here.
        """
        if self.nodes is None:
            return frontier
        rows = np.searchsorted(self.nodes, frontier)
        found = rows < self.nodes.size
        found[found] = self.nodes[rows[found]] == frontier[found]
        if not found.all():
            bad = int(np.flatnonzero(~found)[0])
            raise ValueError(f"vertex {int(frontier[bad])} is not stored in this partition "
                             f"(its in-edges live with its owner)")
        return rows


# One layer: (in-edges, rows, frontier, layer index, layer key)
#   -> (counts, src, eid, weight | None)
LayerFn = Callable[[InEdges, np.ndarray, np.ndarray, int, VariateKey], tuple]


def check_fanouts(name: str, fanouts: Sequence[int]) -> list[int]:
    """Fanouts as a list of ints (>= 1, or -1 for the full neighbourhood)."""
    if isinstance(fanouts, int) or not isinstance(fanouts, Sequence) or len(fanouts) == 0:
        raise ValueError(f"{name}: fanouts must be a non-empty list of ints, got {fanouts!r}")
    checked = []
    for layer, fanout in enumerate(fanouts):
        if not isinstance(fanout, int | np.integer) or (fanout < 1 and fanout != -1):
            raise ValueError(f"{name}: fanouts[{layer}] = {fanout!r}; expected an int >= 1 "
                             "or -1 for every in-neighbour")
        checked.append(int(fanout))
    return checked


def check_seeds(graph: Graph, seeds: Tensor | Sequence[int]) -> np.ndarray:
    """Seeds as a contiguous int64 numpy array of distinct ids in [0, num_nodes)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a gnnforge Graph, got {type(graph).__name__}")
    return check_seed_ids(seeds, graph.num_nodes)


def check_seed_ids(seeds: Tensor | Sequence[int], num_nodes: int) -> np.ndarray:
    """`check_seeds` against a vertex count (for in-edges without a `Graph`)."""
    seeds_t = torch.as_tensor(seeds)
    if seeds_t.dim() != 1 or seeds_t.dtype.is_floating_point or seeds_t.dtype == torch.bool:
        raise ValueError(f"seeds: expected a 1-D integer tensor of node ids, got shape "
                         f"{tuple(seeds_t.shape)} dtype {seeds_t.dtype}")
    array = np.ascontiguousarray(seeds_t.to(torch.int64).cpu().numpy())
    if array.size:
        bad = np.flatnonzero((array < 0) | (array >= num_nodes))
        if bad.size:
            raise ValueError(f"seeds[{bad[0]}] = {array[bad[0]]} is out of range "
                             f"[0, {num_nodes})")
        if np.unique(array).size != array.size:
            raise ValueError("seeds contains repeated ids; pass each seed once "
                             "(e.g. torch.unique(seeds))")
    return array


def in_edges(graph: Graph) -> InEdges:
    """The whole graph's in-edges (`csr_arrays`) as an `InEdges`."""
    return InEdges(*csr_arrays(graph), graph.num_nodes)


def csr_arrays(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rowptr, col, parent edge ids) of the CSR by destination, as numpy arrays.

    int32 when the graph fits (fewer than 2^31 nodes and edges): the samplers' gathers
    are random reads of `col` and the edge ids, and half-width arrays miss the cache less
    (numba promotes the arithmetic to int64, so sums of degrees cannot overflow).
    """
    fits = max(graph.num_nodes, graph.num_edges) < 2**31
    rowptr, col, eids = graph.csr(torch.int32 if fits else torch.int64)
    return rowptr.cpu().numpy(), col.cpu().numpy(), eids.cpu().numpy()


def sample_blocks(edges: InEdges, seeds: np.ndarray, key: VariateKey, num_layers: int,
                  layer_fn: LayerFn) -> list[Block]:
    """Run `layer_fn` from the output layer down; return blocks input layer first.

    Memory follows the batch: every array allocated here is sized by the frontier or the
    sampled edges, never by num_nodes (compaction uses a batch-sized hash map).
    """
    frontier = seeds
    blocks = []
    for layer in reversed(range(num_layers)):
        blocks.append(sample_layer(edges, frontier, layer, key, layer_fn))
        frontier = blocks[-1].src_nodes.numpy()
    return blocks[::-1]


def sample_layer(edges: InEdges, frontier: np.ndarray, layer: int, key: VariateKey,
                 layer_fn: LayerFn) -> Block:
    """One compacted block for destinations `frontier` (global ids)."""
    rows = edges.rows(frontier)
    counts, src, eid, weight = layer_fn(edges, rows, frontier, layer, key.for_layer(layer))
    col, src_nodes = compact(frontier, src)
    return make_block(src_nodes, counts, col, eid, weight)


def make_block(src_nodes: np.ndarray, counts: np.ndarray, col: np.ndarray, eid: np.ndarray,
               weight: np.ndarray | None) -> Block:
    rowptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=rowptr[1:])
    return Block(torch.from_numpy(src_nodes), torch.from_numpy(rowptr), torch.from_numpy(col),
                 torch.from_numpy(eid),
                 None if weight is None else torch.from_numpy(weight.astype(np.float32)))


def resolve_key(generator: torch.Generator | None, key: VariateKey | None) -> VariateKey:
    from gnnforge.sampling._variates import draw_key

    if key is not None and generator is not None:
        raise ValueError("pass either generator= or key=, not both")
    if key is not None and not isinstance(key, VariateKey):
        raise TypeError("key: expected a VariateKey (from DependentKeys), got "
                        f"{type(key).__name__}")
    return key if key is not None else draw_key(generator)


class LayerwiseSampler:
    """Base of the samplers that run one kernel per layer from the seeds down.

    Subclasses provide `num_layers` and `layer_fn(graph)` (the per-layer kernel call
    `(in_edges, rows, frontier, layer, layer_key) -> (counts, src, eid, weight)`).
    """

    num_layers: int

    def layer_fn(self, graph: Graph) -> LayerFn:
        raise NotImplementedError

    def sample(self, graph: Graph | InEdges, seeds: Tensor | Sequence[int],
               generator: torch.Generator | None = None, *,
               key: VariateKey | None = None) -> list[Block]:
        """Sample blocks whose last layer's destinations are `seeds`.

        Args:
            graph: the full graph (in-edges from `graph.csr()`), or a whole graph's
                `InEdges` (a CSR held without a `Graph`, e.g. memory-mapped).
            seeds: [B] distinct int64 node ids.
            generator: source of this minibatch's key (independent minibatches).
            key: instead of a generator, an explicit key, e.g. from `DependentKeys`.

        Returns:
            `num_layers` blocks, input layer first.
        """
        if isinstance(graph, InEdges):
            if graph.nodes is not None:
                raise ValueError("sample: these InEdges hold a partition's rows; sample a "
                                 "partition with gnnforge.distributed's samplers")
            seeds_np, edges = check_seed_ids(seeds, graph.num_nodes), graph
        else:
            seeds_np, edges = check_seeds(graph, seeds), in_edges(graph)
        return sample_blocks(edges, seeds_np, resolve_key(generator, key), self.num_layers,
                             self.layer_fn(graph))

