// LinearWeight::forward throughput: weight-stream GB/s (the decode roofline metric: compare
// with stream_read) and GFLOP/s (the prefill metric). Args: M, N, K, dtype (0 f32, 1 bf16,
// 2 fp8: e4m3 with 128 x 128 block scales), threads.
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

void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const DType dtype = state.range(3) == 2   ? DType::kF8E4M3
                      : state.range(3) == 1 ? DType::kBF16
                                            : DType::kF32;
  handoff::tensor::set_num_threads(static_cast<int>(state.range(4)));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor w = Tensor::empty({n, k}, DType::kF32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
  const handoff::ops::LinearWeight lw =
      dtype == DType::kF8E4M3
          ? handoff::ops::LinearWeight(handoff::tensor::quantize_fp8_blocks(w), dtype)
          : handoff::ops::LinearWeight(w, dtype);
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
  b->ArgNames({"M", "N", "K", "dt", "thr"});
  for (int threads : {1, 2})
    for (int64_t dt : {2, 1, 0})
      for (auto [n, k] :
           {std::pair<int64_t, int64_t>{1024, 1024}, {4096, 1024}, {1024, 4096}, {8192, 8192}})
        for (int64_t m : {1, 4, 8, 16, 32, 64, 128, 512}) {
          if (n * k >= 8192 * 8192 && m > 16) continue;  // big shape: decode only
          b->Args({m, n, k, dt, threads});
        }
}

BENCHMARK(BM_Linear)->Apply(Shapes)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
