// Memory READ bandwidth of this machine: a streaming AVX-512 (or portable) sum over a buffer
// far larger than L3, split over the process thread pool, with plain loads (BM_StreamRead) and
// with each line prefetched non-temporally (BM_StreamReadNonTemporal, as the AVX-512 decode
// kernels read single-pass weights on AMD). The faster of the two is the roofline baseline for
// the decode GEMV, which is a pure weight stream, so that neither way of reading is set against
// a roofline it beat.
#include <benchmark/benchmark.h>

#include "handoff/tensor/thread_pool.h"
#include "stream_pass.h"

namespace {

constexpr int64_t kBytes = int64_t{1} << 30;  // 1 GiB

// `non_temporal`: the loads' lines prefetched non-temporally (AVX-512 only).
void stream_read(benchmark::State& state, bool non_temporal) {
  const int threads = static_cast<int>(state.range(0));
  handoff::tensor::set_num_threads(threads);
  const handoff::bench::StreamBuffer buffer(kBytes);
  for (auto _ : state) {
    benchmark::DoNotOptimize(buffer.pass(non_temporal));
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
