"""Aggregation kernels: g-SpMM and g-SDDMM with DGL's vocabulary, autograd and fast backends.

`gspmm` reduces per-edge messages onto destination nodes, `gsddmm` computes one value
per edge; the shortcuts (`copy_u_sum`, `u_mul_e_sum`, `u_dot_v`, ...) name common cases
and `edge_softmax` normalises attention logits. `use_backend` forces a backend;
`empty_cache` releases the reused output buffers of the native kernels. On CPU the
default backend, `auto`, runs per kernel class the candidate measured fastest on this
machine (`tune` measures them up front; `kernel_choices`, `measured_classes` and
`machine_fingerprint` say what was chosen and where; where candidates were close,
the first call on a graph times them on it, `kernel_trials` lists those decisions).
`dropout` is torch's with a mask hashed from a seed and the element's index (one
vectorised pass on CPU); `relu_dropout` fuses a ReLU in front of it. `dense_product`
runs the layers' GEMMs on the library (torch's or oneDNN) measured fastest for each
product class on this machine; `leading_rows` is x[:rows] with its gradient in a reused
buffer (a block's destination rows), `scale_rows` x * factor with its output and gradient
in reused buffers (GCN's degree scaling), `add_bias` x + bias into a reused buffer,
`with_leading_rows` an aggregation beside x[:rows] with one gradient for x. See
docs/kernels.md.
"""

from gnnforge.ops._add_bias import add_bias
from gnnforge.ops._auto_kernels import tune
from gnnforge.ops._buffers import buffer_pool_statistics, empty_cache
from gnnforge.ops._dense_product import dense_product, dense_product_plus
from gnnforge.ops._dispatch import BACKENDS, use_backend
from gnnforge.ops._dropout import dropout, relu_dropout
from gnnforge.ops._edge_softmax import edge_softmax
from gnnforge.ops._gather_rows import gather_rows
from gnnforge.ops._generic import gsddmm, gspmm
from gnnforge.ops._leading_rows import leading_rows, with_leading_rows
from gnnforge.ops._scale_rows import scale_rows
from gnnforge.ops._shortcuts import (
    copy_e_max,
    copy_e_mean,
    copy_e_min,
    copy_e_sum,
    copy_u,
    copy_u_max,
    copy_u_mean,
    copy_u_min,
    copy_u_sum,
    copy_v,
    e_add_v,
    e_div_v,
    e_dot_v,
    e_mul_v,
    e_sub_v,
    u_add_e_max,
    u_add_e_sum,
    u_add_v,
    u_div_e_sum,
    u_div_v,
    u_dot_e,
    u_dot_v,
    u_mul_e,
    u_mul_e_max,
    u_mul_e_mean,
    u_mul_e_min,
    u_mul_e_sum,
    u_mul_v,
    u_sub_e_sum,
    u_sub_v,
)
from gnnforge.ops._trials import trial_results as kernel_trials
from gnnforge.ops._trials import trials_run as kernel_trials_run
from gnnforge.ops._tuning_record import kernel_choices, machine_fingerprint, measured_classes
from gnnforge.ops._tuning_record import record_path as tuning_record_path

__all__ = [
    "BACKENDS",
    "add_bias",
    "buffer_pool_statistics",
    "copy_e_max",
    "copy_e_mean",
    "copy_e_min",
    "copy_e_sum",
    "copy_u",
    "copy_u_max",
    "copy_u_mean",
    "copy_u_min",
    "copy_u_sum",
    "copy_v",
    "dense_product",
    "dense_product_plus",
    "dropout",
    "e_add_v",
    "e_div_v",
    "e_dot_v",
    "e_mul_v",
    "e_sub_v",
    "edge_softmax",
    "empty_cache",
    "gather_rows",
    "gsddmm",
    "gspmm",
    "kernel_choices",
    "kernel_trials",
    "kernel_trials_run",
    "leading_rows",
    "machine_fingerprint",
    "measured_classes",
    "relu_dropout",
    "scale_rows",
    "u_add_e_max",
    "u_add_e_sum",
    "u_add_v",
    "u_div_e_sum",
    "u_div_v",
    "u_dot_e",
    "u_dot_v",
    "u_mul_e",
    "u_mul_e_max",
    "u_mul_e_mean",
    "u_mul_e_min",
    "u_mul_e_sum",
    "u_mul_v",
    "u_sub_e_sum",
    "tune",
    "tuning_record_path",
    "u_sub_v",
    "use_backend",
    "with_leading_rows",
]
