// A binary message op(a, b) between two broadcast operand rows, shared by the binary
// g-SpMM (binary.cpp) and g-SDDMM (sddmm.cpp) kernels.
//
// The Python side (`_native_binary.py`) collapses DGL's broadcasting into an output row of
// H x D elements (heads x features, row-major) in which each operand is either a vector
// along D (element (h, d) at row[h * hs + d]) or one scalar per head (row[h * hs], the
// same for every d). `hs` is 0 for an operand broadcast across heads. Operand `a` is
// always a vector along D; `b` is a vector (kVector) or a scalar per head. sub and div never
// reach here: the public layer rewrites them as add and mul (`_generic._rewrite`), and
// mul and add commute, so a scalar-by-vector message swaps its operands.

#pragma once

#include <cstdint>

namespace gf {

template <class T>
struct Operand {
  const T* data;
  int64_t stride;  // elements per row
  int64_t hs;      // elements between heads (0: broadcast across heads)

  const T* row(int64_t r) const { return data + r * stride; }
};

enum MessageOp { kAdd = 0, kMul = 1, kDot = 2 };

template <int Op, class V>
inline V apply(V a, V b) {
  return Op == kAdd ? a + b : a * b;
}

}  // namespace gf
