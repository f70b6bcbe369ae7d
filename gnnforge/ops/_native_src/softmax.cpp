// Native edge softmax over the in-edges of every destination, forward and backward, each
// one pull over CSR by destination (ptr, eids): a row's logits [deg, K] are gathered once
// into a contiguous buffer, shifted by their per-feature maximum, exponentiated in SIMD
// vectors (a Cephes-style exp in GCC vector extensions: glibc's scalar exp would be most
// of the kernel, PyTorch's exp is vectorised too), normalised and written back in edge-id
// order. Rows are split into chunks of equal work as in spmm.cpp. The backward is the
// softmax identity ds = a * (g - sum over the row of a * g), one pass that reads a and g.

#include <cstdint>
#include <algorithm>
#include <limits>
#include <vector>

#include "simd.h"

namespace {

using namespace gf;

// exp in vectors: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by a polynomial (float: Cephes
// expf, about 1 ulp) or a Pade form (double: Cephes exp), times 2^n built in the exponent
// bits. Below the smallest normal result it returns 0; NaN stays NaN. Softmax feeds it
// only x <= 0 (logits minus their maximum); above `high` it saturates.
template <class T> struct ExpConstants;
template <> struct ExpConstants<float> {
  static constexpr float low = -87.3f, high = 88.0f;
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  static constexpr int bias = 127, mantissa = 23;
};
template <> struct ExpConstants<double> {
  static constexpr double low = -708.0, high = 709.0;
  static constexpr double ln2_hi = 6.93145751953125e-1, ln2_lo = 1.42860682030941723212e-6;
  static constexpr int bias = 1023, mantissa = 52;
};

template <class T, class V>
inline V poly_exp(V r);
template <>
inline Vec<float>::type poly_exp<float, Vec<float>::type>(Vec<float>::type r) {
  typedef Vec<float>::type V;
  V p = splat<float>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}
template <>
inline Vec<double>::type poly_exp<double, Vec<double>::type>(Vec<double>::type r) {
  const Vec<double>::type rr = r * r;
  const Vec<double>::type p =
      r * ((rr * 1.26177193074810590878e-4 + 3.02994407707441961300e-2) * rr + 1.0);
  const Vec<double>::type q =
      ((rr * 3.00198505138664455042e-6 + 2.52448340349684104192e-3) * rr +
       2.27265548208155028766e-1) * rr + 2.0;
  return 1.0 + 2.0 * p / (q - p);
}

template <class T>
inline typename Vec<T>::type vector_exp(typename Vec<T>::type x) {
  typedef typename Vec<T>::type V;
  typedef typename Vec<T>::itype IV;
  typedef ExpConstants<T> C;
  const IV valid = x >= C::low;
  const V clamped = x < C::high ? x : splat<T>(C::high);
  const V t = clamped * T(1.44269504088896341) + T(0.5);
  V n = __builtin_convertvector(__builtin_convertvector(t, IV), V);
  n = n > t ? n - T(1) : n;                                   // floor
  const V r = clamped - n * C::ln2_hi - n * C::ln2_lo;
  const IV scale_bits = (__builtin_convertvector(n, IV) + C::bias) << C::mantissa;
  V scale;
  std::memcpy(&scale, &scale_bits, sizeof(scale));
  const V result = poly_exp<T, V>(r) * scale;
  const V zero = splat<T>(T(0));
  return x != x ? x : (valid ? result : zero);
}

// values[0:count] = exp(values[0:count]); values has room for a whole last vector.
template <class T>
inline void exp_in_place(T* values, int64_t count) {
  constexpr int L = Vec<T>::size;
  for (int64_t i = 0; i < count; i += L) store<T>(values + i, vector_exp<T>(load<T>(values + i)));
}

template <class T, class I>
void softmax_forward(const I* ptr, const I* eids, const T* logits, T* out, int64_t rows,
                     int64_t K, int threads) {
  constexpr int L = Vec<T>::size;
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    std::vector<T> peak(K), inverse(K), buffer;
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = ptr[v], degree = ptr[v + 1] - begin;
      if (degree == 0) continue;
      buffer.resize((degree * K + L - 1) / L * L);
      std::fill(peak.begin(), peak.end(), -std::numeric_limits<T>::infinity());
      for (int64_t i = 0; i < degree; ++i) {
        const T* row = logits + static_cast<int64_t>(eids[begin + i]) * K;
        T* copy = buffer.data() + i * K;
        for (int64_t k = 0; k < K; ++k) {
          copy[k] = row[k];
          peak[k] = std::max(peak[k], row[k]);
        }
      }
      for (int64_t i = 0; i < degree; ++i)
        for (int64_t k = 0; k < K; ++k) buffer[i * K + k] -= peak[k];
      std::fill(buffer.begin() + degree * K, buffer.end(), T(0));
      exp_in_place(buffer.data(), degree * K);
      std::fill(inverse.begin(), inverse.end(), T(0));
      for (int64_t i = 0; i < degree; ++i)
        for (int64_t k = 0; k < K; ++k) inverse[k] += buffer[i * K + k];
      for (int64_t k = 0; k < K; ++k) inverse[k] = T(1) / inverse[k];
      for (int64_t i = 0; i < degree; ++i) {
        T* row = out + static_cast<int64_t>(eids[begin + i]) * K;
        for (int64_t k = 0; k < K; ++k) row[k] = buffer[i * K + k] * inverse[k];
      }
    }
  });
}

template <class T, class I>
void softmax_backward(const I* ptr, const I* eids, const T* attention, const T* grad, T* out,
                      int64_t rows, int64_t K, int threads) {
  parallel_rows(ptr, rows, threads, [&](int64_t first, int64_t last) {
    std::vector<T> total(K);
    for (int64_t v = first; v < last; ++v) {
      const int64_t begin = ptr[v], end = ptr[v + 1];
      std::fill(total.begin(), total.end(), T(0));
      for (int64_t j = begin; j < end; ++j) {
        const int64_t at = static_cast<int64_t>(eids[j]) * K;
        for (int64_t k = 0; k < K; ++k) total[k] += attention[at + k] * grad[at + k];
      }
      for (int64_t j = begin; j < end; ++j) {
        const int64_t at = static_cast<int64_t>(eids[j]) * K;
        for (int64_t k = 0; k < K; ++k)
          out[at + k] = attention[at + k] * (grad[at + k] - total[k]);
      }
    }
  });
}

}  // namespace

extern "C" {

// out[e, k] = softmax over the entries j of row v (e = eids[j]) of logits[e, k]. Edges
// of no row are not written (every edge is in exactly one row of a CSR).
void gf_edge_softmax(int dtype, int index64, const void* ptr, const void* eids,
                     const void* logits, void* out, int64_t rows, int64_t K, int threads) {
#define GF_ARGS(T, I) static_cast<const I*>(ptr), static_cast<const I*>(eids), \
    static_cast<const T*>(logits), static_cast<T*>(out), rows, K, threads
  if (dtype == 0 && !index64) softmax_forward<float, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) softmax_forward<float, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) softmax_forward<double, int32_t>(GF_ARGS(double, int32_t));
  else softmax_forward<double, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

// out[e, k] = a[e, k] * (g[e, k] - sum over the row of e of a * g).
void gf_edge_softmax_backward(int dtype, int index64, const void* ptr, const void* eids,
                              const void* attention, const void* grad, void* out,
                              int64_t rows, int64_t K, int threads) {
#define GF_ARGS(T, I) static_cast<const I*>(ptr), static_cast<const I*>(eids), \
    static_cast<const T*>(attention), static_cast<const T*>(grad), static_cast<T*>(out), \
    rows, K, threads
  if (dtype == 0 && !index64) softmax_backward<float, int32_t>(GF_ARGS(float, int32_t));
  else if (dtype == 0) softmax_backward<float, int64_t>(GF_ARGS(float, int64_t));
  else if (!index64) softmax_backward<double, int32_t>(GF_ARGS(double, int32_t));
  else softmax_backward<double, int64_t>(GF_ARGS(double, int64_t));
#undef GF_ARGS
}

}  // extern "C"
