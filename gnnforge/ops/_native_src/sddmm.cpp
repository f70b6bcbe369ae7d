// Native g-SDDMM: one message per edge, out[e] = op(a[ia[e]], b[ib[e]]) with op add or mul
// over a broadcast [H, D] row (message.h), or out[e, h] = dot(a[ia[e]] head h, b[ib[e]]
// head h) for op dot (u_dot_v, GAT's per-head scores and the edge gradient of u_mul_e with
// a per-head weight). ia / ib are the rows each edge reads: the source or destination of
// the edge (COO), or null for the edge itself. Edges are independent, so threads take
// contiguous ranges of them and write their output rows in order. An output of kStreamBytes
// or more (the [E, F] edge gradient of u_mul_e, u_add_v on a large graph) is written with
// non-temporal stores: nothing reads it back soon, and skipping the read-for-ownership
// halves its memory traffic (measured in docs/kernels.md).

#include <cstdint>
#include <algorithm>

#include "message.h"
#include "simd.h"

namespace {

using namespace gf;

template <class I>
inline int64_t row_of(const I* index, int64_t e) {
  return index ? static_cast<int64_t>(index[e]) : e;
}

// Runs body(first_edge, last_edge) over `threads` contiguous ranges.
template <class Body>
void parallel_edges(int64_t edges, int threads, Body body) {
  if (threads <= 1 || edges < 2) {
    body(int64_t(0), edges);
    return;
  }
  const int64_t chunks = std::min<int64_t>(edges, 4 * threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t chunk = 0; chunk < chunks; ++chunk)
    body(edges * chunk / chunks, edges * (chunk + 1) / chunks);
}

template <class T, class I>
inline void prefetch_edge(const I* ia, const I* ib, const Operand<T>& a, const Operand<T>& b,
                          int64_t e, int64_t last) {
  if (e + kPrefetchDistance >= last) return;
  prefetch_row(a.row(row_of(ia, e + kPrefetchDistance)), a.stride * int64_t(sizeof(T)));
  prefetch_row(b.row(row_of(ib, e + kPrefetchDistance)), b.stride * int64_t(sizeof(T)));
}

// out[e, h, d] = op(a[ia[e], h*a.hs + d], b[ib[e], h*b.hs + (BV ? d : 0)]).
// With kStream every vector store is non-temporal (the caller checked that D is a whole
// number of vectors and `out` is vector-aligned, so every store is aligned).
template <class T, class I, int Op, bool BV, bool kStream>
void sddmm_binary_rows(const I* ia, const I* ib, const Operand<T>& a, const Operand<T>& b,
                       T* out, int64_t first, int64_t last, int64_t H, int64_t D) {
  typedef typename Vec<T, kWideBytes>::type V;
  constexpr int L = Vec<T, kWideBytes>::size;
  for (int64_t e = first; e < last; ++e) {
    prefetch_edge(ia, ib, a, b, e, last);
    const T* ra = a.row(row_of(ia, e));
    const T* rb = b.row(row_of(ib, e));
    T* o = out + e * H * D;
    for (int64_t h = 0; h < H; ++h, o += D) {
      const T* pa = ra + h * a.hs;
      const T* pb = rb + h * b.hs;
      int64_t d = 0;
      for (; d + L <= D; d += L) {
        const V vb = BV ? load<T, kWideBytes>(pb + d) : splat<T, kWideBytes>(pb[0]);
        const V message = apply<Op>(load<T, kWideBytes>(pa + d), vb);
        if (kStream) stream(o + d, message); else store<T, kWideBytes>(o + d, message);
      }
      for (; d < D; ++d) o[d] = apply<Op>(pa[d], pb[BV ? d : 0]);
    }
  }
  if (kStream) stream_fence();
}

template <class T, class I, int Op, bool BV>
void sddmm_binary(const I* ia, const I* ib, Operand<T> a, Operand<T> b, T* out,
                  int64_t edges, int64_t H, int64_t D, int threads) {
  constexpr int L = Vec<T, kWideBytes>::size;
  const bool streaming = edges * H * D * static_cast<int64_t>(sizeof(T)) >= kStreamBytes &&
                         D % L == 0 && reinterpret_cast<uintptr_t>(out) % kWideBytes == 0;
  parallel_edges(edges, threads, [&](int64_t first, int64_t last) {
    if (streaming)
      sddmm_binary_rows<T, I, Op, BV, true>(ia, ib, a, b, out, first, last, H, D);
    else
      sddmm_binary_rows<T, I, Op, BV, false>(ia, ib, a, b, out, first, last, H, D);
  });
}

// out[e, h] = sum over d < D of a[ia[e], h*a.hs + d] * b[ib[e], h*b.hs + d].
template <class T, class I>
void sddmm_dot(const I* ia, const I* ib, Operand<T> a, Operand<T> b, T* out, int64_t edges,
               int64_t H, int64_t D, int threads) {
  typedef typename Vec<T>::type V;
  constexpr int L = Vec<T>::size;
  parallel_edges(edges, threads, [&](int64_t first, int64_t last) {
    for (int64_t e = first; e < last; ++e) {
      prefetch_edge(ia, ib, a, b, e, last);
      const T* ra = a.row(row_of(ia, e));
      const T* rb = b.row(row_of(ib, e));
      for (int64_t h = 0; h < H; ++h) {
        const T* pa = ra + h * a.hs;
        const T* pb = rb + h * b.hs;
        int64_t d = 0;
        T total = T(0);
        if (D >= L) {
          V acc = load<T>(pa) * load<T>(pb);
          for (d = L; d + L <= D; d += L) acc += load<T>(pa + d) * load<T>(pb + d);
          for (int i = 0; i < L; ++i) total += acc[i];
        }
        for (; d < D; ++d) total += pa[d] * pb[d];
        out[e * H + h] = total;
      }
    }
  });
}

template <class T, class I>
void sddmm_typed(int op, int b_vector, const void* ia, const void* ib, const void* a,
                 int64_t a_stride, int64_t a_hs, const void* b, int64_t b_stride, int64_t b_hs,
                 void* out, int64_t edges, int64_t H, int64_t D, int threads) {
  const Operand<T> oa{static_cast<const T*>(a), a_stride, a_hs};
  const Operand<T> ob{static_cast<const T*>(b), b_stride, b_hs};
  const I* xa = static_cast<const I*>(ia);
  const I* xb = static_cast<const I*>(ib);
  T* o = static_cast<T*>(out);
  if (op == kDot) sddmm_dot<T, I>(xa, xb, oa, ob, o, edges, H, D, threads);
  else if (op == kAdd && b_vector) sddmm_binary<T, I, kAdd, true>(xa, xb, oa, ob, o, edges, H, D, threads);
  else if (op == kAdd) sddmm_binary<T, I, kAdd, false>(xa, xb, oa, ob, o, edges, H, D, threads);
  else if (b_vector) sddmm_binary<T, I, kMul, true>(xa, xb, oa, ob, o, edges, H, D, threads);
  else sddmm_binary<T, I, kMul, false>(xa, xb, oa, ob, o, edges, H, D, threads);
}

}  // namespace

extern "C" {

// op: 0 add, 1 mul ([edges, H, D] out), 2 dot ([edges, H] out, D the dot length; b_vector
// ignored). ia / ib: [edges] rows of a / b in the index type, or null for row e itself.
void gf_sddmm(int dtype, int index64, int op, int b_vector, const void* ia, const void* ib,
              const void* a, int64_t a_stride, int64_t a_hs, const void* b, int64_t b_stride,
              int64_t b_hs, void* out, int64_t edges, int64_t H, int64_t D, int threads) {
#define GF_ARGS op, b_vector, ia, ib, a, a_stride, a_hs, b, b_stride, b_hs, out, edges, H, D, \
    threads
  if (dtype == 0 && !index64) sddmm_typed<float, int32_t>(GF_ARGS);
  else if (dtype == 0) sddmm_typed<float, int64_t>(GF_ARGS);
  else if (!index64) sddmm_typed<double, int32_t>(GF_ARGS);
  else sddmm_typed<double, int64_t>(GF_ARGS);
#undef GF_ARGS
}

}  // extern "C"
