#pragma once
// The engine flags shared by `serve` and `bench offline`, and building an Engine from them.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "handoff/cli/cache_dtype_flags.h"
#include "handoff/cli/parallel_flags.h"
#include "handoff/engine/engine.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {

// --threads above this is a typo, not a machine (generate shares the bound).
inline constexpr int kMaxThreadsFlag = 4096;

struct EngineFlags {
  std::string model_dir;
  std::string dtype = "bf16";
  std::string quantize;     // empty or "fp8"
  std::string activations;  // empty, "bf16" or "exact"
  CacheDtypeFlags cache_dtypes;
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t max_model_len = 4096;
  int64_t kv_cache_tokens = 65536;
  int64_t block_size = 16;
  int64_t max_waiting = 1024;
  std::optional<int> threads;  // not given: all cores
  bool no_check_weights = false;
  bool no_prefix_caching = false;
  ParallelFlags parallel;
  int fail_rank = -1;  // fault injection (tests)
  int64_t fail_at_step = -1;
};

void add_engine_flags(CLI::App& cmd, EngineFlags& flags);
// Range checks of every engine flag, before anything is read from disk; InputError naming the
// flag (load_engine runs them first).
void check_engine_flags(const EngineFlags& flags);

// Checks the flags, then the config and tokenizer against them, then loads the model and
// builds the engine (not started): a bad flag fails in milliseconds, never after the weights.
// With --comm mpi the engine lives on world rank 0 (an MpiExecutor); on every other rank
// load_engine runs the worker loop until rank 0 stops it, then returns without an engine.
struct LoadedEngine {
  std::unique_ptr<text::Tokenizer> tokenizer;  // null without tokenizer.json
  std::unique_ptr<engine::Engine> engine;      // null on an MPI worker rank
  bool mpi_rank_zero = false;
  LoadedEngine() = default;
  LoadedEngine(LoadedEngine&& other) noexcept
      : tokenizer(std::move(other.tokenizer)),
        engine(std::move(other.engine)),
        mpi_rank_zero(std::exchange(other.mpi_rank_zero, false)) {}
  // Destroys the engine first; on MPI rank 0 that stops the worker ranks, then MPI finalizes.
  ~LoadedEngine();
};
LoadedEngine load_engine(const EngineFlags& flags);
// Whether this process is an MPI rank other than 0 (it serves no HTTP and runs no engine).
bool is_mpi_worker_rank(const EngineFlags& flags);

}  // namespace handoff::cli
