// Gradients of the binary max/min g-SpMM (u_add_e_max, u_mul_e_min, ...), without atomics.
// The forward recorded, per output element (v, k), the winning source node arg_u[v, k] and
// edge arg_e[v, k] (-1 for rows without in-edges); the element's gradient g[v, k] flows
// to that one pair only:
//
//   edge gradient:   out[arg_e[v, k], k] = g[v, k] * other[arg_u[v, k], k], every other
//                    element 0. Threads own destination rows, and so the disjoint sets of
//                    edges that end there: each zeroes its edges' rows, then writes its
//                    winners.
//   source gradient: out[arg_u[v, k], k] += g[v, k] * other[arg_e[v, k], k]. Threads own
//                    ranges of whole cache lines of columns (as copy_u max's gradient in
//                    spmm.cpp) and read arg and g once, M x K, instead of once per edge.
//
// `other` is the second operand of mul (read at a per-feature broadcast offset), or null
// for add (factor 1). Winners are in the index type (int64 whenever the indices are).

#include <cstdint>
#include <cstring>
#include <algorithm>

#include "simd.h"

namespace {

using namespace gf;

template <class T, class I, bool kOther>
inline T factor(const T* other, int64_t stride, const int64_t* offset, I row, int64_t k) {
  return kOther ? other[static_cast<int64_t>(row) * stride + offset[k]] : T(1);
}

template <class T, class I, bool kOther>
void edge_grad(const I* rowptr, const I* eids, const I* arg_u, const I* arg_e, const T* grad,
               const T* other, int64_t stride, const int64_t* offset, T* out, int64_t rows,
               int64_t width, int threads) {
  parallel_rows(rowptr, rows, threads, [&](int64_t first, int64_t last) {
    for (int64_t v = first; v < last; ++v) {
      for (int64_t j = rowptr[v]; j < rowptr[v + 1]; ++j)
        std::memset(out + static_cast<int64_t>(eids[j]) * width, 0, width * sizeof(T));
      const I* au = arg_u + v * width;
      const I* ae = arg_e + v * width;
      const T* g = grad + v * width;
      for (int64_t k = 0; k < width; ++k) {
        if (ae[k] < 0) continue;
        out[static_cast<int64_t>(ae[k]) * width + k] =
            g[k] * factor<T, I, kOther>(other, stride, offset, au[k], k);
      }
    }
  });
}

template <class T, class I, bool kOther>
void source_grad(const I* arg_u, const I* arg_e, const T* grad, const T* other, int64_t stride,
                 const int64_t* offset, T* out, int64_t num_dst, int64_t num_src,
                 int64_t width, int threads) {
  constexpr int64_t line = 64 / sizeof(T);
  const int64_t lines = (width + line - 1) / line;
  const int blocks = static_cast<int>(std::min<int64_t>(std::max(threads, 1), lines));
#pragma omp parallel for schedule(static) num_threads(blocks) if (blocks > 1)
  for (int block = 0; block < blocks; ++block) {
    const int64_t f0 = std::min(width, lines * block / blocks * line);
    const int64_t f1 = std::min(width, lines * (block + 1) / blocks * line);
    for (int64_t u = 0; u < num_src; ++u)
      std::memset(out + u * width + f0, 0, (f1 - f0) * sizeof(T));
    for (int64_t v = 0; v < num_dst; ++v) {
      const I* au = arg_u + v * width;
      const I* ae = arg_e + v * width;
      const T* g = grad + v * width;
      for (int64_t k = f0; k < f1; ++k) {
        if (au[k] < 0) continue;
        out[static_cast<int64_t>(au[k]) * width + k] +=
            g[k] * factor<T, I, kOther>(other, stride, offset, ae[k], k);
      }
    }
  }
}

template <class T, class I>
void extreme_binary_grad(int source, const void* rowptr, const void* eids, const void* arg_u,
                         const void* arg_e, const void* grad, const void* other,
                         int64_t stride, const int64_t* offset, void* out, int64_t num_dst,
                         int64_t num_src, int64_t width, int threads) {
  const I* au = static_cast<const I*>(arg_u);
  const I* ae = static_cast<const I*>(arg_e);
  const T* g = static_cast<const T*>(grad);
  const T* o = static_cast<const T*>(other);
  T* result = static_cast<T*>(out);
  const I* ptr = static_cast<const I*>(rowptr);
  const I* ids = static_cast<const I*>(eids);
  if (source && o) source_grad<T, I, true>(au, ae, g, o, stride, offset, result, num_dst, num_src, width, threads);
  else if (source) source_grad<T, I, false>(au, ae, g, o, stride, offset, result, num_dst, num_src, width, threads);
  else if (o) edge_grad<T, I, true>(ptr, ids, au, ae, g, o, stride, offset, result, num_dst, width, threads);
  else edge_grad<T, I, false>(ptr, ids, au, ae, g, o, stride, offset, result, num_dst, width, threads);
}

}  // namespace

extern "C" {

// source = 1: the source-node gradient [num_src, width] (rowptr, eids unused); source = 0:
// the edge gradient [E, width] (rowptr, eids: the forward CSR, num_dst rows). arg_u /
// arg_e: [num_dst, width] winners; grad: [num_dst, width]; other: rows of mul's other
// operand (edge rows for the source gradient, source rows for the edge gradient), read at
// other[row * stride + offset[k]], or null for add.
void gf_extreme_binary_grad(int dtype, int index64, int source, const void* rowptr,
                            const void* eids, const void* arg_u, const void* arg_e,
                            const void* grad, const void* other, int64_t stride,
                            const void* offset, void* out, int64_t num_dst, int64_t num_src,
                            int64_t width, int threads) {
#define GF_ARGS source, rowptr, eids, arg_u, arg_e, grad, other, stride, \
    static_cast<const int64_t*>(offset), out, num_dst, num_src, width, threads
  if (dtype == 0 && !index64) extreme_binary_grad<float, int32_t>(GF_ARGS);
  else if (dtype == 0) extreme_binary_grad<float, int64_t>(GF_ARGS);
  else if (!index64) extreme_binary_grad<double, int32_t>(GF_ARGS);
  else extreme_binary_grad<double, int64_t>(GF_ARGS);
#undef GF_ARGS
}

}  // extern "C"
