#include "handoff/cli/parallel_flags.h"

#include <sstream>

#include "handoff/cli/flag_checks.h"
#include "handoff/error.h"

namespace handoff::cli {
namespace {

// Ranks per parallel dimension: far beyond any layout these models split into (heads, layers).
constexpr int64_t kMaxRanksPerDim = 1024;

}  // namespace

void add_parallel_flags(CLI::App& cmd, ParallelFlags& f, bool with_runtime) {
  cmd.add_option("--tp,--tensor-parallel-size", f.tp, "Tensor-parallel ranks per stage");
  cmd.add_option("--pp,--pipeline-parallel-size", f.pp, "Pipeline stages");
  cmd.add_option("--sp", f.sp, "Sequence parallelism (FlashComm1) inside stages: on|off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option("--pp-boundary", f.pp_boundary,
                 "Stage hand-off contract: full (default) or shard (needs pp > 1, --sp on)")
      ->check(CLI::IsMember({"full", "shard"}));
  cmd.add_option("--pp-sp-policy", f.pp_sp_policy,
                 "keep (default): SP stays on inside stages; guard: upstream behaviour "
                 "(needs pp > 1, --sp on)")
      ->check(CLI::IsMember({"keep", "guard"}));
  cmd.add_option("--pp-layers", f.pp_layers, "Layers per stage, e.g. 3,5 (needs pp > 1)");
  if (with_runtime) {
    cmd.add_option("--comm", f.comm, "Rank backend: local (threads) or mpi (under mpirun)")
        ->check(CLI::IsMember({"local", "mpi"}));
    cmd.add_option("--comm-timeout", f.comm_timeout, "Seconds any collective may wait");
  }
}

parallel::ParallelOptions parallel_options(const ParallelFlags& f) {
  require_range("--tp", f.tp, 1, kMaxRanksPerDim);
  require_range("--pp", f.pp, 1, kMaxRanksPerDim);
  comm_timeout(f);
  parallel::ParallelOptions o;
  o.tp = f.tp;
  o.pp = f.pp;
  o.sp = f.sp == "on";
  if (o.sp && f.tp == 1)
    fail_input("--sp on needs --tp > 1: sequence parallelism shards tokens over the tp group");
  if (!f.pp_boundary.empty()) {
    if (f.pp == 1) fail_input("--pp-boundary applies only with --pp > 1");
    if (!o.sp)
      fail_input("--pp-boundary applies only with --sp on (without SP every hand-off is full)");
    o.boundary = f.pp_boundary == "shard" ? parallel::BoundaryContract::kShard
                                          : parallel::BoundaryContract::kFull;
  }
  if (!f.pp_sp_policy.empty()) {
    if (f.pp == 1) fail_input("--pp-sp-policy applies only with --pp > 1");
    if (!o.sp) fail_input("--pp-sp-policy applies only with --sp on");
    o.policy = f.pp_sp_policy == "guard" ? parallel::SpPolicy::kGuard : parallel::SpPolicy::kKeep;
  }
  if (!f.pp_layers.empty()) {
    if (f.pp == 1) fail_input("--pp-layers applies only with --pp > 1");
    std::stringstream ss(f.pp_layers);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        size_t used = 0;
        o.pp_layers.push_back(std::stoll(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        fail_input("--pp-layers: '{}' is not a layer count", item);
      }
    }
  }
  return o;
}

std::chrono::milliseconds comm_timeout(const ParallelFlags& f) {
  return seconds_flag("--comm-timeout", f.comm_timeout);
}

runtime::Backend backend(const ParallelFlags& f) {
  return f.comm == "mpi" ? runtime::Backend::kMpi : runtime::Backend::kLocal;
}

}  // namespace handoff::cli
