"""Dense products (a @ b, float32 on CPU) on the GEMM library measured fastest here.

The layers' projections are GEMMs, and on PubMed they are most of a layer's time. Which
GEMM library is fastest depends on the machine: torch's own (MKL in the x86 wheels) or
oneDNN's inner product, which torch ships too (`torch.ops.mkldnn._linear_pointwise`).
On the 2-core AMD EPYC VM (AVX2, two threads; docs/kernels.md) oneDNN ran PubMed's input
projection [19717, 500] x [500, 64] in 8.74 ms against MKL's 10.71, while MKL computed
its weight gradient [500, 19717] x [19717, 64] in 11.3 ms against oneDNN's 48.6. So,
like the aggregation kernels (`_calibration`), each product *class* (dtype, threads,
operand layouts, and the three sizes rounded to a power of two) is timed once per machine, here on its first real operands, both libraries interleaved,
and the winner is kept in the machine's record (`_tuning_record`): every later process on
the machine reads it and computes the same bits. The two libraries agree to float32
rounding, not bit for bit, which is why the choice is recorded rather than re-timed per
process.

`GNNFORGE_GEMM=torch` (or `onednn`) fixes the library, and so does
`torch.use_deterministic_algorithms(True)` (torch's); products that oneDNN cannot run
(not float32, an empty dimension, strided operands, autocast, torch.compile tracing) and
small ones (`_MIN_WORK`) always run on torch's.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence

import torch
from torch import Tensor

from gnnforge.ops import _calibration, _tuning_record
from gnnforge.ops._add_bias import bias_gradient
from gnnforge.ops._buffers import pooled_empty, worth_pooling

__all__ = ["LIBRARIES", "dense_product", "dense_product_plus", "library_for"]

LIBRARIES = ("torch", "onednn")

# Multiply-adds below which torch's GEMM runs without a choice (a [2708, 1433] x [1433,
# 16] Cora projection is 62M): a lookup costs more than either library saves there.
_MIN_WORK = 2**22


def dense_product(a: Tensor, b: Tensor) -> Tensor:
    """a [M, K] @ b [K, N], differentiable (the gradients are dense products too)."""
    return _OnednnProduct.apply(a, b) if _on_onednn(a, b) else a @ b


def dense_product_plus(start: Tensor, a: Tensor, b: Tensor,
                       more: Sequence[tuple[Tensor, Tensor]] = ()) -> Tensor:
    """start + a @ b (`torch.addmm`) + the sum of `more`'s products, the first product on
    the chosen library; a large torch output goes into a reused buffer (`_PooledSum`)."""
    if _on_onednn(a, b):
        out = _OnednnProduct.apply(a, b).add_(start)
    elif _pooled_output(start, [(a, b), *more]):
        return _PooledSum.apply(start, a, b, *(x for pair in more for x in pair))
    else:
        out = torch.addmm(start, a, b)
    for left, right in more:
        out = out.addmm_(left, right)
    return out


def _pooled_output(start: Tensor, products: list[tuple[Tensor, Tensor]]) -> bool:
    """Whether the products are CPU float GEMMs whose output is worth a reused buffer."""
    a, b = products[0]
    return (all(x.dim() == 2 and x.device.type == "cpu" and x.dtype == a.dtype
                for pair in products for x in pair)
            and a.dtype in (torch.float32, torch.float64) and start.dtype == a.dtype
            and not torch.is_autocast_enabled("cpu")
            and worth_pooling(a.device, a.shape[0] * b.shape[1] * a.element_size()))


class _PooledSum(torch.autograd.Function):
    """start + a0 @ b0 + a1 @ b1 + ... (`addmm`, then `addmm_`) into a reused buffer.

    A fresh [58.5k, 256] output page-faulted about 21 ms on one thread, a third of its
    GEMM (layer 1 of the products-sized GraphSAGE step); the pool's buffer does not. The
    weight gradients are a_i^T @ grad: [100, 58.5k] x [58.5k, 256] took 28 ms there,
    where torch's addmm backward, (grad^T @ a_i)^T, took 37.

    A bias row (start [F_out] or [1, F_out]) is added after the products, in place:
    `addmm(bias, a, b, out=)` first copies the broadcast row into every output row, a
    strided copy slower than the add. Layer 1 there ([58.5k, 100] x [100, 256] twice,
    plus the bias; median of 15, buffers reused): 62.6 -> 56.8 ms on one thread, 31.8 ->
    29.4 on two. The sum is rounded in another order (bias last), within float32 rounding.
    """

    @staticmethod
    def forward(ctx, start: Tensor, *operands: Tensor) -> Tensor:
        ctx.save_for_backward(*operands)
        ctx.start_shape = start.shape
        a, b = operands[:2]
        out = pooled_empty((a.shape[0], b.shape[1]), a.dtype)
        broadcast = start.dim() < 2 or start.shape[0] < out.shape[0]
        if broadcast:  # a bias row: added last (see the class docstring)
            torch.mm(a, b, out=out)
        else:
            torch.addmm(start, a, b, out=out)
        for left, right in zip(operands[2::2], operands[3::2]):
            out.addmm_(left, right)
        return out.add_(start) if broadcast else out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        operands, needs = ctx.saved_tensors, ctx.needs_input_grad
        grads: list[Tensor | None] = [_start_grad(grad, ctx.start_shape) if needs[0] else None]
        for index in range(0, len(operands), 2):
            a, b = operands[index:index + 2]
            grads.append(dense_product(grad, b.t()) if needs[1 + index] else None)
            grads.append(dense_product(a.t(), grad) if needs[2 + index] else None)
        return tuple(grads)


def _start_grad(grad: Tensor, shape: torch.Size) -> Tensor:
    """grad summed to `shape`; a bias row's as a GEMV (`bias_gradient`), which reads grad
    at close to memory speed where torch's column sum does not ([58.5k, 256]: 1.4 -> 0.9
    ms on two threads, 3.6 -> 2.2 on one)."""
    columns = grad.shape[-1]
    row = tuple(shape) in ((columns,), (1, columns))
    if not row or grad.dim() != 2 or grad.shape[0] < 2 or not grad.is_contiguous():
        return grad.sum_to_size(shape)
    return bias_gradient(grad, columns).reshape(shape)


def _on_onednn(a: Tensor, b: Tensor) -> bool:
    return (_onednn_can_run(a, b) and a.shape[0] * a.shape[1] * b.shape[1] >= _MIN_WORK
            and library_for(a, b) == "onednn")


class _OnednnProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(a, b)
        return _compute("onednn", a, b)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        a, b = ctx.saved_tensors
        grad_a = dense_product(grad, b.t()) if ctx.needs_input_grad[0] else None
        grad_b = dense_product(a.t(), grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def library_for(a: Tensor, b: Tensor) -> str:
    """The library that computes a @ b: the setting, else the machine's recorded choice
    for the product's class, timed on these operands the first time."""
    forced = os.environ.get("GNNFORGE_GEMM", "auto")
    if forced == "auto" and torch.are_deterministic_algorithms_enabled():
        return "torch"      # as for the kernels' trials: nothing chosen by timing
    if forced != "auto":
        if forced not in LIBRARIES:
            raise ValueError(f"GNNFORGE_GEMM must be 'auto' or one of {LIBRARIES}, got "
                             f"{forced!r}")
        return forced
    key = product_class(a, b)
    found = _tuning_record.recorded_key(key)
    if found is not None:
        return found
    with _tuning_record.lock:
        _tuning_record.load()
        found = _tuning_record.recorded_key(key)
        if found is None:
            found = _measure(key, a, b)
    return found


def product_class(a: Tensor, b: Tensor) -> str:
    """The record key of a @ b: 'gemm.float32.t2.nt.m14.k9.n7' (threads, whether each
    operand is row-major (n) or a transposed row-major matrix (t), log2 of M, K and N)."""
    sizes = (a.shape[0], a.shape[1], b.shape[1])
    m, k, n = (round(math.log2(size)) for size in sizes)
    layouts = "".join("n" if x.is_contiguous() else "t" for x in (a, b))
    return f"gemm.{str(a.dtype).removeprefix('torch.')}.t{torch.get_num_threads()}." \
           f"{layouts}.m{m}.k{k}.n{n}"


def _measure(key: str, a: Tensor, b: Tensor) -> str:
    """Time both libraries on (a, b), record and return the winner (lock held). A torch
    whose oneDNN op rejects the call (another signature, a build without it) records
    torch's library, with the error."""
    with torch.no_grad():
        try:
            _compute("onednn", a, b)
        except RuntimeError as error:
            _tuning_record.remember_key(key, "torch", {"choice": "torch",
                                                       "onednn_error": str(error)[:200]})
            return "torch"
        times, descheduled = _calibration.time_candidates(
            {name: (lambda name=name: _compute(name, a, b)) for name in LIBRARIES})
    winner = min(times, key=lambda name: min(times[name]))
    _tuning_record.remember_key(key, winner, {
        "choice": winner,
        "min_ms": {name: round(1e3 * min(values), 4) for name, values in times.items()},
        "median_ms": {name: round(1e3 * statistics.median(values), 4)
                      for name, values in times.items()},
        "runs": len(times[winner]), "descheduled_runs": descheduled,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return winner


def _compute(library: str, a: Tensor, b: Tensor) -> Tensor:
    return _onednn_product(a, b) if library == "onednn" else torch.mm(a, b)


def _onednn_product(a: Tensor, b: Tensor) -> Tensor:
    """a @ b on oneDNN; a large output in blocks of rows, each copied into a reused buffer.

    oneDNN's op allocates its output, and glibc maps a large one afresh on every call: the
    products-sized step's [58.5k, 256] layer-1 output page-faulted each time, and on the
    2-core VMs (where first touches are slow: writing 18 GiB took 38 s of system time) some
    steps' calls took 80-105 ms instead of 14-25 at two threads. Blocks of `_block_rows`
    rows (2 MiB of output at one or two threads) come from glibc's heap, still in cache
    when copied into a pooled buffer (`pooled_empty`): on the
    AMD EPYC (Zen 5) host, [56-60k, 200] x [200, 256], median (mean) of 35 calls, 48.1
    (48.5) -> 28.0 (28.1) ms on one thread, 25.4 (26.0) -> 15.7 (15.9) on two; torch's
    product into a reused buffer took 59.7 and 30.8. There the blocks gave the whole call's
    bits (five shapes compared); the tests hold them to a float64 reference.
    """
    weight = b.t()  # the inner product computes input @ weight^T with weight [N, K]
    rows, columns = a.shape[0], b.shape[1]
    if not a.is_contiguous() or not worth_pooling(a.device, rows * columns * a.element_size()):
        return _inner_product(a, weight)
    out = pooled_empty((rows, columns), a.dtype)
    step = _block_rows(columns, a.element_size())
    for start in range(0, rows, step):
        out[start:start + step].copy_(_inner_product(a[start:start + step], weight))
    return out


def _block_rows(columns: int, itemsize: int) -> int:
    """Rows per block: 1 MiB of output per thread and at least 2 MiB (1, 2, 4 and 8 MiB
    blocks took 29.3, 28.0, 29.3 and 33.2 ms on one thread above, 17.0, 15.7, 15.9 and
    19.0 on two; more threads were not measured)."""
    block_bytes = max(2, torch.get_num_threads()) * 2**20
    return max(1, block_bytes // (columns * itemsize))


def _inner_product(a: Tensor, weight: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(a, weight, None, "none", [], "")


def _onednn_can_run(a: Tensor, b: Tensor) -> bool:
    return (_ONEDNN and a.dim() == 2 and b.dim() == 2 and a.dtype == torch.float32
            and b.dtype == torch.float32 and a.device.type == "cpu"
            and b.device.type == "cpu" and a.shape[1] == b.shape[0] and all(a.shape)
            and b.shape[1] > 0 and _row_major_or_transposed(a)
            and _row_major_or_transposed(b) and not torch.is_autocast_enabled("cpu")
            and not torch.compiler.is_compiling())


def _row_major_or_transposed(x: Tensor) -> bool:
    return x.is_contiguous() or x.t().is_contiguous()


_ONEDNN = (torch.backends.mkldnn.is_available()
           and hasattr(torch.ops.mkldnn, "_linear_pointwise"))
