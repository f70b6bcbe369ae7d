// Native CPU kernels for copy-reduce g-SpMM (copy_u / copy_e with sum, mean, max, min)
// and the CSC-pull gradients of copy_u mean and max/min. Loaded by gnnforge/ops/_native.py
// through ctypes; built on first use with the host compiler (see docs/kernels.md).
//
// Every kernel pulls over a compressed row layout: output row v reads the rows of `x`
// listed in index[ptr[v]:ptr[v+1]] and writes its own row once, so threads own disjoint
// output rows (no atomics, no locks). A row is processed in feature blocks of SIMD
// vectors that live in registers for the whole in-edge loop (GCC vector extensions: up to
// 8 AVX2 ymm with -march=native, SSE otherwise; for sum/mean up to 16 AVX-512 zmm when
// the CPU has them and a row is a whole number of them), with a scalar tail for widths
// that are not a multiple of the vector length. Wide rows (more than one block) walk the
// in-edges in tiles sized to stay in L1, so the later blocks re-read the gathered rows
// from L1, not from memory. The next rows to gather are prefetched a few edges ahead.
// Rows are split into chunks of equal work (in-edges + 1 per row) by binary search, run
// by OpenMP: the same libgomp torch loaded (same soname), so one thread pool.

#include <climits>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <vector>
#include <sys/mman.h>
#include "simd.h"

namespace {

using namespace gf;

// sum/mean accumulators per register block: 8 ymm, or 16 zmm (a whole 1 KiB row of
// float32, half of the 32 zmm registers; the other half hold the loads).
constexpr int max_vectors(int bytes) { return bytes == 64 ? 16 : 8; }
constexpr int kMaxExtremeVectors = 4;   // max/min with arg: value + arg accumulators
constexpr int64_t kTileBytes = 16 * 1024;

// stream(), stream_fence() and kStreamBytes (the streaming-store threshold) are in simd.h.


// ------------------------------------------------------------------------- sum / mean

// out[v, c0:c0+NV*L] (+)= sum of x[index[j], same] (times weight[index[j]] when kW) for
// j in [begin, end), in B-byte vectors; rows index[j + distance] are prefetched while
// j + distance < limit. On the general (multi-block, 32-byte) path the limit is the row's
// end: running ahead across rows (limit = the chunk's last edge) was measured slower at
// F=256 (Pubmed 4.90 -> 5.31 ms, R-MAT 117 -> 124 ms, one thread). Where a whole row is
// one register block (sum_rows_exact) it is the chunk's end, as for max/min: kernel
// alone, two threads, F=256 on 64-byte vectors uniform 105 -> 99 ms, Pubmed 1.77 -> 1.56
// ms; F=16-64 on 32-byte vectors (AVX2 and SSE2 builds) 1.02-1.68x (docs/kernels.md).
// The first in-edge initialises the accumulators, and the block is always inlined: the
// out-of-line version zeroed and spilled its accumulators through the stack once per
// call, which for Pubmed's 4.5 in-edges a row was a third of the kernel's time.
//
// kTail: the block also sums the row's last L columns as one more vector, the row's tail
// that is not a whole vector (width - c0 - NV * L between 1 and L - 1) with the columns
// before it that it overlaps. Each lane adds the same values in the same order as the
// block's own lane for that column, so the overlapped columns get the same bits twice;
// the tail is stored last. It replaced a second, scalar pass over the row's in-edges
// (sum_tail, kept for rows narrower than one vector).
template <class T, class I, int NV, bool kW, int B, bool kTail = false, bool kDeep = false>
inline __attribute__((always_inline)) void sum_block(
    const I* index, int64_t begin, int64_t end, const T* x, int64_t width, int64_t c0,
    T* out_row, bool accumulate, int64_t limit, T scale, bool streaming, const T* weight) {
  typedef typename Vec<T, B>::type V;
  constexpr int L = Vec<T, B>::size;
  constexpr int NA = NV + (kTail ? 1 : 0);           // accumulators: the block's, the tail
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(T));
  constexpr int distance = kDeep ? kDeepPrefetchDistance : kPrefetchDistance;
  const auto prefetch_ahead = [&](int64_t j) {
    if (j + distance < limit)
      prefetch_row<T, kDeep>(x + static_cast<int64_t>(index[j + distance]) * width, row_bytes);
  };
  int64_t offset[NA];                                 // each accumulator's first column
  for (int k = 0; k < NV; ++k) offset[k] = c0 + k * L;
  if (kTail) offset[NA - 1] = width - L;
  V acc[NA];
  int64_t j = begin;
  if (accumulate) {
    for (int k = 0; k < NA; ++k) acc[k] = load<T, B>(out_row + offset[k]);
  } else if (j < end) {
    prefetch_ahead(j);
    const T* row = x + static_cast<int64_t>(index[j]) * width;
    const V w = splat<T, B>(kW ? weight[index[j]] : T(1));
    for (int k = 0; k < NA; ++k)
      acc[k] = kW ? load<T, B>(row + offset[k]) * w : load<T, B>(row + offset[k]);
    ++j;
  } else {
    for (int k = 0; k < NA; ++k) acc[k] = splat<T, B>(0);
  }
  for (; j < end; ++j) {
    prefetch_ahead(j);
    const T* row = x + static_cast<int64_t>(index[j]) * width;
    if (kW) {
      const V w = splat<T, B>(weight[index[j]]);
      for (int k = 0; k < NA; ++k) acc[k] += load<T, B>(row + offset[k]) * w;
    } else {
      for (int k = 0; k < NA; ++k) acc[k] += load<T, B>(row + offset[k]);
    }
  }
  const V factor = splat<T, B>(scale);
  if (streaming && !kTail) {           // streaming needs whole aligned vectors: no tail
    for (int k = 0; k < NV; ++k) stream(out_row + offset[k], acc[k] * factor);
  } else {
    for (int k = 0; k < NA; ++k) store<T, B>(out_row + offset[k], acc[k] * factor);
  }
}

template <class T, class I, bool kW, int B>
inline void sum_tail(const I* index, int64_t begin, int64_t end, const T* x, int64_t width,
                     int64_t c0, T* out_row, bool accumulate, T scale, const T* weight) {
  T acc[Vec<T, B>::size];
  const int64_t count = width - c0;
  for (int64_t c = 0; c < count; ++c) acc[c] = accumulate ? out_row[c0 + c] : T(0);
  for (int64_t j = begin; j < end; ++j) {
    const T* row = x + static_cast<int64_t>(index[j]) * width + c0;
    const T w = kW ? weight[index[j]] : T(1);
    for (int64_t c = 0; c < count; ++c) acc[c] += kW ? row[c] * w : row[c];
  }
  for (int64_t c = 0; c < count; ++c) out_row[c0 + c] = acc[c] * scale;
}

template <class T, class I, bool kW, int B, bool kDeep = false>
void sum_edges(const I* index, int64_t begin, int64_t end, const T* x, int64_t width,
               T* out_row, bool accumulate, T scale, bool streaming, const T* weight,
               int64_t limit) {
  constexpr int L = Vec<T, B>::size;
  if (width < L) {
    sum_tail<T, I, kW, B>(index, begin, end, x, width, 0, out_row, accumulate, scale, weight);
    return;
  }
  int64_t c0 = 0;
  while (c0 < width) {
    int64_t vectors = std::min<int64_t>((width - c0) / L, max_vectors(B));
    if (vectors > 8 && vectors < 16) vectors = 8;  // 9-15: two blocks (fewer instantiations)
    const int64_t left = width - c0 - vectors * L;
    const bool tail = left > 0 && left < L;       // the last block takes the partial vector
    switch (vectors) {
#define GF_BLOCK(n, t) sum_block<T, I, n, kW, B, t, kDeep>(index, begin, end, x, width, c0, out_row, \
                                                    accumulate, limit, scale, streaming, weight)
#define GF_CASE(n) case n: if (tail) GF_BLOCK(n, true); else GF_BLOCK(n, false); break;
      GF_CASE(1) GF_CASE(2) GF_CASE(3) GF_CASE(4) GF_CASE(5) GF_CASE(6) GF_CASE(7) GF_CASE(8)
#undef GF_CASE
      case 16:
        if constexpr (max_vectors(B) >= 16) {
          if (tail) GF_BLOCK(16, true);
          else GF_BLOCK(16, false);
        }
        break;
#undef GF_BLOCK
    }
    limit = 0;  // the first block's pass brings each whole row in
    c0 += vectors * L + (tail ? left : 0);
  }
}

// Rows [first, last) when the width is exactly NV vectors (the narrow rows: F = 8-64
// float32 on 32-byte vectors, 16-256 on 64-byte ones): the block dispatch is hoisted out
// of the row loop, which matters for low-degree graphs (Pubmed: 4.5 in-edges a row), and
// the prefetch runs along the chunk's in-edge stream across rows, so the first edges of
// each row are in flight before the row starts (within a row, a row of fewer in-edges
// than the prefetch distance was never prefetched). A shape that runs two rows'
// in-edge loops interleaved was measured and not kept: 0.71-0.97x on R-MAT and
// 0.94-1.07x on Pubmed against this one (docs/kernels.md).
template <class T, class I, int NV, bool kW, int B, bool kDeep = false>
void sum_rows_exact(const I* ptr, const I* index, const T* x, T* out, int64_t first,
                    int64_t last, bool mean, bool streaming, const T* weight) {
  constexpr int64_t width = NV * Vec<T, B>::size;
  const int64_t chunk_end = ptr[last];
  for (int64_t v = first; v < last; ++v) {
    const int64_t begin = ptr[v], end = ptr[v + 1];
    const T scale = mean && end > begin ? T(1) / T(end - begin) : T(1);
    sum_block<T, I, NV, kW, B, false, kDeep>(index, begin, end, x, width, 0, out + v * width,
                                             false, chunk_end, scale, streaming, weight);
  }
}

// Rows [first, last) narrower than one vector (C elements): the count is a compile-time
// constant, so the in-edge loop is C scalar adds instead of the tail's inner loop, with
// rows prefetched ahead as in sum_block. Kernel alone, GitHub (578,006 edges) mean, two
// threads, AVX-512 build, median of 31: F=1 0.46 -> 0.24-0.28 ms, F=2 0.66 -> 0.26 ms,
// F=4 0.70 -> 0.29 ms (one whole vector, F=8: 0.32-0.41 ms).
template <class T, class I, int C, bool kW>
void sum_rows_narrow(const I* ptr, const I* index, const T* x, T* out, int64_t first,
                     int64_t last, bool mean, const T* weight) {
  const int64_t chunk_end = ptr[last];
  for (int64_t v = first; v < last; ++v) {
    const int64_t begin = ptr[v], end = ptr[v + 1];
    T acc[C] = {};
    for (int64_t j = begin; j < end; ++j) {
      if (j + kPrefetchDistance < chunk_end)
        __builtin_prefetch(x + static_cast<int64_t>(index[j + kPrefetchDistance]) * C, 0, 3);
      const T* row = x + static_cast<int64_t>(index[j]) * C;
      const T w = kW ? weight[index[j]] : T(1);
      for (int c = 0; c < C; ++c) acc[c] += kW ? row[c] * w : row[c];
    }
    const T scale = mean && end > begin ? T(1) / T(end - begin) : T(1);
    for (int c = 0; c < C; ++c) out[v * C + c] = acc[c] * scale;
  }
}

// out[v] = sum (mean) over entries j of row v of x[index[j]] (times weight[index[j]]), in
// B-byte vectors.
template <class T, class I, bool kW, int B, bool kDeep = false>
void spmm_sum_vectors(const I* ptr, const I* index, const T* x, T* out, int64_t rows,
                      int64_t width, bool mean, int threads, const T* weight) {
  constexpr int L = Vec<T, B>::size;
  const int64_t tile = std::max<int64_t>(1, kTileBytes / (width * static_cast<int64_t>(sizeof(T))));
  const bool tiled = width > max_vectors(B) * L;
  // Streaming stores need whole aligned vectors in every row (no scalar tail).
  const bool streaming = rows * width * static_cast<int64_t>(sizeof(T)) >= kStreamBytes &&
                         width % L == 0 && reinterpret_cast<uintptr_t>(out) % B == 0;
  const int64_t exact = width % L == 0 ? width / L : 0;
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    if (width < L && width <= 7) {
      switch (width) {
#define GF_CASE(n) case n: sum_rows_narrow<T, I, n, kW>(ptr, index, x, out, first, last, mean, \
                                                       weight); return;
        GF_CASE(1) GF_CASE(2) GF_CASE(3) GF_CASE(4) GF_CASE(5) GF_CASE(6) GF_CASE(7)
#undef GF_CASE
        default: break;
      }
    }
    switch (exact) {
#define GF_CASE(n) case n: if constexpr (max_vectors(B) >= n) { \
                             sum_rows_exact<T, I, n, kW, B, kDeep>(ptr, index, x, out, first, \
                                                                   last, \
                                                            mean, streaming, weight); \
                             if (streaming) stream_fence(); \
                             return; \
                           } \
                           break;
      GF_CASE(1) GF_CASE(2) GF_CASE(4) GF_CASE(8) GF_CASE(16)
#undef GF_CASE
      default: break;
    }
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = ptr[v], end = ptr[v + 1];
      T* out_row = out + v * width;
      if (begin == end) {
        std::memset(out_row, 0, width * sizeof(T));
        continue;
      }
      const T scale = mean ? T(1) / T(end - begin) : T(1);
      if (!tiled) {
        sum_edges<T, I, kW, B, kDeep>(index, begin, end, x, width, out_row, false, scale,
                                      streaming, weight, end);
        continue;
      }
      for (int64_t j = begin; j < end; j += tile) {
        const int64_t stop = std::min(end, j + tile);
        sum_edges<T, I, kW, B, kDeep>(index, j, stop, x, width, out_row, j != begin,
                               stop == end ? scale : T(1), streaming && stop == end, weight,
                               end);
      }
    }
    if (streaming) stream_fence();
  });
}

// spmm_sum_vectors in 64-byte vectors when the CPU has them and a row holds at least one,
// in 32-byte vectors otherwise. Kernel alone, Pubmed F=256 float32 (two threads, cold
// cache, median of 15, interleaved): sum 2.46-2.88 -> 1.65-1.83 ms, the mean gradient
// 2.52-3.13 -> 1.68-2.17 ms (with the inlined block above; docs/kernels.md). Rows that are
// not a whole number of 64-byte vectors took 32-byte ones while the tail was a scalar
// pass; with the tail vector (sum_block's kTail) 64-byte ones ran F=47 on synthetic-
// products 2^21 in 3,059 ms against 3,471 (one thread; 4,823 with the scalar tail).
template <class T>
inline bool wide_vectors(int64_t width) {
  return kWideBytes > 32 && width >= Vec<T, kWideBytes>::size;
}

template <class T, class I, bool kW = false, bool kDeep = false>
void spmm_sum(const I* ptr, const I* index, const T* x, T* out, int64_t rows, int64_t width,
              bool mean, int threads, const T* weight = nullptr) {
  if (wide_vectors<T>(width)) {
    spmm_sum_vectors<T, I, kW, kWideBytes, kDeep>(ptr, index, x, out, rows, width, mean,
                                                  threads, weight);
    return;
  }
  spmm_sum_vectors<T, I, kW, 32, kDeep>(ptr, index, x, out, rows, width, mean, threads, weight);
}

// ------------------------------------------------------------------------- source blocks

// Rows a pass of the source-blocked sum collects before it gathers: their segments' indices
// are copied into one short list, so the prefetch runs along it across rows as in
// sum_rows_exact.
constexpr int64_t kBlockedBatchRows = 256;

// out_row (+)= the rows x[index[j]] for j in [begin, end) of a short index list, times
// `scale`: the same adds, in the same order and vector blocks, as spmm_sum_vectors on a
// whole row, so a row summed in several segments has the bits of one pass.
template <class T, class I, bool kW, int B>
inline void sum_segment(const I* index, int64_t begin, int64_t end, const T* x, int64_t width,
                        T* out_row, bool accumulate, T scale, const T* weight, int64_t limit) {
  constexpr int L = Vec<T, B>::size;
  const int64_t exact = width % L == 0 ? width / L : 0;
  switch (exact) {
#define GF_CASE(n) case n: if constexpr (max_vectors(B) >= n) { \
                             sum_block<T, I, n, kW, B>(index, begin, end, x, width, 0, out_row, \
                                                       accumulate, limit, scale, false, weight); \
                             return; \
                           } \
                           break;
    GF_CASE(1) GF_CASE(2) GF_CASE(4) GF_CASE(8) GF_CASE(16)
#undef GF_CASE
    default: break;
  }
  if (width <= max_vectors(B) * L) {
    sum_edges<T, I, kW, B>(index, begin, end, x, width, out_row, accumulate, scale, false,
                           weight, limit);
    return;
  }
  const int64_t tile = std::max<int64_t>(1, kTileBytes / (width * static_cast<int64_t>(sizeof(T))));
  for (int64_t j = begin; j < end; j += tile) {
    const int64_t stop = std::min(end, j + tile);
    sum_edges<T, I, kW, B>(index, j, stop, x, width, out_row, accumulate || j != begin,
                           stop == end ? scale : T(1), false, weight, end);
  }
}

// spmm_sum_vectors with the sources split into ranges of `block_rows` rows: one pass per
// range, each adding to every output row the in-edges whose source lies in it, so a pass
// gathers from one range only and, where the range fits the last-level cache while x does
// not, reads it from there. Each row's cursor (`next`) marks its first edge not yet added:
// a pass adds edges from it while their source is below the range's end (the last pass
// adds the rest), so every edge is added exactly once and in its row's order, sorted or
// not, and the result has the bits of one pass (out is stored and read back between
// passes, in T; the mean's scale is applied with the row's last edge). Rows are split
// among threads within each pass, so all threads gather from the same range.
template <class T, class I, bool kW, int B>
void spmm_sum_source_blocked(const I* ptr, const I* index, const T* x, T* out, int64_t rows,
                             int64_t width, bool mean, int threads, const T* weight,
                             int64_t num_src, int64_t block_rows) {
  std::vector<I> next(ptr, ptr + rows);
  for (int64_t block_end = block_rows;; block_end += block_rows) {
    const bool last_block = block_end >= num_src;
    const bool first_block = block_end == block_rows;
    parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
      std::vector<I> list;
      int64_t starts[kBlockedBatchRows + 1];
      for (int64_t v0 = first; v0 < last; v0 += kBlockedBatchRows) {
        const int64_t v1 = std::min(last, v0 + kBlockedBatchRows);
        list.clear();
        for (int64_t v = v0; v < v1; ++v) {
          starts[v - v0] = static_cast<int64_t>(list.size());
          const int64_t end = ptr[v + 1];
          int64_t stop = next[v];
          if (last_block) stop = end;
          else while (stop < end && static_cast<int64_t>(index[stop]) < block_end) ++stop;
          list.insert(list.end(), index + next[v], index + stop);
        }
        starts[v1 - v0] = static_cast<int64_t>(list.size());
        const int64_t limit = starts[v1 - v0];
        for (int64_t v = v0; v < v1; ++v) {
          const int64_t begin = ptr[v], end = ptr[v + 1];
          T* out_row = out + v * width;
          if (begin == end) {
            if (first_block) std::memset(out_row, 0, width * sizeof(T));
            continue;
          }
          const int64_t j0 = starts[v - v0], j1 = starts[v - v0 + 1];
          if (j0 == j1) continue;
          const bool done = next[v] + (j1 - j0) == end;
          const T scale = mean && done ? T(1) / T(end - begin) : T(1);
          sum_segment<T, I, kW, B>(list.data(), j0, j1, x, width, out_row, next[v] != begin,
                                   scale, weight, limit);
          next[v] = static_cast<I>(next[v] + (j1 - j0));
        }
      }
    });
    if (last_block) break;
  }
}

// spmm_sum's vector width choice, for the source-blocked sum (block_rows >= num_src: one
// pass, spmm_sum itself).
template <class T, class I, bool kW = false>
void spmm_sum_blocked(const I* ptr, const I* index, const T* x, T* out, int64_t rows,
                      int64_t width, bool mean, int threads, int64_t num_src,
                      int64_t block_rows, const T* weight = nullptr) {
  if (block_rows <= 0 || block_rows >= num_src) {
    spmm_sum<T, I, kW>(ptr, index, x, out, rows, width, mean, threads, weight);
    return;
  }
  if (wide_vectors<T>(width)) {
    spmm_sum_source_blocked<T, I, kW, kWideBytes>(ptr, index, x, out, rows, width, mean,
                                                  threads, weight, num_src, block_rows);
    return;
  }
  spmm_sum_source_blocked<T, I, kW, 32>(ptr, index, x, out, rows, width, mean, threads,
                                        weight, num_src, block_rows);
}

// ------------------------------------------------------------------------- max / min

// out/arg[v, c0:c0+NV*L] = max (min) of x[index[j], same] over j in [begin, end) and the
// winning index; when `accumulate`, the running result already in out/arg takes part.
template <class T, class I, class A, int NV, bool kMax, bool kArg>
inline void extreme_block(const I* index, int64_t begin, int64_t end, const T* x,
                          int64_t width, int64_t c0, T* out_row, A* arg_row,
                          bool accumulate, int64_t limit) {
  typedef typename Vec<T>::type V;
  typedef typename Vec<T>::itype IV;
  typedef typename Vec<T>::lane_index Lane;
  constexpr int L = Vec<T>::size;
  V acc[NV];
  IV who[NV];
  if (accumulate) {
    for (int k = 0; k < NV; ++k) {
      acc[k] = load<T>(out_row + c0 + k * L);
      IV previous = {};
      if (kArg) for (int i = 0; i < L; ++i) previous[i] = static_cast<Lane>(arg_row[c0 + k * L + i]);
      who[k] = previous;
    }
  } else {
    const Lane first = static_cast<Lane>(index[begin]);
    const T* row = x + static_cast<int64_t>(index[begin]) * width + c0;
    for (int k = 0; k < NV; ++k) {
      acc[k] = load<T>(row + k * L);
      who[k] = fill<IV, Lane>(first);
    }
    ++begin;
  }
  for (int64_t j = begin; j < end; ++j) {
    if (j + kPrefetchDistance < limit)
      prefetch_row(x + static_cast<int64_t>(index[j + kPrefetchDistance]) * width,
                   width * static_cast<int64_t>(sizeof(T)));
    const Lane source = static_cast<Lane>(index[j]);
    const T* row = x + static_cast<int64_t>(index[j]) * width + c0;
    for (int k = 0; k < NV; ++k) {
      const V value = load<T>(row + k * L);
      const IV wins = kMax ? (value > acc[k]) : (value < acc[k]);
      acc[k] = wins ? value : acc[k];
      if (kArg) who[k] = wins ? fill<IV, Lane>(source) : who[k];
    }
  }
  for (int k = 0; k < NV; ++k) {
    store<T>(out_row + c0 + k * L, acc[k]);
    if (kArg) for (int i = 0; i < L; ++i) arg_row[c0 + k * L + i] = static_cast<A>(who[k][i]);
  }
}

template <class T, class I, class A, bool kMax, bool kArg>
inline void extreme_tail(const I* index, int64_t begin, int64_t end, const T* x, int64_t width,
                         int64_t c0, T* out_row, A* arg_row, bool accumulate) {
  for (int64_t c = c0; c < width; ++c) {
    int64_t j = begin;
    T best;
    int64_t who = 0;
    if (accumulate) {
      best = out_row[c];
      if (kArg) who = arg_row[c];
    } else {
      best = x[static_cast<int64_t>(index[j]) * width + c];
      who = index[j++];
    }
    for (; j < end; ++j) {
      const T value = x[static_cast<int64_t>(index[j]) * width + c];
      if (kMax ? value > best : value < best) { best = value; who = index[j]; }
    }
    out_row[c] = best;
    if (kArg) arg_row[c] = static_cast<A>(who);
  }
}

template <class T, class I, class A, bool kMax, bool kArg>
void extreme_edges(const I* index, int64_t begin, int64_t end, const T* x, int64_t width,
                   T* out_row, A* arg_row, bool accumulate, int64_t limit) {
  constexpr int L = Vec<T>::size;
  int64_t c0 = 0;
  while (width - c0 >= L) {
    const int64_t vectors = std::min<int64_t>((width - c0) / L, kMaxExtremeVectors);
    switch (vectors) {
#define GF_CASE(n) case n: extreme_block<T, I, A, n, kMax, kArg>(index, begin, end, x, width, c0, \
                                                               out_row, arg_row, accumulate, \
                                                               limit); break;
      GF_CASE(1) GF_CASE(2) GF_CASE(3) GF_CASE(4)
#undef GF_CASE
    }
    limit = 0;  // the first block's pass brings each whole row in
    c0 += vectors * L;
  }
  if (c0 < width)
    extreme_tail<T, I, A, kMax, kArg>(index, begin, end, x, width, c0, out_row, arg_row, accumulate);
}

// Wide rows (more than one register block) walk their in-edges in L1-sized tiles, as in
// spmm_sum, so every block after the first re-reads the gathered rows from L1.
template <class T, class I, class A, bool kMax, bool kArg>
void spmm_extreme(const I* ptr, const I* index, const T* x, T* out, A* arg, int64_t rows,
                  int64_t width, int threads) {
  const bool tiled = width > kMaxExtremeVectors * Vec<T>::size;
  const int64_t tile = tiled ? std::max<int64_t>(
      1, kTileBytes / (width * static_cast<int64_t>(sizeof(T)))) : INT64_MAX;
  // Widths of exactly 1, 2 or 4 vectors: the block dispatch is hoisted out of the row loop.
  const int64_t exact = !tiled && width % Vec<T>::size == 0 ? width / Vec<T>::size : 0;
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    const int64_t limit = ptr[last];  // prefetch runs ahead across rows, to the chunk's end
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = ptr[v], end = ptr[v + 1];
      T* out_row = out + v * width;
      A* arg_row = kArg ? arg + v * width : nullptr;
      if (begin == end) {
        std::memset(out_row, 0, width * sizeof(T));
        if (kArg) std::fill(arg_row, arg_row + width, A(-1));
        continue;
      }
      switch (exact) {
#define GF_CASE(n) case n: extreme_block<T, I, A, n, kMax, kArg>(index, begin, end, x, width, 0, \
                                                               out_row, arg_row, false, limit); \
                           continue;
        GF_CASE(1) GF_CASE(2) GF_CASE(4)
#undef GF_CASE
        default: break;
      }
      for (int64_t j = begin; j < end; j += std::min(tile, end - j)) {
        const int64_t stop = end - j > tile ? j + tile : end;
        extreme_edges<T, I, A, kMax, kArg>(index, j, stop, x, width, out_row, arg_row, j != begin,
                                           limit);
      }
    }
  });
}

// ------------------------------------------------------------------------- gradients

// Gradient of copy_u mean: out[u] = sum over CSC entries j of u of grad[row[j]] / deg(row[j]),
// deg read from the forward CSR row pointer: the weighted sum kernel over the CSC.
// block_rows > 0: in passes over ranges of that many rows of grad (spmm_sum_blocked).
template <class T, class I>
void mean_grad(const I* colptr, const I* row, const I* rowptr, const T* grad, T* out,
               int64_t num_src, int64_t num_dst, int64_t width, int threads,
               int64_t block_rows) {
  std::vector<T> inverse(num_dst);
  for (int64_t v = 0; v < num_dst; ++v) {
    const int64_t degree = rowptr[v + 1] - rowptr[v];
    inverse[v] = degree ? T(1) / T(degree) : T(0);
  }
  spmm_sum_blocked<T, I, true>(colptr, row, grad, out, num_src, width, false, threads, num_dst,
                               block_rows, inverse.data());
}

// Gradient of copy_u max/min: out[u, f] = sum of grad[v, f] over the outputs (v, f) whose
// recorded winner arg[v, f] is u (-1: row without in-edges, no contribution).
//
// Scatter by feature columns: thread t owns a contiguous range of whole cache lines of
// columns and walks arg/grad once, in order, adding grad[v, f] into out[arg[v, f], f]; the
// ranges are disjoint, so no atomics. This reads M x F (arg, grad) once instead of E x F
// for a pull over the CSC, and the winners of one row v are among its few in-neighbours,
// so the writes hit a few rows at a time. Used when every thread gets at least one cache
// line of columns; narrower rows use the CSC pull below.
template <class T, class A>
void extreme_grad_scatter(const A* arg, const T* grad, T* out, int64_t num_dst,
                          int64_t num_src, int64_t width, int threads) {
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
      const A* a = arg + v * width;
      const T* g = grad + v * width;
      for (int64_t f = f0; f < f1; ++f) {
        const int64_t u = a[f];
        if (u >= 0) out[u * width + f] += g[f];
      }
    }
  }
}

// The CSC pull for narrow rows: out[u, f] = sum of grad[v, f] over distinct out-neighbours
// v of u whose winner arg[v, f] is u (CSC lists destinations ascending, so repeats of a
// multi-edge are adjacent and skipped).
template <class T, class I, class A>
void extreme_grad(const I* colptr, const I* row, const A* arg, const T* grad, T* out,
                  int64_t num_src, int64_t num_dst, int64_t width, int threads) {
  if (width * static_cast<int64_t>(sizeof(T)) >= 64 * static_cast<int64_t>(threads)) {
    extreme_grad_scatter<T, A>(arg, grad, out, num_dst, num_src, width, threads);
    return;
  }
  parallel_rows(colptr, num_src, threads, [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      T* out_row = out + u * width;
      std::memset(out_row, 0, width * sizeof(T));
      int64_t previous = -1;
      for (int64_t j = colptr[u]; j < colptr[u + 1]; ++j) {
        const int64_t v = row[j];
        if (v == previous) continue;
        previous = v;
        const A* a = arg + v * width;
        const T* g = grad + v * width;
        for (int64_t c = 0; c < width; ++c) out_row[c] += a[c] == u ? g[c] : T(0);
      }
    }
  });
}

template <class T, class I>
void spmm_copy(const void* ptr, const void* index, const void* x, void* out, void* arg_data,
               int64_t rows, int64_t width, int reduce, int threads) {
  I* arg = static_cast<I*>(arg_data);  // winners are stored in the index type
  const I* p = static_cast<const I*>(ptr);
  const I* ix = static_cast<const I*>(index);
  const T* xs = static_cast<const T*>(x);
  T* o = static_cast<T*>(out);
  switch (reduce) {
    case 0: spmm_sum<T, I>(p, ix, xs, o, rows, width, false, threads); break;
    case 1: spmm_sum<T, I>(p, ix, xs, o, rows, width, true, threads); break;
    case 2:
      if (arg) spmm_extreme<T, I, I, true, true>(p, ix, xs, o, arg, rows, width, threads);
      else spmm_extreme<T, I, I, true, false>(p, ix, xs, o, arg, rows, width, threads);
      break;
    default:
      if (arg) spmm_extreme<T, I, I, false, true>(p, ix, xs, o, arg, rows, width, threads);
      else spmm_extreme<T, I, I, false, false>(p, ix, xs, o, arg, rows, width, threads);
  }
}

}  // namespace

extern "C" {

int gf_abi_version() { return 7; }

// reduce: 0 sum, 1 mean, 2 max, 3 min. dtype: 0 float32, 1 float64. index64: 0 int32
// ptr/index, 1 int64. arg: [rows, width] winners in the index type, or null (max/min only).
void gf_spmm_copy(int dtype, int index64, const void* ptr, const void* index, const void* x,
                  void* out, void* arg, int64_t rows, int64_t width, int reduce,
                  int threads) {
  if (dtype == 0 && !index64) spmm_copy<float, int32_t>(ptr, index, x, out, arg, rows, width, reduce, threads);
  else if (dtype == 0) spmm_copy<float, int64_t>(ptr, index, x, out, arg, rows, width, reduce, threads);
  else if (!index64) spmm_copy<double, int32_t>(ptr, index, x, out, arg, rows, width, reduce, threads);
  else spmm_copy<double, int64_t>(ptr, index, x, out, arg, rows, width, reduce, threads);
}

// The copy_u sum (mean) of gf_spmm_copy with the deep prefetch (kDeepPrefetchDistance
// edges ahead, into L2): the same adds in the same order, so the same bits.
void gf_spmm_sum_deep(int dtype, int index64, const void* ptr, const void* index,
                      const void* x, void* out, int64_t rows, int64_t width, int mean,
                      int threads) {
#define GF_ARGS(T, I) static_cast<const I*>(ptr), static_cast<const I*>(index), \
    static_cast<const T*>(x), static_cast<T*>(out), rows, width, mean != 0, threads
  if (dtype == 0 && !index64) spmm_sum<float, int32_t, false, true>(GF_ARGS(float, int32_t));
  else if (dtype == 0) spmm_sum<float, int64_t, false, true>(GF_ARGS(float, int64_t));
  else if (!index64) spmm_sum<double, int32_t, false, true>(GF_ARGS(double, int32_t));
  else spmm_sum<double, int64_t, false, true>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// The copy_u sum (mean) of gf_spmm_copy with the sources in ranges of block_rows rows, one
// pass per range (spmm_sum_source_blocked); num_src: rows of x. Same bits as gf_spmm_copy.
void gf_spmm_sum_blocked(int dtype, int index64, const void* ptr, const void* index,
                         const void* x, void* out, int64_t rows, int64_t width, int mean,
                         int threads, int64_t num_src, int64_t block_rows) {
#define GF_ARGS(T, I) static_cast<const I*>(ptr), static_cast<const I*>(index), \
    static_cast<const T*>(x), static_cast<T*>(out), rows, width, mean != 0, threads, num_src, \
    block_rows
  if (dtype == 0 && !index64) spmm_sum_blocked<float, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) spmm_sum_blocked<float, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) spmm_sum_blocked<double, int32_t>(GF_ARGS(double, int32_t));
  else spmm_sum_blocked<double, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// block_rows: 0 for one pass, else passes over ranges of that many rows of grad.
void gf_mean_grad(int dtype, int index64, const void* colptr, const void* row,
                  const void* rowptr, const void* grad, void* out, int64_t num_src,
                  int64_t num_dst, int64_t width, int threads, int64_t block_rows) {
#define GF_ARGS(T, I) static_cast<const I*>(colptr), static_cast<const I*>(row), \
    static_cast<const I*>(rowptr), static_cast<const T*>(grad), static_cast<T*>(out), \
    num_src, num_dst, width, threads, block_rows
  if (dtype == 0 && !index64) mean_grad<float, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) mean_grad<float, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) mean_grad<double, int32_t>(GF_ARGS(double, int32_t));
  else mean_grad<double, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// arg: [num_dst, width] winners in the index type (as gf_spmm_copy records them).
void gf_extreme_grad(int dtype, int index64, const void* colptr, const void* row,
                     const void* arg, const void* grad, void* out, int64_t num_src,
                     int64_t num_dst, int64_t width, int threads) {
#define GF_ARGS(T, I) static_cast<const I*>(colptr), static_cast<const I*>(row), \
    static_cast<const I*>(arg), \
    static_cast<const T*>(grad), static_cast<T*>(out), num_src, num_dst, width, threads
  if (dtype == 0 && !index64) extreme_grad<float, int32_t, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) extreme_grad<float, int64_t, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) extreme_grad<double, int32_t, int32_t>(GF_ARGS(double, int32_t));
  else extreme_grad<double, int64_t, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// Ask for transparent huge pages on a fresh buffer before its first touch (fewer page
// faults for large outputs); a no-op where the kernel refuses.
void gf_advise_huge(void* data, int64_t bytes) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = 2 * 1024 * 1024;
  const uintptr_t start = (reinterpret_cast<uintptr_t>(data) + huge - 1) & ~(huge - 1);
  const uintptr_t stop = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(huge - 1);
  if (stop > start) madvise(reinterpret_cast<void*>(start), stop - start, MADV_HUGEPAGE);
#endif
}

}  // extern "C"
