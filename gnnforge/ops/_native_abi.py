"""The C ABI of the native kernel library: its version and every exported function's prototype.

One table, so that loading can check that a library exports every symbol the Python side
calls (a library missing one is rebuilt, never half-used) and so that each source file in
`_native_src/` adds its functions here in one place. Argument codes: dtype 0 = float32,
1 = float64; index64 0 = int32 indices, 1 = int64.
"""

from __future__ import annotations

import ctypes

__all__ = ["ABI_VERSION", "PROTOTYPES"]

# Bumped with every change of a prototype below; must equal gf_abi_version() in spmm.cpp.
ABI_VERSION = 5

_P, _I64, _I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int

# name -> (argtypes, restype)
PROTOTYPES: dict[str, tuple[list, object]] = {
    "gf_abi_version": ([], _I32),
    # dtype, index64, ptr, index, x, out, arg (or NULL), rows, width, reduce, threads
    "gf_spmm_copy": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I32, _I32], None),
    # dtype, index64, colptr, row, rowptr, grad, out, num_src, num_dst, width, threads
    "gf_mean_grad": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I32], None),
    # dtype, index64, colptr, row, arg, grad, out, num_src, num_dst, width, threads
    "gf_extreme_grad": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I64, _I32], None),
    "gf_advise_huge": ([_P, _I64], None),
    # binary.cpp: dtype, index64, op, reduce, b_vector, ptr, ia, ib, a, a_stride, a_hs,
    # b, b_stride, b_hs, out, arg_a (or NULL), arg_b (or NULL), rows, H, D, threads
    "gf_spmm_binary": ([_I32, _I32, _I32, _I32, _I32, _P, _P, _P, _P, _I64, _I64, _P, _I64,
                        _I64, _P, _P, _P, _I64, _I64, _I64, _I32], None),
    # sddmm.cpp: dtype, index64, op, b_vector, ia, ib, a, a_stride, a_hs, b, b_stride, b_hs,
    # out, edges, H, D, threads
    "gf_sddmm": ([_I32, _I32, _I32, _I32, _P, _P, _P, _I64, _I64, _P, _I64, _I64, _P, _I64,
                  _I64, _I64, _I32], None),
    # binary_grad.cpp: dtype, index64, source, rowptr, eids, arg_u, arg_e, grad, other (or
    # NULL), stride, offset, out, num_dst, num_src, width, threads
    "gf_extreme_binary_grad": ([_I32, _I32, _I32, _P, _P, _P, _P, _P, _P, _I64, _P, _P, _I64,
                                _I64, _I64, _I32], None),
    # gine.cpp: dtype, index64, rowptr, col, eids, code (or NULL), x, table, scale, out,
    # rows, width, threads
    "gf_gine_forward": ([_I32, _I32, _P, _P, _P, _P, _P, _P, ctypes.c_double, _P, _I64,
                         _I64, _I32], None),
    # dtype, index64, rowptr, col, eids, colptr, row, ceids, code (or NULL), x, table, scale,
    # grad, grad_x, grad_table, num_src, num_dst, table_rows, width, threads
    "gf_gine_backward": ([_I32, _I32, _P, _P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_double, _P,
                          _P, _P, _I64, _I64, _I64, _I64, _I32], None),
    # softmax.cpp: dtype, index64, ptr, eids, logits, out, rows, K, threads
    "gf_edge_softmax": ([_I32, _I32, _P, _P, _P, _P, _I64, _I64, _I32], None),
    # dtype, index64, ptr, eids, attention, grad, out, rows, K, threads
    "gf_edge_softmax_backward": ([_I32, _I32, _P, _P, _P, _P, _P, _I64, _I64, _I32], None),
}
