// Gradients of the binary max/min g-SpMM (u_add_e_max, u_mul_e_min, ...), pull-based, no
// atomics. The forward recorded, per output element (v, k), the winning edge arg[v, k]
// (and its source node); an element's gradient g[v, k] belongs to that one edge:
//
//   edge gradient:   out[e, k] = g[v, k] * other[u, k]   if arg[v, k] == e, else 0,
//                    one pull over CSR by destination (entry j: e = eids[j], u = col[j]);
//   source gradient: out[u, k] = sum over out-edges e = (u, v) with arg[v, k] == e of
//                    g[v, k] * other[e, k], one pull over the CSC (entry j: v = row[j],
//                    e = ceids[j]).
//
// `other` is the second operand of mul (read at a per-feature broadcast offset), or null
// for add (factor 1). Comparing with the edge id, not the source, counts a multi-edge
// u -> v once. Winners are in the index type (int64 whenever the indices are).

#include <cstdint>
#include <cstring>

#include "simd.h"

namespace {

using namespace gf;

template <class T, class I, bool kOther, bool kAccumulate>
inline void pick(const I* arg, const T* grad, int64_t edge, const T* other,
                 const int64_t* offset, T* out, int64_t width) {
  const I e = static_cast<I>(edge);
  for (int64_t k = 0; k < width; ++k) {
    const T factor = kOther ? other[offset[k]] : T(1);
    const T value = arg[k] == e ? grad[k] * factor : T(0);
    out[k] = kAccumulate ? out[k] + value : value;
  }
}

template <class T, class I, bool kOther>
void edge_grad(const I* rowptr, const I* col, const I* eids, const I* arg, const T* grad,
               const T* other, int64_t other_stride, const int64_t* offset, T* out,
               int64_t rows, int64_t width, int threads) {
  parallel_rows(rowptr, rows, threads, [&](int64_t first, int64_t last) {
    for (int64_t v = first; v < last; ++v) {
      for (int64_t j = rowptr[v]; j < rowptr[v + 1]; ++j) {
        const int64_t e = eids[j];
        pick<T, I, kOther, false>(arg + v * width, grad + v * width, e,
                                  kOther ? other + static_cast<int64_t>(col[j]) * other_stride
                                         : nullptr,
                                  offset, out + e * width, width);
      }
    }
  });
}

template <class T, class I, bool kOther>
void source_grad(const I* colptr, const I* row, const I* ceids, const I* arg, const T* grad,
                 const T* other, int64_t other_stride, const int64_t* offset, T* out,
                 int64_t rows, int64_t width, int threads) {
  parallel_rows(colptr, rows, threads, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      T* out_row = out + u * width;
      std::memset(out_row, 0, width * sizeof(T));
      for (int64_t j = colptr[u]; j < colptr[u + 1]; ++j) {
        const int64_t v = row[j], e = ceids[j];
        pick<T, I, kOther, true>(arg + v * width, grad + v * width, e,
                                 kOther ? other + e * other_stride : nullptr, offset, out_row,
                                 width);
      }
    }
  });
}

template <class T, class I>
void extreme_binary_grad(int source, const void* ptr, const void* index, const void* eids,
                         const void* arg, const void* grad, const void* other,
                         int64_t other_stride, const int64_t* offset, void* out, int64_t rows,
                         int64_t width, int threads) {
#define GF_ARGS(kOther) static_cast<const I*>(ptr), static_cast<const I*>(index), \
    static_cast<const I*>(eids), static_cast<const I*>(arg), static_cast<const T*>(grad), \
    static_cast<const T*>(other), other_stride, offset, static_cast<T*>(out), rows, width, \
    threads
  if (source && other) source_grad<T, I, true>(GF_ARGS(true));
  else if (source) source_grad<T, I, false>(GF_ARGS(false));
  else if (other) edge_grad<T, I, true>(GF_ARGS(true));
  else edge_grad<T, I, false>(GF_ARGS(false));
#undef GF_ARGS
}

}  // namespace

extern "C" {

// source = 0: the edge gradient [E, width] over CSR (ptr = rowptr, index = col, eids);
// source = 1: the source-node gradient [rows, width] over the CSC (ptr = colptr,
// index = row, eids = ceids). arg: [num_dst, width] winning edge ids; grad: [num_dst,
// width]; other: rows of the other mul operand (source rows for the edge gradient, edge
// rows for the source gradient) read at other[row * other_stride + offset[k]], or null.
void gf_extreme_binary_grad(int dtype, int index64, int source, const void* ptr,
                            const void* index, const void* eids, const void* arg,
                            const void* grad, const void* other, int64_t other_stride,
                            const void* offset, void* out, int64_t rows, int64_t width,
                            int threads) {
#define GF_ARGS source, ptr, index, eids, arg, grad, other, other_stride, \
    static_cast<const int64_t*>(offset), out, rows, width, threads
  if (dtype == 0 && !index64) extreme_binary_grad<float, int32_t>(GF_ARGS);
  else if (dtype == 0) extreme_binary_grad<float, int64_t>(GF_ARGS);
  else if (!index64) extreme_binary_grad<double, int32_t>(GF_ARGS);
  else extreme_binary_grad<double, int64_t>(GF_ARGS);
#undef GF_ARGS
}

}  // extern "C"
