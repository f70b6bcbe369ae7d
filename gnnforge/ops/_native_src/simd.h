// Portable SIMD and threading helpers shared by the kernel sources of this directory.
//
// Vectors are GCC vector extensions, so the same code compiles for every instruction-set
// variant the build makes (sse2, avx2, avx512: a 32-byte vector is two xmm registers under
// SSE2, one ymm under AVX2); the only intrinsics are the non-temporal stores. Rows of a
// compressed layout are split into chunks of equal work (entries + 1 per row) run by OpenMP.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#ifdef __AVX__
#include <immintrin.h>
#endif

namespace gf {

// A SIMD vector of `Bytes` bytes: 32 (ymm) for every kernel, 64 (zmm) for the sum kernels
// where the CPU has AVX-512 and the width is a whole number of 64-byte vectors.
template <class T, int Bytes = 32> struct Vec;
template <int Bytes> struct Vec<float, Bytes> {
  typedef float type __attribute__((vector_size(Bytes), aligned(4)));
  typedef int32_t itype __attribute__((vector_size(Bytes), aligned(4)));
  typedef int32_t lane_index;
  static constexpr int size = Bytes / 4;
};
template <int Bytes> struct Vec<double, Bytes> {
  typedef double type __attribute__((vector_size(Bytes), aligned(8)));
  typedef int64_t itype __attribute__((vector_size(Bytes), aligned(8)));
  typedef int64_t lane_index;
  static constexpr int size = Bytes / 8;
};

// The widest vector the build's instruction set has.
#ifdef __AVX512F__
constexpr int kWideBytes = 64;
#else
constexpr int kWideBytes = 32;
#endif

#ifndef GF_PREFETCH_DISTANCE
#define GF_PREFETCH_DISTANCE 16
#endif
constexpr int kPrefetchDistance = GF_PREFETCH_DISTANCE;  // edges ahead
// The copy sums' deep form (gf_spmm_sum_deep): rows twice as far ahead, into L2. For
// sources far past the last-level cache (synthetic-products 2^21, F=64, one thread:
// 28.0 -> 18.5-20.1 ns an edge) it keeps more misses in flight; for sources the cache holds
// it is slower (2^18: 11.2-11.5 -> 14.1-14.4 ns), so the trials choose it per graph.
constexpr int kDeepPrefetchDistance = 2 * GF_PREFETCH_DISTANCE;

// Unaligned loads and stores through a vector type aligned to its element and allowed to
// alias it: one vmovups (or a memory operand of the add) per vector. The memcpy these
// replaced compiled, under -march=x86-64-v3 (GCC 12), to two 16-byte loads stored to the
// stack and reloaded as one 32-byte vector, a failed store-to-load forwarding per vector,
// with the accumulators spilled around it: the AVX2 build ran copy_u sum 2-3x slower than
// the SSE2 one (issue 31; docs/kernels.md).
template <class T, int B = 32>
inline typename Vec<T, B>::type load(const T* p) {
  typedef typename Vec<T, B>::type V;
  typedef V Unaligned __attribute__((aligned(sizeof(T)), may_alias));
  return *reinterpret_cast<const Unaligned*>(p);
}
template <class T, int B = 32>
inline void store(T* p, typename Vec<T, B>::type v) {
  typedef typename Vec<T, B>::type V;
  typedef V Unaligned __attribute__((aligned(sizeof(T)), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}

// A vector of `value` in every lane: vector + scalar broadcasts the scalar (one
// vbroadcast; the lane-by-lane loop this replaced compiled to a chain of inserts, which
// cost the weighted mean gradient about 20%).
template <class V, class S>
inline V fill(S value) {
  return V{} + value;
}
template <class T, int B = 32>
inline typename Vec<T, B>::type splat(T value) {
  return fill<typename Vec<T, B>::type, T>(value);
}

// Non-temporal store of one vector to a 32-byte aligned address: the output of a call
// larger than the cache is written without being read first (no read-for-ownership).
inline void stream(float* p, Vec<float>::type v) {
#ifdef __AVX__
  _mm256_stream_ps(p, reinterpret_cast<__m256>(v));
#else
  store<float>(p, v);
#endif
}
inline void stream(double* p, Vec<double>::type v) {
#ifdef __AVX__
  _mm256_stream_pd(p, reinterpret_cast<__m256d>(v));
#else
  store<double>(p, v);
#endif
}
#ifdef __AVX512F__
// The same for a 64-byte aligned address.
inline void stream(float* p, Vec<float, 64>::type v) {
  _mm512_stream_ps(p, reinterpret_cast<__m512>(v));
}
inline void stream(double* p, Vec<double, 64>::type v) {
  _mm512_stream_pd(p, reinterpret_cast<__m512d>(v));
}
#endif
inline void stream_fence() {
#ifdef __AVX__
  _mm_sfence();
#endif
}
// Outputs of at least half the last-level cache (32 MiB here): streaming them keeps the
// gathered rows in cache. Measured 64 -> 16 MiB (interleaved A/B, min of 21): Pubmed
// F=256 (20 MiB output) sum fwd+bwd 6.26 -> 5.78 ms, mean 6.97 -> 6.36 ms; R-MAT F=64
// (32 MiB) sum fwd+bwd 20.5 -> 19.3 ms; 4 MiB was no better than 16 (docs/kernels.md).
constexpr int64_t kStreamBytes = 16 * 1024 * 1024;

template <class I>
inline int64_t chunk_start(const I* ptr, int64_t rows, int64_t chunk, int64_t chunks) {
  const int64_t total = static_cast<int64_t>(ptr[rows]) + rows;
  const int64_t target = static_cast<int64_t>((__int128)total * chunk / chunks);
  int64_t low = 0, high = rows;
  while (low < high) {
    const int64_t middle = (low + high) / 2;
    if (static_cast<int64_t>(ptr[middle]) + middle < target) low = middle + 1; else high = middle;
  }
  return low;
}

// Runs body(first_row, last_row) over equal-work chunks, on `threads` OpenMP threads.
template <class I, class Body>
void parallel_rows(const I* ptr, int64_t rows, int threads, Body body) {
  if (threads <= 1 || rows < 2) {
    body(int64_t(0), rows);
    return;
  }
  const int64_t chunks = std::min<int64_t>(rows, 4 * threads);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    body(chunk_start(ptr, rows, chunk, chunks), chunk_start(ptr, rows, chunk + 1, chunks));
  }
}

// kDeep: into L2 (locality 2, not 3), for the deep prefetch of kDeepPrefetchDistance.
template <class T, bool kDeep = false>
inline void prefetch_row(const T* row, int64_t bytes) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t offset = 0; offset < bytes; offset += 64)
    __builtin_prefetch(p + offset, 0, kDeep ? 2 : 3);
}

}  // namespace gf
