#pragma once
// The engine flags shared by `serve` and `bench offline`, and building an Engine from them.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "handoff/cli/parallel_flags.h"
#include "handoff/engine/engine.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {

// --threads above this is a typo, not a machine (generate shares the bound).
inline constexpr int kMaxThreadsFlag = 4096;

struct EngineFlags {
  std::string model_dir;
  std::string dtype = "bf16";
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t max_model_len = 4096;
  int64_t kv_cache_tokens = 65536;
  int64_t block_size = 16;
  int64_t max_waiting = 1024;
  std::optional<int> threads;  // not given: all cores
  bool no_check_weights = false;
  ParallelFlags parallel;
};

void add_engine_flags(CLI::App& cmd, EngineFlags& flags);
// Range checks of every engine flag, before anything is read from disk; InputError naming the
// flag (load_engine runs them first).
void check_engine_flags(const EngineFlags& flags);

// Checks the flags, then the config and tokenizer against them, then loads the model and
// builds the engine (not started): a bad flag fails in milliseconds, never after the weights.
// Multi-rank layouts with --comm mpi are refused (InputError).
struct LoadedEngine {
  std::unique_ptr<text::Tokenizer> tokenizer;  // null without tokenizer.json
  std::unique_ptr<engine::Engine> engine;
};
LoadedEngine load_engine(const EngineFlags& flags);

}  // namespace handoff::cli
