// Native binary-reduce g-SpMM: out[v] = reduce over the entries j of row v of a compressed
// layout of op(a[ia[j]], b[ib[j]]), op add or mul, reduce sum, mean, max or min, with the
// operands broadcast over an [H, D] output row (message.h). For u_op_e over CSR by
// destination, ia = col (source node) and ib = eids (edge id); the backward of u_mul_e
// w.r.t. the source rows is the same kernel over the CSC (a pull, no atomics).
//
// A row is processed in blocks of up to 8 SIMD vectors that stay in registers for the
// whole in-edge loop, as spmm.cpp does; every vector of a block lies within one head (the
// per-head path takes the heads one by one when D is not a whole number of vectors), so
// its operand offsets are fixed for the row and computed once per call. max/min keep,
// per lane, the position in the row of the winning entry (strict comparison: ties keep
// the first entry, like the reference and numba) and write both winners, ia[j] and ib[j],
// in the index type: int64 whenever the indices are, so they never overflow.

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <vector>

#include "message.h"
#include "simd.h"

namespace {

using namespace gf;

// The kernels are instantiated for sum and max only, to keep the library's compile time
// down: mean is sum with a scale of 1/degree, and min is max of the negated messages
// (negation is exact and turns the strict < into a strict >, so ties are kept the same).
enum Reduce { kSum = 0, kMean = 1, kMax = 2, kMin = 3 };

// Register vectors per block: 8 accumulators for sum; max also holds 8 position vectors,
// which fit 32 zmm registers but not 16 ymm, so 4 there. Blocks are 8, 4 or 1 vectors.
constexpr int max_block(int reduce, int bytes) {
  return reduce == kSum || bytes == 64 ? 8 : 4;
}

// Where vector k of a (sub)row of `width` columns reads a and b: offset tables built once
// per call. Column c = k * L lies in head c / D at feature c % D.
struct Offsets {
  std::vector<int64_t> a, b;
  Offsets(int64_t width, int64_t lanes, int64_t D, int64_t a_hs, int64_t b_hs, bool b_vector) {
    for (int64_t c = 0; c + lanes <= width; c += lanes) {
      const int64_t h = c / D, d = c % D;
      a.push_back(h * a_hs + d);
      b.push_back(h * b_hs + (b_vector ? d : 0));
    }
  }
};

// Columns [k0 * L, (k0 + NV) * L) of one output row over entries [begin, end) (not empty).
template <class T, class I, int Op, int R, bool BV, int NV, int B>
inline __attribute__((always_inline)) void binary_block(
    const I* ia, const I* ib, int64_t begin, int64_t end, const Operand<T>& a,
    const Operand<T>& b, const int64_t* oa, const int64_t* ob, T* out, I* arg_a, I* arg_b,
    T scale, int64_t limit) {
  // sum: out = scale * sum of messages; max: out = scale * max of (scale * message), with
  // scale -1 for min.
  typedef typename Vec<T, B>::type V;
  typedef typename Vec<T, B>::itype IV;
  typedef typename Vec<T, B>::lane_index Lane;
  constexpr int L = Vec<T, B>::size;
  const int64_t a_bytes = a.stride * static_cast<int64_t>(sizeof(T));
  const int64_t b_bytes = b.stride * static_cast<int64_t>(sizeof(T));
  V acc[NV];
  IV who[NV];
  for (int64_t j = begin; j < end; ++j) {
    if (j + kPrefetchDistance < limit) {
      prefetch_row(a.row(ia[j + kPrefetchDistance]), a_bytes);
      prefetch_row(b.row(ib[j + kPrefetchDistance]), b_bytes);
    }
    const T* ra = a.row(ia[j]);
    const T* rb = b.row(ib[j]);
    for (int k = 0; k < NV; ++k) {
      const V vb = BV ? load<T, B>(rb + ob[k]) : splat<T, B>(rb[ob[k]]);
      const V product = apply<Op>(load<T, B>(ra + oa[k]), vb);
      const V m = R == kSum ? product : product * scale;
      if (R == kSum) {
        acc[k] = j == begin ? m : acc[k] + m;
      } else if (j == begin) {
        acc[k] = m;
        who[k] = fill<IV, Lane>(0);
      } else {
        const IV wins = m > acc[k];
        acc[k] = wins ? m : acc[k];
        who[k] = wins ? fill<IV, Lane>(static_cast<Lane>(j - begin)) : who[k];
      }
    }
  }
  for (int k = 0; k < NV; ++k) {
    store<T, B>(out + k * L, acc[k] * splat<T, B>(scale));
    if (R == kMax && arg_a) {
      for (int i = 0; i < L; ++i) {
        const int64_t j = begin + who[k][i];
        arg_a[k * L + i] = ia[j];
        arg_b[k * L + i] = ib[j];
      }
    }
  }
}

// Scalar columns [c0, width) of a (sub)row whose columns are features of one head.
template <class T, class I, int Op, int R, bool BV>
void binary_tail(const I* ia, const I* ib, int64_t begin, int64_t end, const Operand<T>& a,
                 const Operand<T>& b, int64_t c0, int64_t width, T* out, I* arg_a, I* arg_b,
                 T scale) {
  for (int64_t c = c0; c < width; ++c) {
    int64_t at = begin;
    const T first = apply<Op>(a.row(ia[begin])[c], b.row(ib[begin])[BV ? c : 0]);
    T best = R == kSum ? first : first * scale;
    for (int64_t j = begin + 1; j < end; ++j) {
      const T product = apply<Op>(a.row(ia[j])[c], b.row(ib[j])[BV ? c : 0]);
      const T m = R == kSum ? product : product * scale;
      if (R == kSum) {
        best += m;
      } else if (m > best) {
        best = m;
        at = j;
      }
    }
    out[c] = best * scale;
    if (R == kMax && arg_a) {
      arg_a[c] = ia[at];
      arg_b[c] = ib[at];
    }
  }
}

// One output (sub)row of `width` columns in blocks of 8, 4, 2, 1 vectors and a scalar tail.
template <class T, class I, int Op, int R, bool BV, int B>
void binary_row(const I* ia, const I* ib, int64_t begin, int64_t end, const Operand<T>& a,
                const Operand<T>& b, const Offsets& offsets, int64_t width, T* out,
                I* arg_a, I* arg_b, T scale, int64_t limit) {
  constexpr int L = Vec<T, B>::size;
  int64_t k0 = 0;
  const int64_t vectors = width / L;
  while (k0 < vectors) {
    int block = max_block(R, B);
    while (block > vectors - k0) block = block == 8 ? 4 : 1;
    const int64_t* oa = offsets.a.data() + k0;
    const int64_t* ob = offsets.b.data() + k0;
    T* o = out + k0 * L;
    I* xa = arg_a ? arg_a + k0 * L : nullptr;
    I* xb = arg_b ? arg_b + k0 * L : nullptr;
    switch (block) {
#define GF_CASE(n) case n: \
      if constexpr (n <= max_block(R, B)) \
        binary_block<T, I, Op, R, BV, n, B>(ia, ib, begin, end, a, b, oa, ob, o, xa, xb, \
                                            scale, limit); \
      break;
      GF_CASE(1) GF_CASE(4) GF_CASE(8)
#undef GF_CASE
    }
    limit = 0;  // the first block's pass brings each whole row in
    k0 += block;
  }
  if (vectors * L < width)
    binary_tail<T, I, Op, R, BV>(ia, ib, begin, end, a, b, vectors * L, width, out, arg_a,
                                 arg_b, scale);
}

// sum/mean where both operands are read as whole rows (one head, or heads of D laid out
// back to back in both: element (h, d) of either at column h * D + d) and the row is exactly
// NV vectors: the offsets are compile-time constants and the accumulators start at zero,
// so the in-edge loop is NV loads of each operand and NV adds (u_mul_e with [E, F] edge
// features). Rows without entries store the zeros. With kStream the output rows are written
// with non-temporal stores (see spmm_binary_contiguous).
template <class T, class I, int Op, int NV, int B, bool kStream>
void sum_rows_contiguous(const I* ptr, const I* ia, const I* ib, const Operand<T>& a,
                         const Operand<T>& b, T* out, int64_t first, int64_t last,
                         bool mean) {
  typedef typename Vec<T, B>::type V;
  constexpr int L = Vec<T, B>::size;
  const int64_t a_bytes = a.stride * static_cast<int64_t>(sizeof(T));
  const int64_t b_bytes = b.stride * static_cast<int64_t>(sizeof(T));
  const int64_t limit = ptr[last];  // prefetch runs ahead across rows, to the chunk's end
  for (int64_t v = first; v < last; ++v) {
    const int64_t begin = ptr[v], end = ptr[v + 1];
    V acc[NV];
    for (int k = 0; k < NV; ++k) acc[k] = splat<T, B>(T(0));
    for (int64_t j = begin; j < end; ++j) {
      if (j + kPrefetchDistance < limit) {
        prefetch_row(a.row(ia[j + kPrefetchDistance]), a_bytes);
        prefetch_row(b.row(ib[j + kPrefetchDistance]), b_bytes);
      }
      const T* ra = a.row(ia[j]);
      const T* rb = b.row(ib[j]);
      for (int k = 0; k < NV; ++k)
        acc[k] += apply<Op>(load<T, B>(ra + k * L), load<T, B>(rb + k * L));
    }
    const T scale = mean && end > begin ? T(1) / T(end - begin) : T(1);
    T* out_row = out + v * NV * L;
    for (int k = 0; k < NV; ++k) {
      const V value = acc[k] * splat<T, B>(scale);
      if (kStream) stream(out_row + k * L, value); else store<T, B>(out_row + k * L, value);
    }
  }
  if (kStream) stream_fence();
}

// Runs sum_rows_contiguous when the layout allows it; false otherwise.
template <class T, class I, int Op, int R, bool BV>
bool spmm_binary_contiguous(const I* ptr, const I* ia, const I* ib, const Operand<T>& a,
                            const Operand<T>& b, T* out, int64_t rows, int64_t H, int64_t D,
                            int reduce, int threads) {
  constexpr int B = kWideBytes;
  constexpr int L = Vec<T, B>::size;
  const int64_t width = H * D;
  if (R != kSum || !BV || !(H == 1 || (a.hs == D && b.hs == D)) || width % L != 0)
    return false;
  const int64_t vectors = width / L;
  if (vectors != 1 && vectors != 2 && vectors != 4 && vectors != 8) return false;
  const bool mean = reduce == kMean;
  // When the output and the edge rows streamed through reach half the last-level cache,
  // the output is written with non-temporal stores, so writing it does not evict the
  // gathered rows that the next call (or the next epoch) reads again, and it costs no
  // read-for-ownership. Pubmed F=64 (5 MiB out, 22 MiB of edge rows), repeated calls,
  // median of 28: 1.46 -> 1.18 ms; R-MAT 2^16/2^20 16.2 -> 15.5 ms (docs/kernels.md).
  const int64_t streamed = (rows * width + static_cast<int64_t>(ptr[rows]) * b.stride) *
                           static_cast<int64_t>(sizeof(T));
  const bool streaming = streamed >= kStreamBytes &&
                         reinterpret_cast<uintptr_t>(out) % B == 0;
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    switch (vectors * 2 + streaming) {
#define GF_CASE(n) \
      case 2 * n: \
        sum_rows_contiguous<T, I, Op, n, B, false>(ptr, ia, ib, a, b, out, first, last, mean); \
        break; \
      case 2 * n + 1: \
        sum_rows_contiguous<T, I, Op, n, B, true>(ptr, ia, ib, a, b, out, first, last, mean); \
        break;
      GF_CASE(1) GF_CASE(2) GF_CASE(4) GF_CASE(8)
#undef GF_CASE
    }
  });
  return true;
}

// sum/mean of one-head rows narrower than one vector (C elements): the width is a
// compile-time constant, so the in-edge loop is C multiply-adds with the rows prefetched
// ahead; the scalar tail walked the in-edges once per column. Kernel alone, GitHub
// (578,006 edges) u_mul_e_sum with a scalar edge weight, two threads, median of 31: F=2
// 0.92 -> 0.46 ms, F=3 1.22 -> 0.50 ms, F=8 (narrow under 64-byte vectors) 2.59 -> 0.47 ms
// in the AVX-512 build; F=2 0.71 -> 0.47 ms in the SSE2 build.
template <class T, class I, int Op, bool BV, int C>
void sum_rows_narrow(const I* ptr, const I* ia, const I* ib, const Operand<T>& a,
                     const Operand<T>& b, T* out, int64_t first, int64_t last, bool mean) {
  const int64_t limit = ptr[last];
  for (int64_t v = first; v < last; ++v) {
    const int64_t begin = ptr[v], end = ptr[v + 1];
    T acc[C] = {};
    for (int64_t j = begin; j < end; ++j) {
      if (j + kPrefetchDistance < limit) {
        __builtin_prefetch(a.row(ia[j + kPrefetchDistance]), 0, 3);
        __builtin_prefetch(b.row(ib[j + kPrefetchDistance]), 0, 3);
      }
      const T* ra = a.row(ia[j]);
      const T* rb = b.row(ib[j]);
      for (int c = 0; c < C; ++c) {
        const T message = apply<Op>(ra[c], rb[BV ? c : 0]);
        acc[c] = j == begin ? message : acc[c] + message;
      }
    }
    const T scale = mean && end > begin ? T(1) / T(end - begin) : T(1);
    for (int c = 0; c < C; ++c) out[v * C + c] = acc[c] * scale;
  }
}

// Runs sum_rows_narrow for one head of at most 8 columns narrower than a vector; false
// otherwise.
template <class T, class I, int Op, int R, bool BV>
bool spmm_binary_narrow(const I* ptr, const I* ia, const I* ib, const Operand<T>& a,
                        const Operand<T>& b, T* out, int64_t rows, int64_t H, int64_t D,
                        int reduce, int threads) {
  constexpr int L = Vec<T, kWideBytes>::size;
  if (R != kSum || H != 1 || D >= L || D > 8 || D < 1) return false;
  const bool mean = reduce == kMean;
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    switch (D) {
#define GF_CASE(n) case n: \
        sum_rows_narrow<T, I, Op, BV, n>(ptr, ia, ib, a, b, out, first, last, mean); break;
      GF_CASE(1) GF_CASE(2) GF_CASE(3) GF_CASE(4) GF_CASE(5) GF_CASE(6) GF_CASE(7) GF_CASE(8)
#undef GF_CASE
    }
  });
  return true;
}

template <class T, class I, int Op, int R, bool BV>
void spmm_binary(const I* ptr, const I* ia, const I* ib, Operand<T> a, Operand<T> b, T* out,
                 I* arg_a, I* arg_b, int64_t rows, int64_t H, int64_t D, int reduce,
                 int threads) {
  constexpr int B = kWideBytes;
  constexpr int L = Vec<T, B>::size;
  if (spmm_binary_contiguous<T, I, Op, R, BV>(ptr, ia, ib, a, b, out, rows, H, D, reduce,
                                              threads))
    return;
  if (spmm_binary_narrow<T, I, Op, R, BV>(ptr, ia, ib, a, b, out, rows, H, D, reduce,
                                          threads))
    return;
  const int64_t width = H * D;
  // Whole rows at once when no vector straddles two heads; else head by head.
  const bool flat = H == 1 || D % L == 0;
  const Offsets offsets = flat ? Offsets(width, L, D, a.hs, b.hs, BV)
                               : Offsets(D, L, D, 0, 0, BV);
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    const int64_t limit = ptr[last];  // prefetch runs ahead across rows, to the chunk's end
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = ptr[v], end = ptr[v + 1];
      T* out_row = out + v * width;
      I* xa = arg_a ? arg_a + v * width : nullptr;
      I* xb = arg_b ? arg_b + v * width : nullptr;
      if (begin == end) {
        std::memset(out_row, 0, width * sizeof(T));
        if (xa) {
          std::fill(xa, xa + width, I(-1));
          std::fill(xb, xb + width, I(-1));
        }
        continue;
      }
      const T scale = reduce == kMean ? T(1) / T(end - begin) : reduce == kMin ? T(-1) : T(1);
      if (flat) {
        binary_row<T, I, Op, R, BV, B>(ia, ib, begin, end, a, b, offsets, width, out_row, xa,
                                       xb, scale, limit);
        continue;
      }
      for (int64_t h = 0; h < H; ++h) {
        const Operand<T> ah{a.data + h * a.hs, a.stride, 0};
        const Operand<T> bh{b.data + h * b.hs, b.stride, 0};
        binary_row<T, I, Op, R, BV, B>(ia, ib, begin, end, ah, bh, offsets, D,
                                       out_row + h * D, xa ? xa + h * D : nullptr,
                                       xb ? xb + h * D : nullptr, scale, h ? 0 : limit);
      }
    }
  });
}

template <class T, class I, int Op>
void spmm_binary_reduce(int reduce, bool b_vector, const I* ptr, const I* ia, const I* ib,
                        Operand<T> a, Operand<T> b, T* out, I* arg_a, I* arg_b, int64_t rows,
                        int64_t H, int64_t D, int threads) {
#define GF_RUN(R, BV) spmm_binary<T, I, Op, R, BV>(ptr, ia, ib, a, b, out, arg_a, arg_b, rows, \
                                                  H, D, reduce, threads)
  if (reduce == kSum || reduce == kMean) {
    if (b_vector) GF_RUN(kSum, true); else GF_RUN(kSum, false);
  } else {
    if (b_vector) GF_RUN(kMax, true); else GF_RUN(kMax, false);
  }
#undef GF_RUN
}

template <class T, class I>
void spmm_binary_typed(int op, int reduce, int b_vector, const void* ptr, const void* ia,
                       const void* ib, const void* a, int64_t a_stride, int64_t a_hs,
                       const void* b, int64_t b_stride, int64_t b_hs, void* out, void* arg_a,
                       void* arg_b, int64_t rows, int64_t H, int64_t D, int threads) {
  const Operand<T> oa{static_cast<const T*>(a), a_stride, a_hs};
  const Operand<T> ob{static_cast<const T*>(b), b_stride, b_hs};
  const I* p = static_cast<const I*>(ptr);
  const I* xa = static_cast<const I*>(ia);
  const I* xb = static_cast<const I*>(ib);
  T* o = static_cast<T*>(out);
  I* wa = static_cast<I*>(arg_a);
  I* wb = static_cast<I*>(arg_b);
  if (op == kAdd)
    spmm_binary_reduce<T, I, kAdd>(reduce, b_vector, p, xa, xb, oa, ob, o, wa, wb, rows, H, D,
                                   threads);
  else
    spmm_binary_reduce<T, I, kMul>(reduce, b_vector, p, xa, xb, oa, ob, o, wa, wb, rows, H, D,
                                   threads);
}

}  // namespace

extern "C" {

// out[v, h, d] = reduce over j in [ptr[v], ptr[v+1]) of op(a[ia[j], h*a_hs + d],
// b[ib[j], h*b_hs + (b_vector ? d : 0)]). op: 0 add, 1 mul. reduce: 0 sum, 1 mean, 2 max,
// 3 min. arg_a / arg_b: [rows, H*D] winners ia[j] / ib[j] in the index type, or null
// (max/min only). Rows without entries get 0 (and winners -1).
void gf_spmm_binary(int dtype, int index64, int op, int reduce, int b_vector, const void* ptr,
                    const void* ia, const void* ib, const void* a, int64_t a_stride,
                    int64_t a_hs, const void* b, int64_t b_stride, int64_t b_hs, void* out,
                    void* arg_a, void* arg_b, int64_t rows, int64_t H, int64_t D,
                    int threads) {
#define GF_ARGS op, reduce, b_vector, ptr, ia, ib, a, a_stride, a_hs, b, b_stride, b_hs, out, \
    arg_a, arg_b, rows, H, D, threads
  if (dtype == 0 && !index64) spmm_binary_typed<float, int32_t>(GF_ARGS);
  else if (dtype == 0) spmm_binary_typed<float, int64_t>(GF_ARGS);
  else if (!index64) spmm_binary_typed<double, int32_t>(GF_ARGS);
  else spmm_binary_typed<double, int64_t>(GF_ARGS);
#undef GF_ARGS
}

}  // extern "C"
