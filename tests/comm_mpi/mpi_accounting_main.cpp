// The communication accounting under mpirun -np 4, one process per rank: for one prefill step
// and the decode step after it, each rank's measured collectives (calls and bytes per scope, op
// and group) equal parallel::predicted_counts for its stage, on both golden model families and
// the layouts of four ranks (tp2 x pp2 with SP on under both boundary contracts and with SP off,
// tp4 with SP, tp1 x pp4). Prints "mpi accounting passed" when every rank agrees, else names
// each mismatch and exits 1.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "handoff/cache/block_manager.h"
#include "handoff/cache/paged_cache.h"
#include "handoff/comm/communicator.h"
#include "handoff/model/model.h"
#include "handoff/parallel/comm_prediction.h"

namespace handoff {
namespace {

using namespace std::chrono_literals;

struct Layout {
  parallel::ParallelOptions options;
  std::string name;
};

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  auto add = [&](int tp, int pp, bool sp, parallel::BoundaryContract boundary,
                 const std::string& name) {
    parallel::ParallelOptions o;
    o.tp = tp;
    o.pp = pp;
    o.sp = sp;
    o.boundary = boundary;
    out.push_back({o, name});
  };
  add(2, 2, true, parallel::BoundaryContract::kFull, "tp2 pp2 sp full");
  add(2, 2, true, parallel::BoundaryContract::kShard, "tp2 pp2 sp shard");
  add(2, 2, false, parallel::BoundaryContract::kFull, "tp2 pp2");
  add(4, 1, true, parallel::BoundaryContract::kFull, "tp4 sp");
  add(1, 4, false, parallel::BoundaryContract::kFull, "pp4");
  return out;
}

std::string describe(const comm::CommCounts& counts) {
  std::string s;
  for (const auto& [key, stats] : counts)
    s += "  " + std::get<0>(key) + " op " + std::to_string(static_cast<int>(std::get<1>(key))) +
         " " + std::string(comm::group_name(std::get<2>(key))) + ": " +
         std::to_string(stats.calls) + " calls, " + std::to_string(stats.bytes) + " bytes\n";
  return s;
}

// Compares this rank's counts with the prediction; prints and counts a mismatch.
int expect_predicted(const comm::Communicator& comm, const comm::CommCounts& predicted,
                     const std::string& what) {
  if (comm.counts() == predicted) return 0;
  std::fprintf(stderr, "rank %d, %s: measured\n%spredicted\n%s", comm.topology().rank, what.c_str(),
               describe(comm.counts()).c_str(), describe(predicted).c_str());
  return 1;
}

// One layout of one model: a prefill of n tokens, then one decode token; returns mismatches.
int check_layout(const std::string& model_dir, const Layout& layout, int64_t n) {
  const auto& o = layout.options;
  auto comm = comm::make_mpi_communicator(o.tp, o.pp, 60s);
  model::LoadOptions load;
  load.dtype = tensor::DType::kF32;
  load.parallel = o;
  load.comm = comm.get();
  auto model = model::Model::load(model_dir, load);
  const int stage = model->stage();
  constexpr int64_t kBlock = 4;
  const int64_t blocks = (n + 1 + kBlock - 1) / kBlock;
  cache::BlockManager manager(blocks, kBlock);
  cache::PagedCache cache(model->cache_shape(blocks, kBlock));
  cache::BlockTable table;
  manager.reserve(table, n + 1);
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 5) % 256);
  const std::string where = model_dir.substr(model_dir.rfind('/') + 1) + " " + layout.name;
  int failures = 0;
  comm->reset_counts();
  model->forward({model::SequenceChunk{prompt, 0, &table, false}}, cache);
  failures += expect_predicted(
      *comm, parallel::predicted_counts(model->plan(), model->config(), stage, n, 1),
      where + ": prefill of " + std::to_string(n) + " tokens");
  const int32_t next = 7;
  comm->reset_counts();
  model->forward({model::SequenceChunk{std::span<const int32_t>(&next, 1), n, &table, false}},
                 cache);
  failures += expect_predicted(
      *comm, parallel::predicted_counts(model->plan(), model->config(), stage, 1, 1),
      where + ": decode after " + std::to_string(n) + " tokens");
  // Every rank learns every rank's verdict, so rank 0's "passed" speaks for all.
  std::vector<float> verdicts(static_cast<size_t>(comm->topology().world_size()));
  const float mine = static_cast<float>(failures);
  comm->all_gather(comm::Group::kWorld, &mine, verdicts.data(), 1);
  int total = 0;
  for (float v : verdicts) total += static_cast<int>(v);
  return total;
}

int run() {
  int failures = 0, checks = 0;
  try {
    for (const char* name : {"dsv32_small_bf16", "glm5_tiny_sparse"})
      for (const Layout& layout : layouts())
        for (int64_t n : {int64_t{5}, int64_t{33}}) {
          failures += check_layout(std::string(HANDOFF_TEST_DATA) + "/golden/" + name, layout, n);
          ++checks;
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", comm::mpi_world_rank(), e.what());
    comm::abort_mpi_job(1);
  }
  const int rank = comm::mpi_world_rank();
  comm::finalize_mpi();
  if (failures > 0) {
    if (rank == 0) std::fprintf(stderr, "%d mismatches over %d checks\n", failures, checks);
    return 1;
  }
  if (rank == 0)
    std::printf("mpi accounting passed (%d prefill and %d decode steps)\n", checks, checks);
  return 0;
}

}  // namespace
}  // namespace handoff

int main() { return handoff::run(); }
