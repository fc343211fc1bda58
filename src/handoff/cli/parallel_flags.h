#pragma once
// The parallel-layout flags shared by generate, plan and serve, and their validation: a flag
// that does not apply to the chosen layout is an error, not silently ignored.
#include <CLI/CLI.hpp>
#include <chrono>
#include <string>

#include "handoff/parallel/plan.h"
#include "handoff/runtime/rank_launcher.h"

namespace handoff::cli {

struct ParallelFlags {
  int tp = 1;
  int pp = 1;
  std::string sp = "off";
  std::string pp_boundary;   // empty: not given (default full)
  std::string pp_sp_policy;  // empty: not given (default keep)
  std::string pp_layers;     // "3,5"
  std::string comm = "local";
  double comm_timeout = 60.0;
};

void add_parallel_flags(CLI::App& cmd, ParallelFlags& flags, bool with_runtime);
// Checks the combination and converts it; throws InputError naming the flag.
parallel::ParallelOptions parallel_options(const ParallelFlags& flags);
runtime::Backend backend(const ParallelFlags& flags);
// --comm-timeout as a duration (checked: finite, > 0, no overflow); InputError naming the flag.
std::chrono::milliseconds comm_timeout(const ParallelFlags& flags);

}  // namespace handoff::cli
