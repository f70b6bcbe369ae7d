// GINE's message and sum in one pull: out[v] = scale * x[v] + sum over in-edges e = (u, v)
// of relu(x[u] + table[code[e]]), and its backward, with no [E, F] tensor:
//
//   grad_x[u] = scale * g[u] (u a destination) + sum over out-edges e = (u, v) of
//               [x[u] + table[code[e]] > 0] * g[v]                 (a pull over the CSC)
//   grad_table[code[e]] += [x[u] + table[code[e]] > 0] * g[v]     (per edge)
//
// Edge features come as rows of a table indexed per edge: code = null means row e itself
// ([E, F] edge features; the table gradient is then one write per edge, a pull over CSR),
// otherwise a small table (a molecule's bond embedding): each thread sums into its own
// copy of the table gradient and the copies are added at the end.

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <vector>

#include "simd.h"

namespace {

using namespace gf;

template <class I>
inline int64_t table_row(const int64_t* code, I edge) {
  return code ? code[edge] : static_cast<int64_t>(edge);
}

// out[v] = scale * x[v] + sum of relu(x[col[j]] + table[row(eids[j])]) over row v.
template <class T, class I>
void gine_forward(const I* rowptr, const I* col, const I* eids, const int64_t* code,
                  const T* x, const T* table, T scale, T* out, int64_t rows, int64_t width,
                  int threads) {
  typedef typename Vec<T, kWideBytes>::type V;
  constexpr int L = Vec<T, kWideBytes>::size;
  constexpr int kBlock = 8;
  const V zero = splat<T, kWideBytes>(T(0));
  parallel_rows(rowptr, rows, threads, [&](int64_t first, int64_t last) {
    for (int64_t v = first; v < last; ++v) {
      T* o = out + v * width;
      int64_t c0 = 0;
      for (; c0 + L <= width; c0 += kBlock * L) {
        const int n = static_cast<int>(std::min<int64_t>(kBlock, (width - c0) / L));
        V acc[kBlock];
        for (int k = 0; k < n; ++k)
          acc[k] = load<T, kWideBytes>(x + v * width + c0 + k * L) * scale;
        for (int64_t j = rowptr[v]; j < rowptr[v + 1]; ++j) {
          const T* xu = x + static_cast<int64_t>(col[j]) * width + c0;
          const T* te = table + table_row(code, eids[j]) * width + c0;
          for (int k = 0; k < n; ++k) {
            const V m = load<T, kWideBytes>(xu + k * L) + load<T, kWideBytes>(te + k * L);
            acc[k] += m > zero ? m : zero;
          }
        }
        for (int k = 0; k < n; ++k) store<T, kWideBytes>(o + c0 + k * L, acc[k]);
      }
      c0 = width / L * L;
      for (int64_t c = c0; c < width; ++c) {
        T total = scale * x[v * width + c];
        for (int64_t j = rowptr[v]; j < rowptr[v + 1]; ++j) {
          const T m = x[static_cast<int64_t>(col[j]) * width + c] +
                      table[table_row(code, eids[j]) * width + c];
          total += m > T(0) ? m : T(0);
        }
        o[c] = total;
      }
    }
  });
}

// grad_x[u] = scale * g[u] (u < num_dst) + sum over CSC entries of [message > 0] * g[v].
template <class T, class I>
void gine_grad_x(const I* colptr, const I* row, const I* ceids, const int64_t* code,
                 const T* x, const T* table, T scale, const T* grad, T* out, int64_t num_src,
                 int64_t num_dst, int64_t width, int threads) {
  parallel_rows(colptr, num_src, threads, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      T* o = out + u * width;
      const T* xu = x + u * width;
      for (int64_t c = 0; c < width; ++c) o[c] = u < num_dst ? scale * grad[u * width + c] : T(0);
      for (int64_t j = colptr[u]; j < colptr[u + 1]; ++j) {
        const T* g = grad + static_cast<int64_t>(row[j]) * width;
        const T* te = table + table_row(code, ceids[j]) * width;
        for (int64_t c = 0; c < width; ++c) o[c] += xu[c] + te[c] > T(0) ? g[c] : T(0);
      }
    }
  });
}

// [message > 0] * g[v] for every entry of CSR row v, handed to sink(edge, values...).
template <class T, class I, class Sink>
inline void masked_rows(const I* rowptr, const I* col, const I* eids, const int64_t* code,
                        const T* x, const T* table, const T* grad, int64_t first, int64_t last,
                        int64_t width, Sink sink) {
  for (int64_t v = first; v < last; ++v) {
    const T* g = grad + v * width;
    for (int64_t j = rowptr[v]; j < rowptr[v + 1]; ++j) {
      const T* xu = x + static_cast<int64_t>(col[j]) * width;
      const int64_t t = table_row(code, eids[j]);
      sink(t, xu, table + t * width, g);
    }
  }
}

// grad_table: one write per edge (code null) or per-thread sums of a small table.
template <class T, class I>
void gine_grad_table(const I* rowptr, const I* col, const I* eids, const int64_t* code,
                     const T* x, const T* table, const T* grad, T* out, int64_t rows,
                     int64_t table_rows, int64_t width, int threads) {
  if (!code) {
    parallel_rows(rowptr, rows, threads, [&](int64_t first, int64_t last) {
      masked_rows(rowptr, col, eids, code, x, table, grad, first, last, width,
                  [&](int64_t t, const T* xu, const T* te, const T* g) {
                    T* o = out + t * width;
                    for (int64_t c = 0; c < width; ++c) o[c] = xu[c] + te[c] > T(0) ? g[c] : T(0);
                  });
    });
    return;
  }
  const int64_t size = table_rows * width;
  std::vector<T> partial(static_cast<size_t>(std::max(threads, 1)) * size, T(0));
  const int64_t chunks = std::max(threads, 1);
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (threads > 1)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    T* mine = partial.data() + chunk * size;
    masked_rows(rowptr, col, eids, code, x, table, grad, chunk_start(rowptr, rows, chunk, chunks),
                chunk_start(rowptr, rows, chunk + 1, chunks), width,
                [&](int64_t t, const T* xu, const T* te, const T* g) {
                  T* o = mine + t * width;
                  for (int64_t c = 0; c < width; ++c) o[c] += xu[c] + te[c] > T(0) ? g[c] : T(0);
                });
  }
  std::memcpy(out, partial.data(), size * sizeof(T));
  for (int64_t chunk = 1; chunk < chunks; ++chunk)
    for (int64_t i = 0; i < size; ++i) out[i] += partial[chunk * size + i];
}

}  // namespace

extern "C" {

// out: [rows, width]; code: [E] int64 table row per edge, or null (table is [E, width]).
void gf_gine_forward(int dtype, int index64, const void* rowptr, const void* col,
                     const void* eids, const void* code, const void* x, const void* table,
                     double scale, void* out, int64_t rows, int64_t width, int threads) {
#define GF_ARGS(T, I) static_cast<const I*>(rowptr), static_cast<const I*>(col), \
    static_cast<const I*>(eids), static_cast<const int64_t*>(code), static_cast<const T*>(x), \
    static_cast<const T*>(table), static_cast<T>(scale), static_cast<T*>(out), rows, width, \
    threads
  if (dtype == 0 && !index64) gine_forward<float, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) gine_forward<float, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) gine_forward<double, int32_t>(GF_ARGS(double, int32_t));
  else gine_forward<double, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// grad_x: [num_src, width] over the CSC (colptr, row, ceids); grad_table: [table_rows,
// width] over the CSR (rowptr, col, eids) of the same graph; grad: [num_dst, width].
void gf_gine_backward(int dtype, int index64, const void* rowptr, const void* col,
                      const void* eids, const void* colptr, const void* row, const void* ceids,
                      const void* code, const void* x, const void* table, double scale,
                      const void* grad, void* grad_x, void* grad_table, int64_t num_src,
                      int64_t num_dst, int64_t table_rows, int64_t width, int threads) {
#define GF_RUN(T, I) \
  gine_grad_x<T, I>(static_cast<const I*>(colptr), static_cast<const I*>(row), \
                    static_cast<const I*>(ceids), static_cast<const int64_t*>(code), \
                    static_cast<const T*>(x), static_cast<const T*>(table), static_cast<T>(scale), \
                    static_cast<const T*>(grad), static_cast<T*>(grad_x), num_src, num_dst, \
                    width, threads); \
  gine_grad_table<T, I>(static_cast<const I*>(rowptr), static_cast<const I*>(col), \
                        static_cast<const I*>(eids), static_cast<const int64_t*>(code), \
                        static_cast<const T*>(x), static_cast<const T*>(table), \
                        static_cast<const T*>(grad), static_cast<T*>(grad_table), num_dst, \
                        table_rows, width, threads)
  if (dtype == 0 && !index64) { GF_RUN(float, int32_t); }
  else if (dtype == 0) { GF_RUN(float, int64_t); }
  else if (!index64) { GF_RUN(double, int32_t); }
  else { GF_RUN(double, int64_t); }
#undef GF_RUN
}

}  // extern "C"
