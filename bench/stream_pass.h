#pragma once
// The read-bandwidth measurement shared by stream_read and decode_depth_bench: a streaming
// AVX-512 (or portable) sum over a buffer far larger than L3, split over the process thread
// pool, with plain loads or with each line prefetched non-temporally (as the AVX-512 decode
// kernels read single-pass weights on AMD).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "handoff/tensor/tensor.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::bench {

#if defined(__x86_64__)
// Four independent accumulators so the adds never limit the stream. kNonTemporal: each line
// prefetched non-temporally 4 KiB ahead.
template <bool kNonTemporal>
__attribute__((target("avx512f"))) inline float sum_avx512(const float* p, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t i = 0; i + 64 <= n; i += 64) {
    if constexpr (kNonTemporal)
      for (int l = 0; l < 4; ++l) _mm_prefetch(c + 4 * i + 64 * l + 4096, _MM_HINT_NTA);
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  // Summed through memory: GCC 12's _mm512_reduce_add_ps sets off a false -Wuninitialized
  // (GCC bug 105593); the sum only keeps the loads from being optimised away.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float v : lanes) s += v;
  return s;
}
#endif

inline float sum_portable(const float* p, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

class StreamBuffer {
 public:
  explicit StreamBuffer(int64_t bytes)
      : n_(bytes / static_cast<int64_t>(sizeof(float))),
        buf_(tensor::Tensor::empty({n_}, tensor::DType::kF32)) {
    float* p = buf_.data<float>();
    // First touch from the same split as the reads, so pages are resident before timing.
    tensor::parallel_for(n_, 1 << 20, [&](int64_t b, int64_t e) {
      std::memset(p + b, 0, static_cast<size_t>(e - b) * sizeof(float));
    });
  }
  int64_t bytes() const { return n_ * static_cast<int64_t>(sizeof(float)); }

  // One pass over the buffer on the calling thread's pool; returns a sum so it is not elided.
  float pass(bool non_temporal) const {
#if defined(__x86_64__)
    const bool avx512 = __builtin_cpu_supports("avx512f");
#else
    const bool avx512 = false;
#endif
    const float* p = buf_.data<float>();
    std::atomic<float> total{0.0f};  // some chunk's sum: kept so that the loads are not elided
    // Blocks of 64 floats keep every chunk 256-byte aligned for the aligned loads.
    tensor::parallel_for(n_ / 64, 1 << 14, [&](int64_t b, int64_t e) {
      const float* q = p + b * 64;
      const int64_t len = (e - b) * 64;
#if defined(__x86_64__)
      const float s = !avx512        ? sum_portable(q, len)
                      : non_temporal ? sum_avx512<true>(q, len)
                                     : sum_avx512<false>(q, len);
#else
      const float s = sum_portable(q, len);
#endif
      total.store(s, std::memory_order_relaxed);
    });
    return total.load(std::memory_order_relaxed);
  }

  // GB/s of the faster of a plain and a non-temporal pass: the decode roofline's bandwidth.
  double read_gbs() const {
    double best = 0.0;
    for (const bool non_temporal : {false, true}) {
      const auto t0 = std::chrono::steady_clock::now();
      pass(non_temporal);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(bytes()) / s / 1e9);
    }
    return best;
  }

 private:
  int64_t n_;
  tensor::Tensor buf_;
};

}  // namespace handoff::bench
