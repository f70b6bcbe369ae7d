"""DGL's named shortcuts, each a one-line call of `gspmm` or `gsddmm`.

Names read `<lhs>_<op>_<rhs>[_<reduce>]`: `u` source-node data, `v` destination-node data,
`e` edge data; with a reduce the result is per destination node (g-SpMM), without it is
per edge (g-SDDMM). Shapes and broadcasting as in `gspmm` / `gsddmm`.
"""

from __future__ import annotations

from torch import Tensor

from gnnforge.ops._fast_copy import copy_u_fast
from gnnforge.ops._generic import gsddmm, gspmm

__all__ = [
    "copy_e_max", "copy_e_mean", "copy_e_min", "copy_e_sum",
    "copy_u", "copy_u_max", "copy_u_mean", "copy_u_min", "copy_u_sum", "copy_v",
    "e_add_v", "e_div_v", "e_dot_v", "e_mul_v", "e_sub_v",
    "u_add_e_max", "u_add_e_sum", "u_add_v", "u_div_e_sum", "u_div_v",
    "u_dot_e", "u_dot_v", "u_mul_e", "u_mul_e_max", "u_mul_e_mean", "u_mul_e_min",
    "u_mul_e_sum", "u_mul_v", "u_sub_e_sum", "u_sub_v",
]


# ----------------------------------------------------------------------------- g-SpMM

def copy_u_sum(graph, x: Tensor) -> Tensor:
    """out[v] = sum of x[u] over in-edges (u, v). x [num_src, *F] -> [num_dst, *F]."""
    out = copy_u_fast(graph, "sum", x)
    return gspmm(graph, "copy_lhs", "sum", x, None) if out is None else out


def copy_u_mean(graph, x: Tensor) -> Tensor:
    """out[v] = mean of x[u] over in-edges (0 without in-edges)."""
    out = copy_u_fast(graph, "mean", x)
    return gspmm(graph, "copy_lhs", "mean", x, None) if out is None else out


def copy_u_max(graph, x: Tensor) -> Tensor:
    """out[v] = elementwise max of x[u] over in-edges (0 without in-edges)."""
    return gspmm(graph, "copy_lhs", "max", x, None)


def copy_u_min(graph, x: Tensor) -> Tensor:
    """out[v] = elementwise min of x[u] over in-edges (0 without in-edges)."""
    return gspmm(graph, "copy_lhs", "min", x, None)


def copy_e_sum(graph, e: Tensor) -> Tensor:
    """out[v] = sum of e over in-edges of v. e [E, *F] -> [num_dst, *F]."""
    return gspmm(graph, "copy_rhs", "sum", None, e)


def copy_e_mean(graph, e: Tensor) -> Tensor:
    """out[v] = mean of e over in-edges of v."""
    return gspmm(graph, "copy_rhs", "mean", None, e)


def copy_e_max(graph, e: Tensor) -> Tensor:
    """out[v] = elementwise max of e over in-edges of v."""
    return gspmm(graph, "copy_rhs", "max", None, e)


def copy_e_min(graph, e: Tensor) -> Tensor:
    """out[v] = elementwise min of e over in-edges of v."""
    return gspmm(graph, "copy_rhs", "min", None, e)


def u_mul_e_sum(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = sum of x[u] * e[edge] over in-edges: weighted aggregation (GCN, GAT)."""
    return gspmm(graph, "mul", "sum", x, e)


def u_mul_e_mean(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = mean of x[u] * e[edge] over in-edges."""
    return gspmm(graph, "mul", "mean", x, e)


def u_mul_e_max(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = max of x[u] * e[edge] over in-edges."""
    return gspmm(graph, "mul", "max", x, e)


def u_mul_e_min(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = min of x[u] * e[edge] over in-edges."""
    return gspmm(graph, "mul", "min", x, e)


def u_add_e_sum(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = sum of x[u] + e[edge] over in-edges."""
    return gspmm(graph, "add", "sum", x, e)


def u_add_e_max(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = max of x[u] + e[edge] over in-edges."""
    return gspmm(graph, "add", "max", x, e)


def u_sub_e_sum(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = sum of x[u] - e[edge] over in-edges."""
    return gspmm(graph, "sub", "sum", x, e)


def u_div_e_sum(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[v] = sum of x[u] / e[edge] over in-edges."""
    return gspmm(graph, "div", "sum", x, e)


# ----------------------------------------------------------------------------- g-SDDMM

def copy_u(graph, x: Tensor) -> Tensor:
    """out[e] = x[src(e)]: [num_src, *F] -> [E, *F]."""
    return gsddmm(graph, "copy_lhs", x, None, "u", "v")


def copy_v(graph, x: Tensor) -> Tensor:
    """out[e] = x[dst(e)]: [num_dst, *F] -> [E, *F]."""
    return gsddmm(graph, "copy_lhs", x, None, "v", "u")


def u_dot_v(graph, x: Tensor, y: Tensor) -> Tensor:
    """out[e] = <x[u], y[v]> over the last dim, kept as size 1: attention scores."""
    return gsddmm(graph, "dot", x, y, "u", "v")


def u_add_v(graph, x: Tensor, y: Tensor) -> Tensor:
    """out[e] = x[u] + y[v] (GAT's additive attention logits)."""
    return gsddmm(graph, "add", x, y, "u", "v")


def u_sub_v(graph, x: Tensor, y: Tensor) -> Tensor:
    """out[e] = x[u] - y[v]."""
    return gsddmm(graph, "sub", x, y, "u", "v")


def u_mul_v(graph, x: Tensor, y: Tensor) -> Tensor:
    """out[e] = x[u] * y[v]."""
    return gsddmm(graph, "mul", x, y, "u", "v")


def u_div_v(graph, x: Tensor, y: Tensor) -> Tensor:
    """out[e] = x[u] / y[v]."""
    return gsddmm(graph, "div", x, y, "u", "v")


def u_dot_e(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[e] = <x[u], e[edge]>."""
    return gsddmm(graph, "dot", x, e, "u", "e")


def u_mul_e(graph, x: Tensor, e: Tensor) -> Tensor:
    """out[e] = x[u] * e[edge] (per-edge messages)."""
    return gsddmm(graph, "mul", x, e, "u", "e")


def e_add_v(graph, e: Tensor, y: Tensor) -> Tensor:
    """out[e] = e[edge] + y[v]."""
    return gsddmm(graph, "add", e, y, "e", "v")


def e_sub_v(graph, e: Tensor, y: Tensor) -> Tensor:
    """out[e] = e[edge] - y[v]."""
    return gsddmm(graph, "sub", e, y, "e", "v")


def e_mul_v(graph, e: Tensor, y: Tensor) -> Tensor:
    """out[e] = e[edge] * y[v]."""
    return gsddmm(graph, "mul", e, y, "e", "v")


def e_div_v(graph, e: Tensor, y: Tensor) -> Tensor:
    """out[e] = e[edge] / y[v] (normalising by a per-destination sum)."""
    return gsddmm(graph, "div", e, y, "e", "v")


def e_dot_v(graph, e: Tensor, y: Tensor) -> Tensor:
    """out[e] = <e[edge], y[v]>."""
    return gsddmm(graph, "dot", e, y, "e", "v")
