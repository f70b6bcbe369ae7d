"""Message passing with per-edge-type weights: banded (dense batched matmuls) and sparse.

Both compute, for every node v, ``sum_p sum_{(u -> v) of type p} x_u W_p`` as
``(A_p X)`` aggregated per type, concatenated to [N, P*H] and multiplied once by the
stacked weights W = [W_0; ...; W_{P-1}] of shape [P*H, H_out] (aggregate, then transform).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnforge.banded._blocks import BandedBlocks
from gnnforge._static_shapes import bincount, static_shapes
from gnnforge.graph import Graph
from gnnforge.ops import copy_u_sum

__all__ = ["aggregate_by_type", "propagate", "sparse_propagate", "typed_in_degree"]


def _check_weight(weight: Tensor, num_types: int, width: int) -> None:
    if weight.dim() != 2 or weight.shape[0] != num_types * width:
        raise ValueError(f"weight must be [P*H, H_out] = [{num_types}*{width}, H_out], "
                         f"got shape {tuple(weight.shape)}")


def propagate(blocks: BandedBlocks, E: Tensor, W: Tensor) -> Tensor:  # noqa: N803 (paper names)
    """Banded propagation: three batched matmuls, a reshape and one weight matmul.

    ``M_k = C_k X_k + U_k X_{k+1} + L_{k-1} X_{k-1}``  (each [S*P, H]), then
    ``out = reshape(M, [K*S, P*H]) @ W``. Cost O(K S^2 P H + N P H H_out) instead of
    O(N^2 H) for a dense adjacency ("Fast Training of Sparse Graph Neural Networks on
    Dense Hardware", Algorithm 1). Differentiable in E and W.

    Args:
        blocks: compiled `BandedBlocks` (K blocks of S slots, P edge types).
        E: [K*S, H] (or [K, S, H]) node states in slot order.
        W: [P*H, H_out] per-type weights stacked by type.

    Returns:
        [K*S, H_out] messages summed per destination slot.

    Raises:
        ValueError: on shapes that do not match the blocks.
    """
    size, types, count = blocks.block_size, blocks.num_edge_types, blocks.num_blocks
    if E.numel() == 0 or E.shape[0] * (E.shape[1] if E.dim() == 3 else 1) != count * size:
        raise ValueError(f"propagate: E must be [K*S, H] = [{count * size}, H] for these blocks, "
                         f"got shape {tuple(E.shape)}")
    X = E.reshape(count, size, -1)  # [K, S, H]
    width = X.shape[-1]
    _check_weight(W, types, width)
    # Blocks built in float32 serve a bf16/fp16 model too: their entries are small edge
    # counts, exact in either (a whole-model cast would otherwise fail in bmm; autocast
    # casts both operands itself).
    C, U, L = (block if block.dtype == X.dtype or torch.is_autocast_enabled(X.device.type)
               else block.to(X.dtype) for block in (blocks.C, blocks.U, blocks.L))
    M = torch.bmm(C, X)  # [K, S*P, H]
    if count > 1:
        up = torch.bmm(U, X[1:])  # [K-1, S*P, H] into blocks 0..K-2
        low = torch.bmm(L, X[:-1])  # [K-1, S*P, H] into blocks 1..K-1
        M = M + F.pad(up, (0, 0, 0, 0, 0, 1)) + F.pad(low, (0, 0, 0, 0, 1, 0))
    return M.reshape(count * size, types * width) @ W  # [K*S, H_out]


def aggregate_by_type(graph: Graph, E: Tensor, num_edge_types: int) -> Tensor:  # noqa: N803
    """Sum of source states per (destination, edge type): [N, P*H], row v = [A_0 E | ... ]_v.

    One copy_u-sum g-SpMM over the relation-expanded view of the graph, where destination
    (v, type) is row v * P + type, so the [N * P, H] result is already [N, P * H] in memory
    and no [E, H] message tensor is built.
    """
    view = graph.by_relation(num_edge_types)  # cached on the graph across steps
    return copy_u_sum(view, E).view(graph.num_nodes, num_edge_types * E.shape[1])  # [N, P*H]


def typed_in_degree(graph: Graph, num_edge_types: int,
                    dtype: torch.dtype = torch.float32) -> Tensor:
    """[N, P] number of in-edges of each type per node."""
    etype = graph.edge_type if graph.edge_type is not None else torch.zeros_like(graph.src)
    counts = bincount(graph.dst * num_edge_types + etype, graph.num_nodes * num_edge_types)
    return counts.to(dtype).view(graph.num_nodes, num_edge_types)


def sparse_propagate(graph: Graph, E: Tensor, W: Tensor,  # noqa: N803 (paper names)
                     num_edge_types: int | None = None) -> Tensor:
    """Sparse reference of `propagate` over all edges of `graph`: [N, H_out].

    Args:
        graph: the graph (``edge_type`` < P; untyped means type 0).
        E: [N, H] node states.
        W: [P*H, H_out] per-type weights stacked by type.
        num_edge_types: P; default ``W.shape[0] // E.shape[1]``.

    Raises:
        ValueError: on mismatched shapes or edge types >= P.
    """
    if E.dim() != 2 or E.shape[0] != graph.num_nodes:
        raise ValueError(f"sparse_propagate: E must be [N={graph.num_nodes}, H], "
                         f"got shape {tuple(E.shape)}")
    types = W.shape[0] // max(E.shape[1], 1) if num_edge_types is None else num_edge_types
    _check_weight(W, types, E.shape[1])
    # With static shapes (XLA, torch.compile) the host is not read: types are checked on
    # the CPU side, before the batch moves.
    if (graph.edge_type is not None and graph.num_edges and not static_shapes(graph.edge_type)
            and int(graph.edge_type.max()) >= types):
        raise ValueError(f"sparse_propagate: edge_type goes up to {int(graph.edge_type.max())} "
                         f"but the weights cover {types} types")
    return aggregate_by_type(graph, E, types) @ W
