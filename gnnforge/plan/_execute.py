"""Run a composition: evaluate its tree on a graph, each shared sub-tree once.

Values are laid out node-major, `[rows, heads, cols]` (the layout of DGL's per-head
features), so every sparse step is one `gnnforge.ops` call with DGL broadcasting:
edge weights `[E, H, 1]` against features `[N, H or 1, C]`. Weight leaves arrive as
`[heads, K, C]`. Everything is differentiable through the ops' registered backwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnforge import ops
from gnnforge.ops._degree import in_degree as node_in_degree
from gnnforge.ops._degree import out_degree as node_out_degree
from gnnforge.plan._fused_sums import sum_terms
from gnnforge.plan._ir import Node, is_block_diagonal, is_sparse, subtrees
from gnnforge.plan._primitives import (Composition, is_dynamic_propagation,
                                       is_fused_relation_sum)
from gnnforge.plan._shared_products import shared_input_groups, source_of, worth_sharing

__all__ = ["Structure", "evaluate", "gcn_structure"]


@dataclass(frozen=True)
class Structure:
    """A graph prepared for a layer: the kernel-protocol object and GCN's D^-1/2 factors.

    Prepared once per graph and shared by every layer that runs on it
    (`gnnforge.nn._graph_structure.prepared_structure`), so what is derived from the graph alone
    (self-loops, degrees, GCN's edge normalisation, the planner's graph features) is
    computed once per graph, not once per layer and epoch: PyG's `cached=True`, made
    safe by keying on the graph object.

    Attributes:
        graph: any object with num_src_nodes/num_dst_nodes/coo/csr/csc.
        inv_sqrt_src: [Ns] float, d_u^-1/2 of each source (0 where d_u = 0), or None
            (with inv_sqrt_dst None: Â is the plain adjacency A, PyG's normalize=False).
        inv_sqrt_dst: [Nd] float, d_v^-1/2 of each destination, or None.
        edge_weight: [E] float weights of A's entries in edge-id order (None: all 1); the
            degrees above are then weighted degrees (PyG's gcn_norm with edge_weight).
        memo: values derived from the graph on first use ("edge_norm", "features"); for
            RGCN, "relational": the `RelationalGraph` (edge types and their views).
    """

    graph: Any
    inv_sqrt_src: Tensor | None = None
    inv_sqrt_dst: Tensor | None = None
    edge_weight: Tensor | None = None
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def edge_norm(self) -> Tensor:
        """[E, 1] GCN's edge weights d_u^-1/2 a_e d_v^-1/2 (an SDDMM), computed once.

        Without edge weights these are constants of the graph (degrees carry no gradient),
        so one tensor serves every layer, forward and backward, for as long as the
        structure is cached. A weighted structure is built per call and keeps autograd, so
        gradients reach the weights through a_e and the degrees.
        """
        if "edge_norm" not in self.memo:
            if self.edge_weight is None:
                with torch.inference_mode(False), torch.no_grad():  # usable by any later call
                    self.memo["edge_norm"] = ops.gsddmm(self.graph, "mul", self.inv_sqrt_src,
                                                        self.inv_sqrt_dst, "u", "v")
            else:
                norm = ops.gsddmm(self.graph, "mul", self.inv_sqrt_src, self.inv_sqrt_dst,
                                  "u", "v")
                self.memo["edge_norm"] = norm * self.edge_weight.reshape(norm.shape)
        return self.memo["edge_norm"]


def _inv_sqrt(degree: Tensor, dtype: torch.dtype) -> Tensor:
    out = degree.to(dtype).pow(-0.5)
    return out.masked_fill(torch.isinf(out), 0.0)


def gcn_structure(graph: Any, dtype: torch.dtype, symmetric: bool,
                  edge_weight: Tensor | None = None) -> Structure:
    """GCN's degree factors: in-degree on both sides for a square graph (PyG's gcn_norm);
    out-degree of sources and in-degree of destinations for a bipartite block. With
    `edge_weight` ([E], edge-id order) the degrees are sums of weights, and gradients
    flow to the weights through them."""
    src, dst = graph.coo()
    if edge_weight is None:
        in_degree = node_in_degree(graph)
        out_degree = in_degree if symmetric else node_out_degree(graph)
        return Structure(graph, _inv_sqrt(out_degree, dtype), _inv_sqrt(in_degree, dtype))
    weight = edge_weight.to(dtype)
    in_degree = weight.new_zeros(graph.num_dst_nodes).index_add(0, dst, weight)
    out_degree = (in_degree if symmetric
                  else weight.new_zeros(graph.num_src_nodes).index_add(0, src, weight))
    return Structure(graph, _inv_sqrt(out_degree, dtype), _inv_sqrt(in_degree, dtype), weight)


def _rows(tensor: Tensor) -> Tensor:
    return tensor.reshape(-1, 1, 1)


def _flat_rows(tensor: Tensor) -> Tensor:
    """[rows, 1, cols] as [rows, cols]."""
    return tensor.reshape(tensor.shape[0], tensor.shape[-1])


class _Evaluator:
    def __init__(self, composition: Composition, structure: Structure,
                 leaves: dict[str, Tensor], attention_dropout: float = 0.0) -> None:
        self.norm = composition.norm
        self.attention_dropout = attention_dropout
        self.structure = structure
        self.graph = structure.graph
        self.leaves = leaves
        self.tree = composition.tree
        self.memo: dict[Node, Tensor] = {}
        self.unscaled: dict[Node, Tensor] = {}  # dynamic Â: A (D^-1/2 M) before the left factor
        self.rows_are_all = self.graph.num_dst_nodes == self.graph.num_src_nodes
        self.shared = _shared_groups(composition.tree, self.rows_are_all)

    def value(self, node: Node) -> Tensor:
        if node not in self.memo:
            self.memo[node] = getattr(self, "_" + node.op)(node)
        return self.memo[node]

    def _leaf(self, node: Node) -> Tensor:
        kind, name = node.attr("kind"), node.attr("name")
        if kind == "ones":
            return torch.ones(self.graph.num_src_nodes, 1, 1, dtype=self.leaves["X"].dtype,
                              device=self.leaves["X"].device)
        if kind == "dense":
            return self.leaves[name].unsqueeze(1)                          # [N, 1, F]
        return self.leaves[name]                                          # [H, K, C]

    def _dst_rows(self, node: Node) -> Tensor:
        return ops.leading_rows(self.value(node.inputs[0]), self.graph.num_dst_nodes)

    def _add(self, node: Node) -> Tensor:
        fused = self._fused_sum(node)
        if fused is not None:
            return fused
        values = [self.value(t) for t in node.inputs]
        out = values[0]
        for v in values[1:]:
            out = out + v
        return out

    def _affine(self, node: Node) -> Tensor:
        fused = self._fused_sum(node)
        if fused is not None:
            return fused
        return self.value(node.inputs[0]) + self.value(node.inputs[1]).transpose(0, 1)

    def _fused_sum(self, node: Node) -> Tensor | None:
        """A one-head sum of projections, biases and other terms accumulated into one
        GEMM output (`_fused_sums`); None where it does not apply."""
        terms = sum_terms(node, self.tree)
        if terms is None:
            return None
        products = [p for p in terms.products if p not in self.memo and not self._shares(p)]
        if not products:
            return None
        factors = [(self.value(p.inputs[0]), self.value(p.inputs[1])[0]) for p in products]
        if torch.is_autocast_enabled(factors[0][0].device.type):
            return None
        others = [self.value(t) for t in terms.others + tuple(
            p for p in terms.products if p not in products)]
        biases = [self.value(b).reshape(1, -1) for b in terms.biases]
        if len({t.dtype for t in others + biases + [f for pair in factors for f in pair]}) > 1:
            return None
        rows = factors[0][0].shape[0]
        flat = [_flat_rows(f) for f, _ in factors]
        start = sum(biases[1:], biases[0]) if biases else (
            _flat_rows(others.pop(0)) if others else None)
        more = [(left, weight) for left, (_, weight) in zip(flat[1:], factors[1:])]
        if start is None:
            out = ops.dense_product(flat[0], factors[0][1])
            for left, weight in more:
                out.addmm_(left, weight)
        else:
            out = ops.dense_product_plus(start, flat[0], factors[0][1], more)
        for other in others:
            out.add_(_flat_rows(other))
        return out.reshape(rows, 1, out.shape[-1])

    def _scale(self, node: Node) -> Tensor:
        return ops.scale_rows(self.value(node.inputs[0]), self.value(node.inputs[1]))

    def _affine_rows(self, node: Node) -> Tensor:
        m, rows, bias = (self.value(i) for i in node.inputs)
        return m + rows * bias.transpose(0, 1)

    # Per-edge inputs of attention (PyG's edge_dim), leaves in edge-id order: "edge_logits"
    # [E, H, 1] joins GAT's logits, "edge_features" [E, H, D] GATv2's pair sums, before
    # the LeakyReLU. Attention dropout acts on the normalised coefficients, as in PyG.
    def _attention(self, node: Node) -> Tensor:
        score_src, score_dst = (self.value(i) for i in node.inputs[1:])  # [Ns|Nd, H, 1]
        logits = ops.gsddmm(self.graph, "add", score_src, score_dst, "u", "v")  # [E, H, 1]
        if "edge_logits" in self.leaves:
            logits = logits + self.leaves["edge_logits"]
        logits = F.leaky_relu(logits, node.attr("negative_slope"))
        return self._dropout(ops.edge_softmax(self.graph, logits))

    def _attention_v2(self, node: Node) -> Tensor:
        h_src, h_dst, att = (self.value(i) for i in node.inputs[1:])
        pair = ops.gsddmm(self.graph, "add", h_src, h_dst, "u", "v")           # [E, H, D]
        if "edge_features" in self.leaves:
            pair = pair + self.leaves["edge_features"]
        pair = F.leaky_relu(pair, node.attr("negative_slope"))
        logits = (pair * att[:, :, 0]).sum(dim=-1, keepdim=True)                # [E, H, 1]
        return self._dropout(ops.edge_softmax(self.graph, logits))

    def _dropout(self, alpha: Tensor) -> Tensor:
        # [E, H, 1] has PyG's [E, H] element order, so one seed draws the same mask.
        return F.dropout(alpha, self.attention_dropout) if self.attention_dropout else alpha

    # RGCN: relations are heads; A_r is never built (`_relational.RelationalGraph`).
    def _relations(self):
        return self.structure.memo["relational"]

    def _hsum(self, node: Node) -> Tensor:
        if is_fused_relation_sum(node):  # sum_r A_r Y_r: one SpMM over (source, r) slots
            relations = self._relations()
            y = self.value(node.inputs[0].inputs[1])                          # [Ns, R, F]
            flat = y.reshape(-1, 1, y.shape[-1])                              # [Ns R, 1, F]
            if relations.mean:
                weight = relations.edge_norm(y.dtype).reshape(-1, 1, 1)
                return ops.u_mul_e_sum(relations.slots_to_nodes(), flat, weight)
            return ops.copy_u_sum(relations.slots_to_nodes(), flat)
        return self.value(node.inputs[0]).sum(dim=1, keepdim=True)

    def _mix(self, node: Node) -> Tensor:
        coeff, mixed = (self.value(i) for i in node.inputs)                  # [1, R, B], [B, K, C]
        return torch.einsum("rb,bkc->rkc", coeff[0], mixed)

    def _mix_t(self, node: Node) -> Tensor:
        coeff = self.value(node.inputs[0])[0]                                 # [R, B]
        if is_sparse(node.inputs[1]):  # basis adjacencies: edge weights C[r_e, b] [E, B, 1]
            relations = self._relations()
            norm = relations.edge_norm(coeff.dtype).unsqueeze(1)
            return (coeff[relations.edge_type] * norm).unsqueeze(-1)
        return torch.einsum("nrf,rb->nbf", self.value(node.inputs[1]), coeff)

    def _relational_matmul(self, left: Node, right: Node) -> Tensor:
        y = self.value(right)                                                 # [Ns, 1|R|B, F]
        if left.op == "mix_t":
            return ops.u_mul_e_sum(self.graph, y, self.value(left))            # [Nd, B, F]
        relations = self._relations()
        view = relations.to_slots() if y.shape[1] == 1 else relations.slots_to_slots()
        flat = y.reshape(-1, 1, y.shape[-1])
        out = (ops.copy_u_mean if relations.mean else ops.copy_u_sum)(view, flat)
        return out.reshape(self.graph.num_dst_nodes, relations.num_relations, y.shape[-1])

    def _matmul(self, node: Node) -> Tensor:
        left, right = node.inputs
        if left.kind in ("reladj", "relmeanadj"):
            return self._relational_matmul(left, right)
        if is_block_diagonal(right):
            return _block_matmul(self.value(left), self.value(right))
        if left.kind == "normadj":
            return self._normadj_matmul(node)
        if left.kind == "adjacency":
            return self._aggregate(ops.copy_u_sum, right)
        if left.kind == "meanadj":
            return self._aggregate(ops.copy_u_mean, right)
        if left.kind in ("attention", "attention_v2"):
            return ops.u_mul_e_sum(self.graph, self.value(right), self.value(left))
        if node in self.shared:
            return self._shared_matmul(node)
        return _dense_matmul(self.value(left), self.value(right), left.kind == "weight")

    def _aggregate(self, reduce: Callable[[Any, Tensor], Tensor], right: Node) -> Tensor:
        """reduce(graph, right); where the tree also reads right's destination rows (not
        yet computed), both at once, with one gradient for right (`ops.with_leading_rows`)."""
        value = self.value(right)
        rows = _dst_rows_of(self.tree).get(right)
        if rows is None or rows in self.memo:
            return reduce(self.graph, value)
        aggregated, self.memo[rows] = ops.with_leading_rows(
            partial(reduce, self.graph), value, self.graph.num_dst_nodes)
        return aggregated

    def _shared_matmul(self, node: Node) -> Tensor:
        """Every projection of node's input at once (`_shared_products`): one GEMM against
        the weights side by side, each member's value a column slice of it."""
        if not self._shares(node):
            return _dense_matmul(self.value(node.inputs[0]), self.value(node.inputs[1]), False)
        members = self.shared[node]
        weights = [self.value(member.inputs[1]) for member in members]    # [1, I, O_k]
        source = self.value(source_of(node, self.rows_are_all))           # [N, 1, I]
        product = _dense_matmul(source, torch.cat(weights, dim=-1), False)
        for member, part in zip(members, product.split([w.shape[-1] for w in weights], -1)):
            self.memo[member] = part
        return self.memo[node]

    def _shares(self, node: Node) -> bool:
        """Whether `node` is computed in one GEMM with the other projections of its input."""
        if node not in self.shared:
            return False
        weights = [self.value(member.inputs[1]) for member in self.shared[node]]
        return worth_sharing(self.value(source_of(node, self.rows_are_all)).shape[-1],
                             [w.shape[-1] for w in weights],
                             torch.is_grad_enabled() and any(w.requires_grad for w in weights))

    # Â M for the two realisations of D^-1/2 A D^-1/2 (A weighted when edge_weight is set;
    # without degree factors Â is A itself and both realisations are one SpMM). The row
    # scalings and their gradients take reused buffers (`ops.scale_rows`: no page faults).
    def _normadj_matmul(self, node: Node) -> Tensor:
        if self.structure.inv_sqrt_dst is None:
            return self._spmm(self.value(node.inputs[1]), self.structure.edge_weight)
        if self.norm == "precompute":
            return ops.u_mul_e_sum(self.graph, self.value(node.inputs[1]),
                                   self.structure.edge_norm())
        return ops.scale_rows(self._unscaled(node), _rows(self.structure.inv_sqrt_dst))

    def _spmm(self, value: Tensor, weight: Tensor | None) -> Tensor:
        if weight is None:
            return ops.copy_u_sum(self.graph, value)
        return ops.u_mul_e_sum(self.graph, value, weight.reshape(-1, 1, 1))

    def _unscaled(self, node: Node) -> Tensor:
        """A (D^-1/2 M): dynamic Â before its left factor, which a consumer may fuse."""
        if node not in self.unscaled:
            right = node.inputs[1]
            if is_dynamic_propagation(right, self.norm):
                # D^-1/2 D^-1/2 between two hops: one row scaling by the product.
                scale = self.structure.inv_sqrt_dst * self.structure.inv_sqrt_src
                scaled = ops.scale_rows(self._unscaled(right), _rows(scale))
            else:
                scaled = ops.scale_rows(self.value(right), _rows(self.structure.inv_sqrt_src))
            self.unscaled[node] = self._spmm(scaled, self.structure.edge_weight)
        return self.unscaled[node]


@lru_cache(maxsize=256)
def _dst_rows_of(tree: Node) -> dict[Node, Node]:
    """For each node whose destination rows the tree reads, that dst_rows node."""
    return {node.inputs[0]: node for node in subtrees(tree) if node.op == "dst_rows"}


@lru_cache(maxsize=256)
def _shared_groups(tree: Node, rows_are_all: bool) -> dict[Node, tuple[Node, ...]]:
    return shared_input_groups(tree, rows_are_all)


def _dense_matmul(left: Tensor, right: Tensor, left_is_weight: bool) -> Tensor:
    if left_is_weight:
        return torch.matmul(left, right)                                  # [H, K, C]
    rows, heads, inner = left.shape
    right_heads, _, cols = right.shape
    if heads == 1:  # one GEMM against the heads laid side by side
        flat = right.permute(1, 0, 2).reshape(inner, right_heads * cols)
        return ops.dense_product(left.reshape(rows, inner), flat).reshape(rows, right_heads, cols)
    if right_heads == 1:
        return left @ right[0]
    return torch.einsum("nhk,hkc->nhc", left, right)                      # H GEMMs


def _block_matmul(left: Tensor, blocks: Tensor) -> Tensor:
    """left [N, 1 or R, I] times block-diagonal weights [R, nb, I / nb, O / nb]: each
    block of I / nb inputs makes its O / nb outputs (PyG's RGCNConv block layout)."""
    rows, heads, _ = left.shape
    relations, count, block_in, block_out = blocks.shape
    parts = left.reshape(rows, heads, count, block_in)
    if heads == 1:
        out = torch.einsum("nbk,rbkc->nrbc", parts[:, 0], blocks)
    else:
        out = torch.einsum("nrbk,rbkc->nrbc", parts, blocks)
    return out.reshape(rows, relations, count * block_out)                # [N, R, O]


def evaluate(composition: Composition, structure: Structure,
             leaves: dict[str, Tensor], attention_dropout: float = 0.0) -> Tensor:
    """Value of `composition` on `structure`, `[rows, heads, cols]`.

    Args:
        composition: the plan to run.
        structure: the prepared graph (`gcn_structure` when the tree uses Â).
        leaves: tensors by leaf name: dense `X` `[Ns, I]`, weights `[heads, K, C]`, and
            optional per-edge attention inputs `edge_logits` / `edge_features`.
        attention_dropout: dropout probability on attention coefficients (0: none).
    """
    evaluator = _Evaluator(composition, structure, leaves, attention_dropout)
    return evaluator.value(composition.tree)
