#include "handoff/cli/engine_flags.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "handoff/engine/local_ranks_executor.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/model.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::cli {

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
  cmd.add_option("--model", f.model_dir, "Model folder (config.json + safetensors [+ tokenizer])")
      ->required();
  cmd.add_option("--dtype", f.dtype, "Weight dtype: bf16 or f32 (f32: batch-invariant greedy)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd.add_option("--max-num-seqs", f.max_num_seqs, "Running sequences at most")
      ->capture_default_str();
  cmd.add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                 "Token budget of one step (chunked prefill above it)")
      ->capture_default_str();
  cmd.add_option("--max-model-len", f.max_model_len, "Prompt + generated tokens per request")
      ->capture_default_str();
  cmd.add_option("--kv-cache-tokens", f.kv_cache_tokens, "Cache capacity in tokens")
      ->capture_default_str();
  cmd.add_option("--block-size", f.block_size, "Tokens per cache block")->capture_default_str();
  cmd.add_option("--max-waiting", f.max_waiting, "Queued requests beyond this get 503")
      ->capture_default_str();
  cmd.add_option("--threads", f.threads, "Kernel threads (default: all cores)");
  add_parallel_flags(cmd, f.parallel, true);
}

LoadedEngine load_engine(const EngineFlags& f) {
  const parallel::ParallelOptions popts = parallel_options(f.parallel);
  const bool multi_rank = popts.tp * popts.pp > 1;
  if (multi_rank && backend(f.parallel) == runtime::Backend::kMpi)
    fail_input("serving runs its ranks with --comm local; --comm mpi is for `handoff generate`");
  if (f.threads > 0) tensor::set_num_threads(f.threads);
  model::LoadOptions load;
  load.dtype = tensor::parse_dtype(f.dtype);
  load.parallel = popts;
  // Batch invariance: at f32 every linear computes each row on its own (see
  // docs/architecture.md, "Batch invariance"), so a request's greedy tokens do not depend on
  // what else is in the batch.
  load.batch_invariant = load.dtype == tensor::DType::kF32;
  // One rank loads here; a multi-rank layout loads inside the executor, one thread per rank.
  std::unique_ptr<model::Model> model;
  const model::ModelConfig config = model::load_config(f.model_dir + "/config.json");
  if (!multi_rank) model = model::Model::load(f.model_dir, load);
  LoadedEngine out;
  if (std::filesystem::exists(f.model_dir + "/tokenizer.json"))
    out.tokenizer = text::Tokenizer::load(f.model_dir);
  else
    log::warn("{} has no tokenizer.json: prompts must be token ids", f.model_dir);
  if (out.tokenizer && out.tokenizer->vocab_size() > config.vocab_size)
    fail_input("the tokenizer has {} ids but the model's vocab_size is {}",
               out.tokenizer->vocab_size(), config.vocab_size);
  engine::EngineOptions eo;
  eo.scheduler.max_num_seqs = f.max_num_seqs;
  eo.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  eo.block_size = f.block_size;
  if (f.block_size < 1) fail_input("--block-size must be >= 1");
  eo.num_blocks = (f.kv_cache_tokens + f.block_size - 1) / f.block_size;
  eo.max_model_len = std::min<int64_t>(f.max_model_len, config.max_position_embeddings > 0
                                                            ? config.max_position_embeddings
                                                            : f.max_model_len);
  eo.max_waiting = f.max_waiting;
  std::unique_ptr<engine::Executor> executor;
  if (multi_rank) {
    executor = std::make_unique<engine::LocalRanksExecutor>(
        f.model_dir, load,
        std::chrono::milliseconds(static_cast<int64_t>(f.parallel.comm_timeout * 1000)),
        eo.num_blocks, eo.block_size, f.max_num_batched_tokens);
  } else {
    executor = std::make_unique<engine::LocalExecutor>(std::move(model), eo.num_blocks,
                                                       eo.block_size, f.max_num_batched_tokens);
  }
  out.engine = std::make_unique<engine::Engine>(eo, std::move(executor), out.tokenizer.get());
  return out;
}

}  // namespace handoff::cli
