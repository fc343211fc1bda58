#pragma once
// The engine flags shared by `serve` and `bench offline`, and building an Engine from them.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "handoff/cli/parallel_flags.h"
#include "handoff/engine/engine.h"
#include "handoff/text/tokenizer.h"

namespace handoff::cli {

struct EngineFlags {
  std::string model_dir;
  std::string dtype = "bf16";
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t max_model_len = 4096;
  int64_t kv_cache_tokens = 65536;
  int64_t block_size = 16;
  int64_t max_waiting = 1024;
  int threads = 0;
  ParallelFlags parallel;
};

void add_engine_flags(CLI::App& cmd, EngineFlags& flags);

// Loads the model (and its tokenizer, when the folder has one) and builds the engine; the
// engine is not started. Multi-rank layouts are refused (InputError).
struct LoadedEngine {
  std::unique_ptr<text::Tokenizer> tokenizer;  // null without tokenizer.json
  std::unique_ptr<engine::Engine> engine;
};
LoadedEngine load_engine(const EngineFlags& flags);

}  // namespace handoff::cli
