"""The graph types: one immutable `Graph` and a `GraphBatch` of many graphs.

COO (`src`, `dst`, `num_nodes`) is canonical. The compressed formats the kernels use
(CSR by destination, CSC by source) are derived on first use and cached together with
the permutation that reorders edge values; the cache is not part of equality or repr.
Constructors validate untrusted input once and raise `GraphError` naming the first
offending position; internal code builds trusted graphs with `Graph._trusted`.

This file is over the usual size because its types and their validation are one idea:
a batch is a graph and shares every constructor check, and the bipartite view shares the
compressed-format code that defines what the kernels read.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from gnnforge import _device
from gnnforge._interop import GraphParts, data_list_to_pyg, parts_from_pyg, parts_to_pyg
from gnnforge._static_shapes import bincount, static_shapes

__all__ = ["BipartiteGraph", "Graph", "GraphBatch", "GraphError", "Subgraph"]

_INDEX_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_EMPTY: Mapping[str, Tensor] = MappingProxyType({})


class GraphError(ValueError):
    """Malformed graph input; the message names the problem and the first bad position."""


class Subgraph(NamedTuple):
    """An induced subgraph and where its nodes and edges came from."""

    graph: Graph
    node_ids: Tensor  # [n] new node i was node_ids[i] in the parent
    edge_ids: Tensor  # [m] new edge j was edge_ids[j] in the parent


# ----------------------------------------------------------------------------- validation


def _to_tensor(name: str, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray | Sequence) and not isinstance(value, str | bytes):
        try:
            return torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError) as error:
            raise GraphError(f"{name}: cannot convert to a tensor ({error})") from error
    raise GraphError(f"{name}: expected a tensor, numpy array or list, got {type(value).__name__}")


def _index_tensor(name: str, value: Any) -> Tensor:
    if isinstance(value, list | tuple) and len(value) == 0:
        return torch.zeros(0, dtype=torch.int64)  # an empty list has no dtype to check
    tensor = _to_tensor(name, value)
    if tensor.dtype == torch.bool or tensor.dtype not in _INDEX_DTYPES:
        raise GraphError(f"{name}: expected an integer tensor of node ids, got dtype {tensor.dtype}")
    if tensor.dim() != 1:
        raise GraphError(f"{name}: expected a 1-D tensor, got shape {tuple(tensor.shape)}")
    return tensor.to(torch.int64).contiguous()


def _first_true(mask: Tensor) -> int:
    return int(torch.nonzero(mask)[0, 0])


def _check_range(name: str, index: Tensor, upper: int, bound: str = "num_nodes") -> None:
    if index.numel() == 0:
        return
    bad = (index < 0) | (index >= upper)
    if bool(bad.any()):
        position = _first_true(bad)
        raise GraphError(
            f"{name}[{position}] = {int(index[position])} is out of range: "
            f"ids must lie in [0, {upper}) for {bound}={upper}"
        )


def _check_count(name: str, value: Any) -> int:
    """A node count: a non-negative int (numpy and 0-d tensors accepted), never a bool."""
    if isinstance(value, Tensor) and value.dim() == 0 and not value.is_floating_point():
        value = int(value)
    if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
        raise GraphError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < 2**63:
        raise GraphError(f"{name} must lie in [0, 2**63), got {value}")
    return int(value)


def _check_features(kind: str, data: Mapping[str, Any] | None, length: int) -> Mapping[str, Tensor]:
    if data is None:
        return _EMPTY
    if not isinstance(data, Mapping):
        raise GraphError(f"{kind}: expected a dict of tensors, got {type(data).__name__}")
    checked = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise GraphError(f"{kind}: keys must be strings, got {key!r}")
        tensor = _to_tensor(f"{kind}[{key!r}]", value)
        if tensor.dim() == 0 or tensor.shape[0] != length:
            raise GraphError(
                f"{kind}[{key!r}]: first dimension must be {length}, got shape {tuple(tensor.shape)}"
            )
        _check_finite(f"{kind}[{key!r}]", tensor)
        checked[key] = tensor
    return MappingProxyType(checked)


def _check_finite(name: str, tensor: Tensor) -> None:
    if not (tensor.is_floating_point() or tensor.is_complex()):
        return
    finite = torch.isfinite(tensor)
    if not bool(finite.all()):
        position = tuple(int(i) for i in torch.nonzero(~finite)[0])
        raise GraphError(f"{name}: non-finite value {tensor[position].item()} at index {position}")


def _check_graph_data(data: Mapping[str, Any] | None) -> Mapping[str, Tensor]:
    if data is None:
        return _EMPTY
    if not isinstance(data, Mapping):
        raise GraphError(f"graph_data: expected a dict of tensors, got {type(data).__name__}")
    checked = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise GraphError(f"graph_data: keys must be strings, got {key!r}")
        tensor = _to_tensor(f"graph_data[{key!r}]", value)
        _check_finite(f"graph_data[{key!r}]", tensor)
        checked[key] = tensor
    return MappingProxyType(checked)


# ----------------------------------------------------------------------------- formats


def _compress(major: Tensor, minor: Tensor, num_major: int, num_minor: int,
              index_dtype: torch.dtype):
    """Sort edges by (major, minor) and return (ptr, minor sorted, permutation)."""
    # Sorting by the pair, not major alone, keeps each row's sources ascending, which is
    # what makes a pull kernel read source features in memory order.
    order = _lexicographic_order([major, minor], [num_major, num_minor])
    ptr = torch.zeros(num_major + 1, dtype=torch.int64, device=major.device)
    ptr[1:] = torch.cumsum(bincount(major, num_major), 0)  # XLA: no bincount fallback
    return ptr.to(index_dtype), minor[order].to(index_dtype), order.to(index_dtype)


def _lexicographic_order(columns: list[Tensor], sizes: list[int]) -> Tensor:
    """Stable order of the rows of `columns` (ids in [0, size)) by (columns[0], columns[1], ...).

    One sort of the mixed-radix key when the product of the sizes fits in int64; else one
    stable sort per column, last column first, so no key can wrap around (a graph with more
    than about 3e9 nodes, or a relation view with a huge side).
    """
    if math.prod(max(size, 1) for size in sizes) < 2**63:
        key = columns[0]
        for column, size in zip(columns[1:], sizes[1:]):
            key = key * max(size, 1) + column
        return torch.argsort(key, stable=True)
    order = torch.argsort(columns[-1], stable=True)
    for column in reversed(columns[:-1]):
        order = order[torch.argsort(column[order], stable=True)]
    return order


def _cached_compressed(cache: dict, kind: str, index_dtype: torch.dtype, src: Tensor,
                       dst: Tensor, num_src: int, num_dst: int):
    """CSR (by dst) or CSC (by src) in `index_dtype`, computed once per dtype into `cache`."""
    key = (kind, index_dtype)
    if key not in cache:
        if index_dtype not in (torch.int32, torch.int64):
            raise TypeError(f"index_dtype must be torch.int32 or torch.int64, got {index_dtype}")
        if index_dtype == torch.int32 and max(num_src, num_dst, src.numel()) >= 2**31:
            raise ValueError(f"graph too large for int32 indices ({max(num_src, num_dst)} nodes, "
                             f"{src.numel()} edges); use int64")
        base = cache.get((kind, torch.int64))
        if base is not None:  # narrowing the int64 arrays is cheaper than sorting again
            cache[key] = tuple(t.to(index_dtype) for t in base)
        elif kind == "csr":
            cache[key] = _compress(dst, src, num_dst, num_src, index_dtype)
        else:
            cache[key] = _compress(src, dst, num_src, num_dst, index_dtype)
    return cache[key]


def _slot_state(graph: Any, apply: Any) -> dict[str, Any]:
    """Every slot of `graph` with `apply` on each tensor: read-only dicts as plain dicts,
    and of the cache only its tensors (compressed formats, node-to-graph maps); the rest
    of the cache is derived again on first use."""
    state = {}
    for cls in type(graph).__mro__:
        for name in getattr(cls, "__slots__", ()):
            value = getattr(graph, name)
            if name == "_cache":
                mapped = {key: _map_tensors(entry, apply) for key, entry in value.items()}
                value = {key: entry for key, entry in mapped.items() if entry is not None}
            elif isinstance(value, Mapping):
                value = {key: apply(tensor) for key, tensor in value.items()}
            elif isinstance(value, Tensor):
                value = apply(value)
            state[name] = value
    return state


def _map_tensors(entry: Any, apply: Any) -> Any:
    """`apply` on a tensor or on each of a tuple of tensors; None for anything else."""
    if isinstance(entry, Tensor):
        return apply(entry)
    if isinstance(entry, tuple) and entry and all(isinstance(t, Tensor) for t in entry):
        return tuple(apply(t) for t in entry)
    return None


def _rebuild_slots(cls: type, state: dict[str, Any]) -> Any:
    """The inverse of `_slot_state`: a trusted object of `cls` from its slots."""
    graph = cls.__new__(cls)
    for name, value in state.items():
        if name.endswith("_data"):
            value = MappingProxyType(value)
        object.__setattr__(graph, name, value)
    return graph


# ----------------------------------------------------------------------------- Graph


class Graph:
    """An immutable directed multigraph with node, edge and graph data.

    Attributes:
        num_nodes: number of nodes N (isolated nodes count).
        src: [E] int64 source node of each edge.
        dst: [E] int64 destination node of each edge. Messages flow src -> dst.
        edge_type: [E] int64 relation id per edge, or None.
        node_data: read-only dict of tensors with first dimension N.
        edge_data: read-only dict of tensors with first dimension E.
        graph_data: read-only dict of per-graph tensors (labels, targets); any shape.

    Self-loops and duplicate edges are allowed and kept. Operations return new graphs.

    Raises:
        GraphError: on wrong dtype or shape, ids out of range, mismatched feature
            lengths or non-finite float features, naming the first bad position.
    """

    __slots__ = ("num_nodes", "src", "dst", "edge_type", "node_data", "edge_data",
                 "graph_data", "_cache")

    def __init__(
        self,
        src: Tensor | np.ndarray | Sequence[int],
        dst: Tensor | np.ndarray | Sequence[int],
        num_nodes: int | None = None,
        *,
        edge_type: Tensor | np.ndarray | Sequence[int] | None = None,
        node_data: Mapping[str, Tensor] | None = None,
        edge_data: Mapping[str, Tensor] | None = None,
        graph_data: Mapping[str, Tensor] | None = None,
    ) -> None:
        src_t = _index_tensor("src", src)
        dst_t = _index_tensor("dst", dst)
        if src_t.shape != dst_t.shape:
            raise GraphError(f"src and dst must have equal length, got {src_t.numel()} and {dst_t.numel()}")
        if src_t.device != dst_t.device:
            raise GraphError(f"src is on {src_t.device} but dst is on {dst_t.device}")
        num_nodes = _infer_num_nodes(src_t, dst_t, num_nodes)
        _check_range("src", src_t, num_nodes)
        _check_range("dst", dst_t, num_nodes)
        type_t = None
        if edge_type is not None:
            type_t = _index_tensor("edge_type", edge_type)
            if type_t.numel() != src_t.numel():
                raise GraphError(f"edge_type has {type_t.numel()} entries for {src_t.numel()} edges")
            if type_t.numel() and bool((type_t < 0).any()):
                position = _first_true(type_t < 0)
                raise GraphError(f"edge_type[{position}] = {int(type_t[position])} is negative")
        self._set(num_nodes, src_t, dst_t, type_t,
                  _check_features("node_data", node_data, num_nodes),
                  _check_features("edge_data", edge_data, src_t.numel()),
                  _check_graph_data(graph_data))

    def _set(self, num_nodes, src, dst, edge_type, node_data, edge_data, graph_data) -> None:
        setter = object.__setattr__
        setter(self, "num_nodes", int(num_nodes))
        setter(self, "src", src)
        setter(self, "dst", dst)
        setter(self, "edge_type", edge_type)
        setter(self, "node_data", MappingProxyType(dict(node_data)))
        setter(self, "edge_data", MappingProxyType(dict(edge_data)))
        setter(self, "graph_data", MappingProxyType(dict(graph_data)))
        setter(self, "_cache", {})

    @classmethod
    def _trusted(cls, src, dst, num_nodes, edge_type=None, node_data=None, edge_data=None,
                 graph_data=None):
        """Build without validation; for internal code whose inputs are already valid."""
        graph = cls.__new__(cls)
        Graph._set(graph, num_nodes, src, dst, edge_type, node_data or {}, edge_data or {},
                   graph_data or {})
        return graph

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Graph is immutable; use a method that returns a new graph (not {name})")

    # ------------------------------------------------------------------ basic properties

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    @property
    def device(self) -> torch.device:
        return self.src.device

    # The kernel protocol: ops accept any object with num_src_nodes, num_dst_nodes,
    # num_edges, coo(), csr() and csc(). A Graph is square; a sampler's block is not.
    @property
    def num_src_nodes(self) -> int:
        return self.num_nodes

    @property
    def num_dst_nodes(self) -> int:
        return self.num_nodes

    @property
    def num_edge_types(self) -> int:
        """Number of relations: max edge_type + 1 (1 when the graph is untyped)."""
        if self.edge_type is None or self.edge_type.numel() == 0:
            return 1
        return int(self.edge_type.max()) + 1

    def coo(self) -> tuple[Tensor, Tensor]:
        """Return (src, dst), each [E] int64, in edge-id order."""
        return self.src, self.dst

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """CSR by destination: the pull layout of the kernels.

        Returns:
            rowptr: [N+1]; row v's in-edges are entries rowptr[v]:rowptr[v+1].
            col: [E] source node of each entry; ascending within a row.
            edge_ids: [E] original edge id of each entry, to reorder edge values.
        """
        return self._compressed("csr", index_dtype)

    def csc(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """CSC by source: (colptr [N+1], row [E] destinations, edge_ids [E]); out-edges per node."""
        return self._compressed("csc", index_dtype)

    def _compressed(self, kind: str, index_dtype: torch.dtype):
        return _cached_compressed(self._cache, kind, index_dtype, self.src, self.dst,
                                  self.num_nodes, self.num_nodes)

    def by_relation(self, num_edge_types: int | None = None) -> BipartiteGraph:
        """Relation-expanded view: destination (v, r) becomes row v * P + r (cached).

        One copy_u-sum over it gives every per-relation aggregate at once as [N * P, F],
        which is [N, P * F] in memory. Untyped graphs have the single relation 0.

        Raises:
            ValueError: when an edge type is >= num_edge_types (checked where the host may be
                read; with static shapes, XLA or torch.compile, the caller checks on the CPU).
        """
        if num_edge_types is None:
            types = self.num_edge_types
        else:
            types = int(num_edge_types)
            if not static_shapes(self.edge_type) and types < self.num_edge_types:
                raise ValueError(f"by_relation: graph has edge types up to "
                                 f"{self.num_edge_types - 1}, more than num_edge_types={types}")
        key = ("by_relation", types)
        if key not in self._cache:
            etype = self.edge_type if self.edge_type is not None else torch.zeros_like(self.src)
            self._cache[key] = BipartiteGraph._trusted(self.src, self.dst * types + etype,
                                                       self.num_nodes, self.num_nodes * types)
        return self._cache[key]

    def in_degrees(self) -> Tensor:
        """[N] int64 number of edges arriving at each node."""
        return torch.bincount(self.dst, minlength=self.num_nodes)

    def out_degrees(self) -> Tensor:
        """[N] int64 number of edges leaving each node."""
        return torch.bincount(self.src, minlength=self.num_nodes)

    def num_self_loops(self) -> int:
        return int((self.src == self.dst).sum())

    # ------------------------------------------------------------------ derived graphs

    def _replace(self, **changes) -> Graph:
        fields = dict(src=self.src, dst=self.dst, num_nodes=self.num_nodes,
                      edge_type=self.edge_type, node_data=self.node_data,
                      edge_data=self.edge_data, graph_data=self.graph_data)
        fields.update(changes)
        return Graph._trusted(**fields)

    def _select_edges(self, edge_ids: Tensor) -> Graph:
        return self._replace(
            src=self.src[edge_ids], dst=self.dst[edge_ids],
            edge_type=None if self.edge_type is None else self.edge_type[edge_ids],
            edge_data={k: v[edge_ids] for k, v in self.edge_data.items()})

    def with_node_data(self, **data: Tensor) -> Graph:
        """A new graph with these node tensors added or replaced (validated)."""
        return self._replace(node_data=_check_features(
            "node_data", {**self.node_data, **data}, self.num_nodes))

    def with_edge_data(self, **data: Tensor) -> Graph:
        """A new graph with these edge tensors added or replaced (validated)."""
        return self._replace(edge_data=_check_features(
            "edge_data", {**self.edge_data, **data}, self.num_edges))

    def with_graph_data(self, **data: Tensor) -> Graph:
        """A new graph with these per-graph tensors added or replaced (validated)."""
        return self._replace(graph_data=_check_graph_data({**self.graph_data, **data}))

    def to(self, device: torch.device | str) -> Graph:
        """The same graph with every tensor on `device`; CPU to GPU through pinned memory,
        non-blocking (`gnnforge._device.to_device`). Cached formats are rebuilt there, so
        the kernels (chosen by the tensors' device) follow the graph."""
        device = torch.device(device)
        # Looked up at call time, so tests can observe every handover (`_device.to_device`).
        one = lambda t: _device.to_device(t, device)  # noqa: E731
        move = lambda d: {k: one(v) for k, v in d.items()}  # noqa: E731
        return self._replace(
            src=one(self.src), dst=one(self.dst),
            edge_type=None if self.edge_type is None else one(self.edge_type),
            node_data=move(self.node_data), edge_data=move(self.edge_data),
            graph_data=move(self.graph_data))

    def reverse(self) -> Graph:
        """Every edge flipped (dst -> src), edge data kept in edge order."""
        graph = self._replace(src=self.dst, dst=self.src)
        # CSC of the reverse is CSR of this graph, so share what is already computed.
        for (kind, dtype), value in self._cache.items():
            if kind in ("csr", "csc"):  # not the relation views, nor prepared structures
                graph._cache[("csc" if kind == "csr" else "csr", dtype)] = value
        return graph

    def remove_self_loops(self) -> Graph:
        """A new graph without edges u -> u (their edge data goes with them)."""
        return self._select_edges(torch.nonzero(self.src != self.dst).flatten())

    def add_self_loops(self, edge_type: int | None = None, fill_value: float = 0.0) -> Graph:
        """Append one loop per node (after the existing edges).

        Args:
            edge_type: relation id for the loops; required when the graph is typed.
            fill_value: value of every edge-data entry of the new loops.
        """
        if self.edge_type is not None and edge_type is None:
            raise ValueError("add_self_loops: this graph has edge types; pass edge_type= for the loops")
        if self.edge_type is None and edge_type is not None:
            raise ValueError(f"add_self_loops: this graph has no edge types, so edge_type="
                             f"{edge_type!r} would be dropped; leave it out")
        if edge_type is not None and (not isinstance(edge_type, int | np.integer)
                                      or isinstance(edge_type, bool) or edge_type < 0):
            raise ValueError(f"add_self_loops: edge_type must be an int >= 0, got {edge_type!r}")
        loops = torch.arange(self.num_nodes, device=self.device)
        types = None
        if self.edge_type is not None:
            types = torch.cat([self.edge_type, torch.full_like(loops, int(edge_type))])
        data = {k: torch.cat([v, v.new_full((self.num_nodes, *v.shape[1:]), fill_value)])
                for k, v in self.edge_data.items()}
        return self._replace(src=torch.cat([self.src, loops]), dst=torch.cat([self.dst, loops]),
                             edge_type=types, edge_data=data)

    def coalesce(self) -> Graph:
        """Drop duplicate edges (same src, dst and edge type), keeping each first occurrence."""
        columns, sizes = [self.src, self.dst], [self.num_nodes, self.num_nodes]
        if self.edge_type is not None:
            columns.append(self.edge_type)
            sizes.append(self.num_edge_types)
        return self._select_edges(_first_occurrences(columns, sizes))

    def to_undirected(self, dedup: bool = True) -> Graph:
        """Add the reverse of every edge (edge data copied), then optionally `coalesce`."""
        graph = self._replace(
            src=torch.cat([self.src, self.dst]), dst=torch.cat([self.dst, self.src]),
            edge_type=None if self.edge_type is None else self.edge_type.repeat(2),
            edge_data={k: torch.cat([v, v]) for k, v in self.edge_data.items()})
        return graph.coalesce() if dedup else graph

    def subgraph(self, nodes: Tensor | Sequence[int]) -> Subgraph:
        """The subgraph induced by `nodes` (new node i is old node nodes[i]).

        Raises:
            GraphError: when an id is out of range or repeated.
        """
        node_ids = _index_tensor("nodes", nodes).to(self.device)
        _check_range("nodes", node_ids, self.num_nodes)
        new_id = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=self.device)
        new_id[node_ids] = torch.arange(node_ids.numel(), device=self.device)
        if int((new_id >= 0).sum()) != node_ids.numel():
            raise GraphError("subgraph: nodes contains repeated ids")
        keep = torch.nonzero((new_id[self.src] >= 0) & (new_id[self.dst] >= 0)).flatten()
        graph = Graph._trusted(
            new_id[self.src[keep]], new_id[self.dst[keep]], node_ids.numel(),
            None if self.edge_type is None else self.edge_type[keep],
            {k: v[node_ids] for k, v in self.node_data.items()},
            {k: v[keep] for k, v in self.edge_data.items()}, self.graph_data)
        return Subgraph(graph, node_ids, keep)

    def reorder_nodes(self, order: Tensor | Sequence[int]) -> Graph:
        """Renumber nodes so that new node i is old node order[i] (a permutation)."""
        order_t = _index_tensor("order", order).to(self.device)
        if order_t.numel() != self.num_nodes:
            raise GraphError(f"order has {order_t.numel()} entries for {self.num_nodes} nodes")
        return self.subgraph(order_t).graph

    # ------------------------------------------------------------------ interop

    @classmethod
    def from_pyg(cls, data: Any, levels: dict[str, str] | None = None) -> Graph:
        """Build from a `torch_geometric.data.Data` (requires the `pyg` extra).

        PyG guesses whether an attribute is per node, edge or graph from its size; pass
        `levels={'y': 'graph'}` where that guess is ambiguous (e.g. num_nodes == num_edges).
        """
        return Graph(**parts_from_pyg(data, levels))

    def to_pyg(self) -> Any:
        """Convert to a `torch_geometric.data.Data` (requires the `pyg` extra)."""
        return parts_to_pyg(self._parts())

    def _parts(self) -> GraphParts:
        """This graph as the constructor's keyword arguments (what `_interop` converts)."""
        return GraphParts(src=self.src, dst=self.dst, num_nodes=self.num_nodes,
                          edge_type=self.edge_type, node_data=dict(self.node_data),
                          edge_data=dict(self.edge_data), graph_data=dict(self.graph_data))

    @classmethod
    def from_scipy(cls, matrix: Any, edge_weight_key: str | None = None) -> Graph:
        """Build from a square scipy sparse matrix; entry (i, j) is the edge i -> j."""
        coo = matrix.tocoo()
        if coo.shape[0] != coo.shape[1]:
            raise GraphError(f"from_scipy: adjacency must be square, got shape {coo.shape}")
        edge_data = None
        if edge_weight_key is not None:
            edge_data = {edge_weight_key: torch.as_tensor(coo.data)}
        return cls(torch.as_tensor(coo.row.astype(np.int64)), torch.as_tensor(coo.col.astype(np.int64)),
                   coo.shape[0], edge_data=edge_data)

    def to_scipy(self, weight: Tensor | None = None) -> Any:
        """A scipy CSR matrix with entry (src, dst) = weight (1 per edge; duplicates summed)."""
        import scipy.sparse as sp

        values = np.ones(self.num_edges) if weight is None else weight.detach().cpu().numpy()
        return sp.csr_matrix((values, (self.src.cpu().numpy(), self.dst.cpu().numpy())),
                             shape=(self.num_nodes, self.num_nodes))

    # ------------------------------------------------------------------ equality and repr

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Graph) or type(self) is not type(other):
            return NotImplemented
        return (self.num_nodes == other.num_nodes
                and torch.equal(self.src, other.src) and torch.equal(self.dst, other.dst)
                and _optional_equal(self.edge_type, other.edge_type)
                and _dicts_equal(self.node_data, other.node_data)
                and _dicts_equal(self.edge_data, other.edge_data)
                and _dicts_equal(self.graph_data, other.graph_data))

    __hash__ = None  # type: ignore[assignment]  # equality is by value over tensors

    # ------------------------------------------------------------------ pickling and pinning

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle by fields, as loader workers and other ranks need (the read-only dicts
        are not picklable as they are). The compressed formats already derived go along,
        so the CSR a worker built is not sorted again in the main process."""
        return _rebuild_slots, (type(self), _slot_state(self, lambda tensor: tensor))

    def pin_memory(self) -> Graph:
        """The same graph (or batch) with every tensor in page-locked memory, for
        asynchronous copies to a GPU; torch's DataLoader calls it with `pin_memory=True`."""
        return _rebuild_slots(type(self), _slot_state(self, lambda tensor: tensor.pin_memory()))

    def __repr__(self) -> str:
        parts = [f"num_nodes={self.num_nodes}", f"num_edges={self.num_edges}"]
        if self.edge_type is not None:
            parts.append(f"num_edge_types={self.num_edge_types}")
        for name in ("node_data", "edge_data", "graph_data"):
            data = getattr(self, name)
            if data:
                parts.append(f"{name}={{{_describe(data)}}}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _infer_num_nodes(src: Tensor, dst: Tensor, num_nodes: int | None) -> int:
    if num_nodes is None:
        largest = int(torch.maximum(src.max(), dst.max())) if src.numel() else -1
        if largest == 2**63 - 1:
            raise GraphError(f"node id {largest} leaves no int64 room for num_nodes = id + 1")
        return largest + 1
    if isinstance(num_nodes, Tensor):
        num_nodes = int(num_nodes)
    if not isinstance(num_nodes, int | np.integer) or isinstance(num_nodes, bool):
        raise GraphError(f"num_nodes must be an int, got {type(num_nodes).__name__}")
    if not 0 <= num_nodes < 2**63:
        raise GraphError(f"num_nodes must lie in [0, 2**63), got {num_nodes}")
    return int(num_nodes)


def _first_occurrences(columns: list[Tensor], sizes: list[int]) -> Tensor:
    """Positions of the first occurrence of each distinct row of `columns`, ascending."""
    if columns[0].numel() == 0:
        return columns[0].new_zeros(0)
    order = _lexicographic_order(columns, sizes)
    first = torch.ones(order.numel(), dtype=torch.bool, device=order.device)
    first[1:] = False
    for column in columns:
        ordered = column[order]
        first[1:] |= ordered[1:] != ordered[:-1]
    return torch.sort(order[first]).values


def _optional_equal(a: Tensor | None, b: Tensor | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))


def _dicts_equal(a: Mapping[str, Tensor], b: Mapping[str, Tensor]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)


def _describe(data: Mapping[str, Tensor]) -> str:
    return ", ".join(f"{k}: {list(v.shape)} {str(v.dtype).removeprefix('torch.')}"
                     for k, v in data.items())


# ----------------------------------------------------------------------------- GraphBatch


class GraphBatch(Graph):
    """The disjoint union of B graphs, itself a `Graph`.

    Nodes and edges of graph b are contiguous: nodes graph_ptr[b]:graph_ptr[b+1], edges
    edge_ptr[b]:edge_ptr[b+1]. Graph data is stacked to [B, ...]. A padded batch (fixed
    tensor shapes for static-shape hardware) holds padding graphs whose `graph_mask` is
    False; following jraph, padding nodes and edges belong to such a dummy graph, and
    padding edges are self-loops on a padding node, so they never touch real nodes.

    Attributes (beyond Graph's):
        graph_ptr: [B+1] int64 node offsets.
        edge_ptr: [B+1] int64 edge offsets.
        graph_mask: [B] bool, False for padding graphs.
    """

    __slots__ = ("graph_ptr", "edge_ptr", "graph_mask")

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("build a GraphBatch with GraphBatch.from_graphs(graphs) or batch.pad(...)")

    @classmethod
    def _make(cls, graph: Graph, graph_ptr: Tensor, edge_ptr: Tensor, graph_mask: Tensor) -> GraphBatch:
        batch = cls.__new__(cls)
        Graph._set(batch, graph.num_nodes, graph.src, graph.dst, graph.edge_type,
                   graph.node_data, graph.edge_data, graph.graph_data)
        object.__setattr__(batch, "graph_ptr", graph_ptr)
        object.__setattr__(batch, "edge_ptr", edge_ptr)
        object.__setattr__(batch, "graph_mask", graph_mask)
        return batch

    @classmethod
    def from_graphs(cls, graphs: Sequence[Graph]) -> GraphBatch:
        """Concatenate graphs into one batch; `unbatch()` gives them back exactly.

        Raises:
            GraphError: when the graphs disagree on data keys, trailing shapes, dtypes,
                device or on having edge types (names the first graph that differs).
        """
        graphs = list(graphs)
        for position, graph in enumerate(graphs):
            if not isinstance(graph, Graph):
                raise GraphError(f"graphs[{position}] is a {type(graph).__name__}, not a Graph")
            if isinstance(graph, GraphBatch):
                raise GraphError(f"graphs[{position}] is already a GraphBatch; unbatch() it first")
        if not graphs:
            empty = torch.zeros(1, dtype=torch.int64)
            return cls._make(Graph._trusted(empty[:0], empty[:0], 0), empty, empty,
                             torch.zeros(0, dtype=torch.bool))
        _check_compatible(graphs)
        node_counts = torch.tensor([g.num_nodes for g in graphs], dtype=torch.int64)
        edge_counts = torch.tensor([g.num_edges for g in graphs], dtype=torch.int64)
        graph_ptr = _offsets(node_counts)
        edge_ptr = _offsets(edge_counts)
        device = graphs[0].device
        shift = torch.repeat_interleave(graph_ptr[:-1], edge_counts).to(device)
        first = graphs[0]
        union = Graph._trusted(
            torch.cat([g.src for g in graphs]) + shift,
            torch.cat([g.dst for g in graphs]) + shift,
            int(graph_ptr[-1]),
            None if first.edge_type is None else torch.cat([g.edge_type for g in graphs]),
            {k: torch.cat([g.node_data[k] for g in graphs]) for k in first.node_data},
            {k: torch.cat([g.edge_data[k] for g in graphs]) for k in first.edge_data},
            {k: torch.stack([g.graph_data[k] for g in graphs]) for k in first.graph_data})
        return cls._make(union, graph_ptr.to(device), edge_ptr.to(device),
                         torch.ones(len(graphs), dtype=torch.bool, device=device))

    # ------------------------------------------------------------------ batch structure

    @property
    def num_graphs(self) -> int:
        """Number of graph slots, padding graphs included."""
        return int(self.graph_mask.numel())

    @property
    def num_real_graphs(self) -> int:
        return int(self.graph_mask.sum())

    @property
    def node_graph(self) -> Tensor:
        """[N] int64 graph slot of each node."""
        if "node_graph" not in self._cache:
            self._cache["node_graph"] = torch.repeat_interleave(
                torch.arange(self.num_graphs, device=self.device), torch.diff(self.graph_ptr),
                output_size=self.num_nodes)
        return self._cache["node_graph"]

    @property
    def edge_graph(self) -> Tensor:
        """[E] int64 graph slot of each edge."""
        if "edge_graph" not in self._cache:
            self._cache["edge_graph"] = torch.repeat_interleave(
                torch.arange(self.num_graphs, device=self.device), torch.diff(self.edge_ptr),
                output_size=self.num_edges)
        return self._cache["edge_graph"]

    @property
    def node_mask(self) -> Tensor:
        """[N] bool, False on padding nodes."""
        return self.graph_mask[self.node_graph]

    @property
    def edge_mask(self) -> Tensor:
        """[E] bool, False on padding edges."""
        return self.graph_mask[self.edge_graph]

    def graph_sizes(self) -> Tensor:
        """[B, 2] int64 (nodes, edges) per graph slot."""
        return torch.stack([torch.diff(self.graph_ptr), torch.diff(self.edge_ptr)], dim=1)

    def unbatch(self) -> list[Graph]:
        """The real (unmasked) graphs, in order, exactly as they were batched."""
        node_ptr = self.graph_ptr.tolist()
        edge_ptr = self.edge_ptr.tolist()
        mask = self.graph_mask.tolist()
        graphs = []
        for slot, real in enumerate(mask):
            if real:
                graphs.append(self._slice(slot, node_ptr, edge_ptr))
        return graphs

    def _slice(self, slot: int, node_ptr: list[int], edge_ptr: list[int]) -> Graph:
        n0, n1, e0, e1 = node_ptr[slot], node_ptr[slot + 1], edge_ptr[slot], edge_ptr[slot + 1]
        return Graph._trusted(
            self.src[e0:e1] - n0, self.dst[e0:e1] - n0, n1 - n0,
            None if self.edge_type is None else self.edge_type[e0:e1],
            {k: v[n0:n1] for k, v in self.node_data.items()},
            {k: v[e0:e1] for k, v in self.edge_data.items()},
            {k: v[slot] for k, v in self.graph_data.items()})

    # ------------------------------------------------------------------ padding

    def pad(self, num_nodes: int, num_edges: int, num_graphs: int) -> GraphBatch:
        """Pad to exactly (num_nodes, num_edges, num_graphs) with masked padding graphs.

        One padding graph takes every padding node and edge (edges are loops on its first
        node); the remaining padding slots are empty graphs. Padding data is zero.

        Raises:
            ValueError: when the batch does not fit, leaving no room for the padding graph
                (it needs one node and one graph slot).
        """
        for name, value in (("num_nodes", num_nodes), ("num_edges", num_edges),
                            ("num_graphs", num_graphs)):
            if not isinstance(value, int | np.integer) or isinstance(value, bool):
                raise TypeError(f"pad: {name} must be an int, got {value!r}")
        if num_nodes < self.num_nodes + 1 or num_edges < self.num_edges or num_graphs < self.num_graphs + 1:
            raise ValueError(
                f"pad: batch with {self.num_nodes} nodes, {self.num_edges} edges, "
                f"{self.num_graphs} graphs does not fit ({num_nodes}, {num_edges}, {num_graphs}); "
                "padding needs at least one extra node and one extra graph slot")
        extra_nodes = num_nodes - self.num_nodes
        extra_edges = num_edges - self.num_edges
        extra_graphs = num_graphs - self.num_graphs
        device = self.device
        loop = torch.full((extra_edges,), self.num_nodes, dtype=torch.int64, device=device)
        pad_rows = lambda v, n: torch.cat([v, v.new_zeros((n, *v.shape[1:]))])  # noqa: E731
        union = Graph._trusted(
            torch.cat([self.src, loop]), torch.cat([self.dst, loop]), num_nodes,
            None if self.edge_type is None else pad_rows(self.edge_type, extra_edges),
            {k: pad_rows(v, extra_nodes) for k, v in self.node_data.items()},
            {k: pad_rows(v, extra_edges) for k, v in self.edge_data.items()},
            {k: pad_rows(v, extra_graphs) for k, v in self.graph_data.items()})
        # The first padding slot ends at the padded totals; the others are empty after it.
        graph_ptr = torch.cat([self.graph_ptr, torch.full((extra_graphs,), num_nodes, device=device)])
        edge_ptr = torch.cat([self.edge_ptr, torch.full((extra_graphs,), num_edges, device=device)])
        graph_mask = torch.cat([self.graph_mask,
                                torch.zeros(extra_graphs, dtype=torch.bool, device=device)])
        return GraphBatch._make(union, graph_ptr, edge_ptr, graph_mask)

    def to(self, device: torch.device | str) -> GraphBatch:
        """The same batch (offsets and masks included) with every tensor on `device`; CPU to
        GPU through pinned memory, non-blocking, as `Graph.to`."""
        device = torch.device(device)
        return GraphBatch._make(Graph.to(self, device),
                                *(_device.to_device(t, device)
                                  for t in (self.graph_ptr, self.edge_ptr, self.graph_mask)))

    def unpad(self) -> GraphBatch:
        """The batch of real graphs only (inverse of `pad`)."""
        return GraphBatch.from_graphs(self.unbatch())

    # ------------------------------------------------------------------ interop and repr

    @classmethod
    def from_pyg(cls, batch: Any, levels: dict[str, str] | None = None) -> GraphBatch:
        """Build from a `torch_geometric.data.Batch` (requires the `pyg` extra)."""
        return cls.from_graphs([Graph(**parts_from_pyg(d, levels))
                                for d in batch.to_data_list()])

    def to_pyg(self) -> Any:
        """Convert the real graphs to a `torch_geometric.data.Batch`."""
        return data_list_to_pyg([parts_to_pyg(graph._parts()) for graph in self.unbatch()])

    def __eq__(self, other: object) -> bool:
        result = super().__eq__(other)
        if result is NotImplemented or not result:
            return result
        return (torch.equal(self.graph_ptr, other.graph_ptr)
                and torch.equal(self.edge_ptr, other.edge_ptr)
                and torch.equal(self.graph_mask, other.graph_mask))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = super().__repr__().split("(", 1)[1]
        return f"GraphBatch(num_graphs={self.num_graphs}, real={self.num_real_graphs}, {inner}"


def _offsets(counts: Tensor) -> Tensor:
    ptr = torch.zeros(counts.numel() + 1, dtype=torch.int64)
    ptr[1:] = torch.cumsum(counts, 0)
    return ptr


def _check_compatible(graphs: list[Graph]) -> None:
    first = graphs[0]
    for position, graph in enumerate(graphs[1:], start=1):
        if graph.device != first.device:
            raise GraphError(f"graphs[{position}] is on {graph.device}, graphs[0] on {first.device}")
        if (graph.edge_type is None) != (first.edge_type is None):
            raise GraphError(f"graphs[{position}] and graphs[0] disagree on having edge_type")
        for name in ("node_data", "edge_data", "graph_data"):
            mine, theirs = getattr(graph, name), getattr(first, name)
            if mine.keys() != theirs.keys():
                raise GraphError(f"graphs[{position}].{name} has keys {sorted(mine)}, "
                                 f"graphs[0] has {sorted(theirs)}")
            for key in mine:
                a, b = mine[key], theirs[key]
                lead = 0 if name == "graph_data" else 1
                if a.dtype != b.dtype or a.shape[lead:] != b.shape[lead:]:
                    raise GraphError(
                        f"graphs[{position}].{name}[{key!r}] is {list(a.shape)} {a.dtype}, "
                        f"graphs[0] has {list(b.shape)} {b.dtype}")


# ----------------------------------------------------------------------------- BipartiteGraph


class BipartiteGraph:
    """Edges from `num_src_nodes` sources to `num_dst_nodes` destinations.

    The smallest object that follows the kernel protocol for non-square structure: a
    relation-expanded view of a typed graph (destination (v, r) as one row), for instance,
    so that one g-SpMM computes every per-relation aggregate. The constructor validates
    like `Graph`'s (the kernels trust these ids); internal code that derives the ids from
    a validated graph uses `BipartiteGraph._trusted`. CSR/CSC are derived on first use and
    cached like a Graph's.

    Attributes:
        src: [E] int64 ids in [0, num_src_nodes). dst: [E] int64 ids in [0, num_dst_nodes).

    Raises:
        GraphError: on a non-integer or non-1-D id tensor, unequal lengths, a negative or
            non-integer count, or an id out of range (naming the first one).
    """

    __slots__ = ("src", "dst", "num_src_nodes", "num_dst_nodes", "_cache")

    def __init__(self, src: Tensor | np.ndarray | Sequence[int],
                 dst: Tensor | np.ndarray | Sequence[int], num_src_nodes: int,
                 num_dst_nodes: int) -> None:
        src_t, dst_t = _index_tensor("src", src), _index_tensor("dst", dst)
        if src_t.shape != dst_t.shape:
            raise GraphError(f"src and dst must have equal length, got {src_t.numel()} and "
                             f"{dst_t.numel()}")
        if src_t.device != dst_t.device:
            raise GraphError(f"src is on {src_t.device} but dst is on {dst_t.device}")
        num_src = _check_count("num_src_nodes", num_src_nodes)
        num_dst = _check_count("num_dst_nodes", num_dst_nodes)
        _check_range("src", src_t, num_src, "num_src_nodes")
        _check_range("dst", dst_t, num_dst, "num_dst_nodes")
        self._set(src_t, dst_t, num_src, num_dst)

    def _set(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> None:
        self.src, self.dst = src, dst
        self.num_src_nodes, self.num_dst_nodes = int(num_src), int(num_dst)
        self._cache: dict = {}

    @classmethod
    def _trusted(cls, src: Tensor, dst: Tensor, num_src_nodes: int,
                 num_dst_nodes: int) -> BipartiteGraph:
        """Build without validation; for ids derived from an already valid graph."""
        graph = cls.__new__(cls)
        graph._set(src, dst, num_src_nodes, num_dst_nodes)
        return graph

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    @property
    def device(self) -> torch.device:
        return self.src.device

    def coo(self) -> tuple[Tensor, Tensor]:
        return self.src, self.dst

    def csr(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """(rowptr [num_dst+1], col [E] source ids, edge_ids [E]) by destination."""
        return _cached_compressed(self._cache, "csr", index_dtype, self.src, self.dst,
                                  self.num_src_nodes, self.num_dst_nodes)

    def csc(self, index_dtype: torch.dtype = torch.int64) -> tuple[Tensor, Tensor, Tensor]:
        """(colptr [num_src+1], row [E] destination ids, edge_ids [E]) by source."""
        return _cached_compressed(self._cache, "csc", index_dtype, self.src, self.dst,
                                  self.num_src_nodes, self.num_dst_nodes)

    __reduce__ = Graph.__reduce__
    pin_memory = Graph.pin_memory

    def __repr__(self) -> str:
        return (f"BipartiteGraph(num_src_nodes={self.num_src_nodes}, "
                f"num_dst_nodes={self.num_dst_nodes}, num_edges={self.num_edges})")
