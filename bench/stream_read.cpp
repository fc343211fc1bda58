// Memory READ bandwidth of this machine: a streaming AVX-512 (or portable) sum over a buffer
// far larger than L3, split over the process thread pool, with plain loads (BM_StreamRead) and
// with each line prefetched non-temporally (BM_StreamReadNonTemporal, as the AVX-512 decode
// kernels read single-pass weights on AMD). The faster of the two is the roofline baseline for
// the decode GEMV, which is a pure weight stream, so that neither way of reading is set against
// a roofline it beat.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "handoff/tensor/tensor.h"
#include "handoff/tensor/thread_pool.h"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;  // 1 GiB

#if defined(__x86_64__)
// Four independent accumulators so the adds never limit the stream. kNonTemporal: each line
// prefetched non-temporally 4 KiB ahead, as the AVX-512 decode kernels stream single-pass
// weights on AMD.
template <bool kNonTemporal>
__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
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
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}
#endif

float sum_portable(const float* p, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

// `non_temporal`: the loads' lines prefetched non-temporally (AVX-512 only).
void stream_read(benchmark::State& state, bool non_temporal) {
  const int threads = static_cast<int>(state.range(0));
  handoff::tensor::set_num_threads(threads);
  const int64_t n = kBytes / static_cast<int64_t>(sizeof(float));
  handoff::tensor::Tensor buf = handoff::tensor::Tensor::empty({n}, handoff::tensor::DType::kF32);
  float* p = buf.data<float>();
  // First touch from the same split as the reads, so pages are resident before timing.
  handoff::tensor::parallel_for(n, 1 << 20, [&](int64_t b, int64_t e) {
    std::memset(p + b, 0, static_cast<size_t>(e - b) * sizeof(float));
  });
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
#else
  const bool avx512 = false;
#endif
  for (auto _ : state) {
    std::vector<float> partial(static_cast<size_t>(threads), 0.0f);
    // Blocks of 64 floats keep every chunk 256-byte aligned for the aligned loads.
    handoff::tensor::parallel_for(n / 64, 1 << 14, [&](int64_t b, int64_t e) {
      const float* q = p + b * 64;
      const int64_t len = (e - b) * 64;
#if defined(__x86_64__)
      const float s = !avx512        ? sum_portable(q, len)
                      : non_temporal ? sum_avx512<true>(q, len)
                                     : sum_avx512<false>(q, len);
#else
      const float s = sum_portable(q, len);
#endif
      benchmark::DoNotOptimize(s);
    });
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kBytes) * state.iterations(),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["threads"] = threads;
}

void BM_StreamRead(benchmark::State& state) { stream_read(state, false); }
void BM_StreamReadNonTemporal(benchmark::State& state) { stream_read(state, true); }

BENCHMARK(BM_StreamRead)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);
BENCHMARK(BM_StreamReadNonTemporal)
    ->Arg(1)
    ->Arg(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
