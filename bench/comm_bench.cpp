// Latency and bandwidth of one collective on each backend, 1 KiB … 4 MiB per call.
//   build/bin/comm_bench                          local backend: ranks are threads, 2 and 4
//   mpirun -np 2 build/bin/comm_bench             MPI backend: one process per rank, rank 0
//                                                 reports (add --oversubscribe for -np 4 on 2
//                                                 cores)
// Payload = the whole tensor a call collects: all_reduce the reduced vector, all_gather the
// gathered output (each rank contributes 1/ranks of it), reduce_scatter the full input (each
// rank keeps 1/ranks of the sum), ping_pong one message (rank 0 sends, rank 1 answers; one
// iteration is a round trip, so the one-way latency is half the time). GB/s = payload bytes
// per call / time per call.
//
// Every rank must run the same number of collectives, so the iteration count is fixed per
// size (->Iterations) rather than estimated from timings that differ between ranks.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "handoff/comm/communicator.h"

namespace {

using handoff::comm::Communicator;
using handoff::comm::Group;
using namespace std::chrono_literals;

enum class Kind { kAllReduce, kAllGather, kReduceScatter, kPingPong };

constexpr Kind kKinds[] = {Kind::kAllReduce, Kind::kAllGather, Kind::kReduceScatter,
                           Kind::kPingPong};
constexpr int kWarmup = 10;

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kAllReduce:
      return "all_reduce";
    case Kind::kAllGather:
      return "all_gather";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kPingPong:
      return "ping_pong";
  }
  return "unknown";
}

// About 128 MiB of payload per benchmark, between 20 and 2000 calls.
int64_t iterations_for(int64_t bytes) {
  return std::clamp<int64_t>((int64_t{128} << 20) / bytes, 20, 2000);
}

// One rank's buffers for one kind of call; run() makes the call once.
class Call {
 public:
  Call(Communicator& comm, Kind kind, int64_t bytes)
      : comm_(comm), kind_(kind), ranks_(comm.topology().world_size()) {
    const int64_t floats = bytes / static_cast<int64_t>(sizeof(float));
    // all_gather / reduce_scatter take a per-member count; the payload must split evenly.
    per_member_ = floats / ranks_;
    total_ = kind == Kind::kAllReduce || kind == Kind::kPingPong ? floats : per_member_ * ranks_;
    // Zeros: repeated in-place sums stay finite and denormal-free.
    in_.assign(static_cast<size_t>(total_), 0.0f);
    out_.assign(static_cast<size_t>(total_), 0.0f);
  }

  void run() {
    const int rank = comm_.topology().rank;
    switch (kind_) {
      case Kind::kAllReduce:
        comm_.all_reduce(Group::kWorld, in_.data(), total_);
        break;
      case Kind::kAllGather:
        comm_.all_gather(Group::kWorld, in_.data(), out_.data(), per_member_);
        break;
      case Kind::kReduceScatter:
        comm_.reduce_scatter(Group::kWorld, in_.data(), out_.data(), per_member_);
        break;
      case Kind::kPingPong:
        // Ranks past 1 sit this one out.
        if (rank == 0) {
          comm_.send(in_.data(), total_, 1);
          comm_.recv(out_.data(), total_, 1);
        } else if (rank == 1) {
          comm_.recv(out_.data(), total_, 0);
          comm_.send(in_.data(), total_, 0);
        }
        break;
    }
  }

  int64_t payload_bytes() const { return total_ * static_cast<int64_t>(sizeof(float)); }

 private:
  Communicator& comm_;
  Kind kind_;
  int ranks_;
  int64_t per_member_ = 0;
  int64_t total_ = 0;
  std::vector<float> in_;
  std::vector<float> out_;
};

void set_counters(benchmark::State& state, int64_t payload_bytes) {
  state.counters["payload_B"] = static_cast<double>(payload_bytes);
  // A rate counter divides by the time: bytes · 1e-9 / s = GB/s.
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(payload_bytes) * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
}

// Local backend: this thread is rank 0, the others run the same calls on their own threads.
void bm_local(benchmark::State& state, Kind kind) {
  const int ranks = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  auto world = handoff::comm::make_local_world(ranks, 1, 60s);
  std::vector<std::unique_ptr<Call>> calls;
  for (auto& comm : world) calls.push_back(std::make_unique<Call>(*comm, kind, bytes));
  const int64_t total = kWarmup + static_cast<int64_t>(state.max_iterations);
  std::vector<std::jthread> others;
  for (int r = 1; r < ranks; ++r) {
    others.emplace_back([&, r] {
      try {
        for (int64_t i = 0; i < total; ++i) calls[static_cast<size_t>(r)]->run();
      } catch (const std::exception& e) {
        world[static_cast<size_t>(r)]->abort(e.what());  // rank 0 then throws too
      }
    });
  }
  try {
    for (int i = 0; i < kWarmup; ++i) calls[0]->run();
    for (auto _ : state) calls[0]->run();
  } catch (const std::exception& e) {
    world[0]->abort(e.what());
    state.SkipWithError(e.what());
  }
  others.clear();  // joins
  set_counters(state, calls[0]->payload_bytes());
}

// MPI backend: every process registers the same benchmarks with the same fixed iterations and
// runs them in the same order; only rank 0's reporter prints.
void bm_mpi(benchmark::State& state, Communicator* comm, Kind kind) {
  Call call(*comm, kind, state.range(0));
  try {
    for (int i = 0; i < kWarmup; ++i) call.run();
    comm->barrier(Group::kWorld);  // start the timed loop together
    for (auto _ : state) call.run();
  } catch (const std::exception& e) {
    comm->abort(e.what());  // MPI_Abort: a rank stuck in a collective cannot report
  }
  set_counters(state, call.payload_bytes());
}

void register_local() {
  for (Kind kind : kKinds) {
    for (int ranks : {2, 4}) {
      for (int64_t bytes = 1024; bytes <= (int64_t{4} << 20); bytes *= 4) {
        benchmark::RegisterBenchmark((std::string("local/") + kind_name(kind)).c_str(),
                                     [kind](benchmark::State& state) { bm_local(state, kind); })
            ->Args({ranks, bytes})
            ->ArgNames({"ranks", "bytes"})
            ->Iterations(iterations_for(bytes))
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

void register_mpi(Communicator* comm) {
  const int ranks = comm->topology().world_size();
  for (Kind kind : kKinds) {
    for (int64_t bytes = 1024; bytes <= (int64_t{4} << 20); bytes *= 4) {
      benchmark::RegisterBenchmark(
          (std::string("mpi/") + kind_name(kind) + "/ranks:" + std::to_string(ranks)).c_str(),
          [comm, kind](benchmark::State& state) { bm_mpi(state, comm, kind); })
          ->Arg(bytes)
          ->ArgName("bytes")
          ->Iterations(iterations_for(bytes))
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// Ranks other than 0 run every benchmark but print nothing.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

int run(int argc, char** argv) {
  // A file reporter is only accepted with --benchmark_out (Initialize consumes the flag).
  bool has_out = false;
  for (int i = 1; i < argc; ++i) has_out |= std::string(argv[i]).starts_with("--benchmark_out=");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // mpirun (Open MPI) says how many processes there are before MPI_Init.
  const char* mpi_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (mpi_size == nullptr) {
    register_local();
    benchmark::RunSpecifiedBenchmarks();
    return 0;
  }
  auto comm = handoff::comm::make_mpi_communicator(std::atoi(mpi_size), 1, 60s);
  register_mpi(comm.get());
  if (comm->topology().rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    // Rank 0 writes the --benchmark_out file alone.
    benchmark::RunSpecifiedBenchmarks(&silent, has_out ? &silent : nullptr);
  }
  comm.reset();
  handoff::comm::finalize_mpi();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_bench: %s\n", e.what());
    return 1;
  }
}
