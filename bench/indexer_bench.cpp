// The pieces of a decode step's DSA indexer at long context, one thread: the score product of a
// 128-key tile (keys as rows × 8 query heads × 64 dims, GFLOP/s), the bf16 key widening
// (GB/s of bf16 read) and the top-2048 select over a whole context (ns per key). A decode token
// runs each of them once per layer over every cached key (docs/performance.md, "Long context").
#include <benchmark/benchmark.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "handoff/ops/gemm.h"
#include "handoff/ops/vector_ops.h"

namespace {

std::vector<float> random_floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Args: keys (rows), query heads (columns), head dim.
void BM_ScoreTile(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto a = random_floats(static_cast<size_t>(m * k));
  const auto b = random_floats(static_cast<size_t>(k * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  for (auto _ : state) {
    handoff::ops::gemm(m, n, k, a.data(), k, b.data(), n, c.data(), n, false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ScoreTile)->Args({128, 8, 64})->Args({128, 16, 64})->Args({64, 16, 288});

// The fused decode score of keys against 8 heads × 64 dims, ns per key: a decode token runs it
// on every cached key of every layer. Keys f32 rows, or bf16 as a bf16 cache stores them (widened
// inside the kernel).
template <bool Bf16Keys>
void BM_ReluWeightedScores(benchmark::State& state) {
  const int64_t n = state.range(0), heads = state.range(1), dims = state.range(2);
  const auto keys = random_floats(static_cast<size_t>(n * dims));
  std::vector<uint16_t> stored(keys.size());
  for (size_t i = 0; i < keys.size(); ++i)
    stored[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(keys[i]) >> 16);
  const auto q_t = random_floats(static_cast<size_t>(dims * heads));
  const auto w = random_floats(static_cast<size_t>(heads));
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    if constexpr (Bf16Keys)
      handoff::ops::relu_weighted_scores_bf16(n, heads, dims, stored.data(), dims, q_t.data(),
                                              heads, w.data(), out.data());
    else
      handoff::ops::relu_weighted_scores(n, heads, dims, keys.data(), dims, q_t.data(), heads,
                                         w.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns/key"] = benchmark::Counter(
      static_cast<double>(n) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(n * heads * dims) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ReluWeightedScores<false>)
    ->Args({8, 8, 64})
    ->Args({120, 8, 64})
    ->Args({128, 8, 64})
    ->Args({128, 32, 128});
BENCHMARK(BM_ReluWeightedScores<true>)->Args({128, 8, 64})->Args({128, 32, 128});

// Arg: values (a 64K context's 64-dim keys of one layer: 4M).
void BM_WidenBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<uint16_t> src(static_cast<size_t>(n), 0x3f80);
  std::vector<float> dst(static_cast<size_t>(n));
  for (auto _ : state) {
    handoff::ops::widen_bf16(src.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
  }
  state.counters["GB/s read"] =
      benchmark::Counter(2.0 * static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_WidenBf16)->Arg(int64_t{1} << 22);

// Arg: context length; k = 2048 (index_topk). Scores are ReLU-weighted sums: non-negative,
// about a tenth exact zeros.
void BM_TopKSelect(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto scores = random_floats(static_cast<size_t>(n), -0.1f, 1.0f);
  for (float& s : scores) s = s < 0.0f ? 0.0f : s;
  std::vector<int32_t> out(2048);
  for (auto _ : state) {
    handoff::ops::topk_ascending(scores.data(), n, 2048, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["ns/key"] = benchmark::Counter(
      static_cast<double>(n) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_TopKSelect)->Arg(8192)->Arg(16384)->Arg(32768)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
