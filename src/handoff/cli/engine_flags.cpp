#include "handoff/cli/engine_flags.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>

#include "handoff/cli/activations_flag.h"
#include "handoff/cli/flag_checks.h"
#include "handoff/cli/quantize_flag.h"
#include "handoff/error.h"
#include "handoff/log.h"
#include "handoff/model/model.h"
#include "handoff/runtime/local_executor.h"
#include "handoff/runtime/mpi_executor.h"
#include "handoff/runtime/rank_launcher.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::cli {

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
  cmd.add_option("--model", f.model_dir, "Model folder (config.json + safetensors [+ tokenizer])")
      ->required();
  cmd.add_option("--dtype", f.dtype, "Weight dtype: bf16 or f32 (f32: batch-invariant greedy)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  add_quantize_flag(cmd, f.quantize);
  add_activations_flag(cmd, f.activations);
  add_cache_dtype_flags(cmd, f.cache_dtypes);
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
  cmd.add_option_function<int>(
      "--threads", [&f](const int& n) { f.threads = n; }, "Kernel threads (default: all cores)");
  cmd.add_flag("--no-check-weights", f.no_check_weights,
               "Skip the NaN/Inf scan of every weight at load (saves one pass over the weights)");
  cmd.add_flag("--no-prefix-caching", f.no_prefix_caching,
               "Do not keep full cache blocks for reuse by later requests that begin with the "
               "same tokens (prefix caching is on by default)");
  add_parallel_flags(cmd, f.parallel, true);
  cmd.add_option("--fail-rank", f.fail_rank, "Fault injection: this world rank throws ...");
  cmd.add_option("--fail-at-step", f.fail_at_step, "... before running this step (0-based)");
}

void check_engine_flags(const EngineFlags& f) {
  if (f.threads) require_range("--threads", *f.threads, 1, kMaxThreadsFlag);
  require_range("--max-num-seqs", f.max_num_seqs, 1, int64_t{1} << 16);
  require_range("--max-num-batched-tokens", f.max_num_batched_tokens, 1, int64_t{1} << 20);
  // Two tokens at least: a prompt token and a generated one.
  require_range("--max-model-len", f.max_model_len, 2, int64_t{1} << 24);
  require_range("--block-size", f.block_size, 1, 1024);
  // At least one block; block ids are int32.
  require_range("--kv-cache-tokens", f.kv_cache_tokens, f.block_size, INT32_MAX);
  require_range("--max-waiting", f.max_waiting, 1, int64_t{1} << 20);
  require_range("--fail-rank", f.fail_rank, -1, INT32_MAX);
  require_range("--fail-at-step", f.fail_at_step, int64_t{-1}, INT64_MAX);
  if ((f.fail_rank >= 0) != (f.fail_at_step >= 0))
    fail_input("--fail-rank and --fail-at-step go together");
  const parallel::ParallelOptions popts = parallel_options(f.parallel);
  if (f.fail_rank >= popts.tp * popts.pp)
    fail_input("--fail-rank {} is not a rank of a {}-rank run", f.fail_rank, popts.tp * popts.pp);
}

bool is_mpi_worker_rank(const EngineFlags& f) {
  return backend(f.parallel) == runtime::Backend::kMpi && comm::mpi_world_rank() != 0;
}

namespace {

engine::EngineOptions engine_options(const EngineFlags& f, const model::ModelConfig& config) {
  engine::EngineOptions eo;
  eo.scheduler.max_num_seqs = f.max_num_seqs;
  eo.scheduler.max_num_batched_tokens = f.max_num_batched_tokens;
  eo.block_size = f.block_size;
  eo.num_blocks = (f.kv_cache_tokens + f.block_size - 1) / f.block_size;
  eo.max_model_len = std::min<int64_t>(f.max_model_len, config.max_position_embeddings);
  eo.max_waiting = f.max_waiting;
  eo.prefix_caching = !f.no_prefix_caching;
  if (eo.max_model_len > eo.num_blocks * eo.block_size)
    fail_input("--max-model-len {} exceeds the cache of --kv-cache-tokens {} (a request must fit)",
               eo.max_model_len, eo.num_blocks * eo.block_size);
  return eo;
}

// An MPI worker rank: loads its part, then runs steps until rank 0 says stop.
void run_worker_rank(const EngineFlags& f, model::LoadOptions load,
                     const runtime::WorkerOptions& worker_options) {
  const parallel::ParallelOptions& o = load.parallel;
  auto comm = comm::make_mpi_communicator(o.tp, o.pp, comm_timeout(f.parallel));
  try {
    runtime::Worker worker(f.model_dir, load, comm.get(), worker_options);
    runtime::run_mpi_worker(*comm, worker);
  } catch (const std::exception& e) {
    runtime::fail_worker_rank(*comm, e);
  }
  comm.reset();  // frees its MPI handles before MPI_Finalize
  comm::finalize_mpi();
}

}  // namespace

LoadedEngine::~LoadedEngine() {
  const bool failed = engine != nullptr && !engine->failure().empty();
  engine.reset();  // an MpiExecutor tells the worker ranks to stop
  if (!mpi_rank_zero) return;
  // After a failure the worker ranks are not in their loop to hear a stop: end the job.
  if (failed) comm::abort_mpi_job(1);
  comm::finalize_mpi();
}

LoadedEngine load_engine(const EngineFlags& f) {
  check_engine_flags(f);
  const parallel::ParallelOptions popts = parallel_options(f.parallel);
  const bool multi_rank = popts.tp * popts.pp > 1;
  const bool mpi = backend(f.parallel) == runtime::Backend::kMpi;
  if (f.threads) tensor::set_num_threads(*f.threads);
  // As with ranks as threads and `generate`: the host's threads are shared by its ranks.
  if (mpi) runtime::share_cores_with_local_mpi_ranks();
  model::LoadOptions load;
  load.dtype = tensor::parse_dtype(f.dtype);
  load.parallel = popts;
  load.check_weights = !f.no_check_weights;
  // Batch invariance: at f32 every linear computes each row on its own (see
  // docs/architecture.md, "Batch invariance"), so a request's greedy tokens do not depend on
  // what else is in the batch.
  load.batch_invariant = load.dtype == tensor::DType::kF32;

  // Everything that can be checked without the weights comes first: the config, the
  // tokenizer, and the engine options they imply.
  const model::ModelConfig config = model::load_config(f.model_dir + "/config.json");
  apply_cache_dtype_flags(f.cache_dtypes, config, load);
  apply_quantize_flag(f.quantize, config, load);
  apply_activations_flag(f.activations, load);
  const engine::EngineOptions eo = engine_options(f, config);
  runtime::WorkerOptions worker_options{eo.num_blocks, eo.block_size, f.max_num_batched_tokens};
  worker_options.fail_rank = f.fail_rank;
  worker_options.fail_at_step = f.fail_at_step;
  LoadedEngine out;
  if (mpi && comm::mpi_world_rank() != 0) {
    run_worker_rank(f, load, worker_options);
    return out;
  }
  if (std::filesystem::exists(f.model_dir + "/tokenizer.json"))
    out.tokenizer = text::Tokenizer::load(f.model_dir);
  else
    log::warn("{} has no tokenizer.json: prompts must be token ids", f.model_dir);
  if (out.tokenizer && out.tokenizer->vocab_size() > config.vocab_size)
    fail_input("the tokenizer has {} ids but the model's vocab_size is {}",
               out.tokenizer->vocab_size(), config.vocab_size);

  std::unique_ptr<runtime::Executor> executor;
  if (mpi) {
    auto comm = comm::make_mpi_communicator(popts.tp, popts.pp, comm_timeout(f.parallel));
    out.mpi_rank_zero = true;
    std::unique_ptr<runtime::Worker> worker;
    try {
      worker = std::make_unique<runtime::Worker>(f.model_dir, load, comm.get(), worker_options);
    } catch (const std::exception& e) {
      comm->abort(e.what());  // the worker ranks are loading too: end the job, naming rank 0
      throw;
    }
    executor = std::make_unique<runtime::MpiExecutor>(std::move(comm), std::move(worker));
  } else if (multi_rank) {
    // One thread per rank loads its part inside the executor.
    executor = std::make_unique<runtime::LocalExecutor>(f.model_dir, load, comm_timeout(f.parallel),
                                                        worker_options);
  } else {
    executor = std::make_unique<runtime::SingleRankExecutor>(
        std::make_unique<runtime::Worker>(f.model_dir, load, nullptr, worker_options));
  }
  out.engine = std::make_unique<engine::Engine>(eo, std::move(executor), out.tokenizer.get());
  return out;
}

}  // namespace handoff::cli
