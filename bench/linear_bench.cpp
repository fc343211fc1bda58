// LinearWeight::forward throughput: weight-stream GB/s (the decode roofline metric: compare
// with stream_read) and GFLOP/s (the prefill metric). Args: M, N, K, dtype (0 f32, 1 bf16,
// 2 fp8: e4m3 with 128 x 128 block scales), threads, act (activations: 1 rounded to bf16, the
// model's default, 0 exact; ops::ActivationPrecision).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "handoff/ops/linear.h"
#include "handoff/tensor/fp8_blocks.h"
#include "handoff/tensor/tensor.h"
#include "handoff/tensor/thread_pool.h"

namespace {

using handoff::tensor::DType;
using handoff::tensor::Tensor;

// Argument 5: 1 = activations rounded to bf16 (the prefill default of --activations bf16), 0 exact.
handoff::ops::ActivationPrecision activations_arg(const benchmark::State& state) {
  return state.range(5) == 1 ? handoff::ops::ActivationPrecision::kBf16
                             : handoff::ops::ActivationPrecision::kExact;
}

void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DType dtype = state.range(3) == 2   ? DType::kF8E4M3
                      : state.range(3) == 1 ? DType::kBF16
                                            : DType::kF32;
  handoff::tensor::set_num_threads(static_cast<int>(state.range(4)));
  const auto act = activations_arg(state);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor w = Tensor::empty({n, k}, DType::kF32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
  const handoff::ops::LinearWeight lw =
      dtype == DType::kF8E4M3
          ? handoff::ops::LinearWeight(handoff::tensor::quantize_fp8_blocks(w), dtype, false, act)
          : handoff::ops::LinearWeight(w, dtype, false, act);
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
  for (float& v : x) v = dist(rng);
  lw.forward(x.data(), m, y.data());  // builds any cached primitive outside the timing
  for (auto _ : state) {
    lw.forward(x.data(), m, y.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(lw.weight_bytes()) * iters,
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * iters * 1e-9, benchmark::Counter::kIsRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "dt", "thr", "act"});
  for (int threads : {1, 2})
    for (int64_t dt : {2, 1, 0})
      for (int64_t act : {1, 0})
        for (auto [n, k] :
             {std::pair<int64_t, int64_t>{1024, 1024}, {4096, 1024}, {1024, 4096}, {8192, 8192}})
          for (int64_t m : {1, 4, 8, 16, 32, 64, 128, 512}) {
            if (n * k >= 8192 * 8192 && m > 16) continue;  // big shape: decode only
            if (dt == 0 && act == 1) continue;             // f32 weights take x as it is
            b->Args({m, n, k, dt, threads, act});
          }
}

BENCHMARK(BM_Linear)->Apply(Shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);

// A batched decode step's routed experts: many expert-sized matrices (512 MiB in all, far
// beyond the last-level cache, so every weight comes from DRAM), each forwarded on M rows, one
// matrix per thread at a time as Moe::forward runs them. GB/s against stream_read says whether
// M rows per expert are still memory-bound. Args: M, N, K, dtype (1 bf16, 2 fp8), threads, act.
void BM_ExpertsFromDram(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool fp8 = state.range(3) == 2;
  handoff::tensor::set_num_threads(static_cast<int>(state.range(4)));
  const auto act = activations_arg(state);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t count = (int64_t{512} << 20) / (n * k * (fp8 ? 1 : 2));
  std::vector<handoff::ops::LinearWeight> experts;
  Tensor w = Tensor::empty({n, k}, DType::kF32);
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
    if (fp8)
      experts.emplace_back(handoff::tensor::quantize_fp8_blocks(w), DType::kF8E4M3, false, act);
    else
      experts.emplace_back(w, DType::kBF16, false, act);
  }
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(count * m * n));
  for (float& v : x) v = dist(rng);
  for (auto _ : state) {
    handoff::tensor::parallel_for(count, 1, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e)
        experts[static_cast<size_t>(e)].forward(x.data(), m, y.data() + e * m * n);
    });
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(experts.front().weight_bytes()) * static_cast<double>(count) * iters,
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

BENCHMARK(BM_ExpertsFromDram)
    ->ArgNames({"M", "N", "K", "dt", "thr", "act"})
    ->ArgsProduct({{1, 2, 3, 4, 6, 8}, {1024}, {1024}, {1, 2}, {1, 2}, {1, 0}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
