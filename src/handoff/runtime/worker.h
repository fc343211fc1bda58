#pragma once
// One rank's side of execution: its part of the model (its stage's layers, its heads, experts
// and vocab rows), its cache and its communicator. Every rank of a layout runs the same step
// through its Worker; the rank that ends the last stage (its tp rank 0) holds the logits.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/comm/communicator.h"
#include "handoff/model/batch.h"
#include "handoff/model/model.h"
#include "handoff/runtime/step.h"
#include "handoff/tensor/tensor.h"

namespace handoff::runtime {

struct WorkerOptions {
  int64_t num_blocks = 0;  // of the cache
  int64_t block_size = 16;
  int64_t max_step_tokens = 512;  // sizes the profiling pass
  // Fault injection for tests (--fail-rank / --fail-at-step): world rank `fail_rank` throws
  // before running its step number `fail_at_step` (0-based).
  int fail_rank = -1;
  int64_t fail_at_step = -1;
};

class Worker {
 public:
  // Loads this rank's part (load.comm is set to `comm`, null for one rank), allocates its cache
  // and runs the profiling pass, which every rank of the layout runs together.
  Worker(const std::string& model_dir, model::LoadOptions load, comm::Communicator* comm,
         const WorkerOptions& options);
  // One rank whose model is already loaded.
  Worker(std::unique_ptr<model::Model> model, const WorkerOptions& options);
  int rank() const;

  const model::ModelConfig& config() const { return model_->config(); }
  comm::Communicator* comm() const { return model_->comm(); }
  // World rank that returns the logits: the last stage's tp rank 0.
  int logits_rank() const;
  bool holds_logits() const;

  // Runs this rank's part of one step: its block copies on this rank's cache, then the chunks.
  // With pp > 1 the chunks run as up to pp micro-batches in flight: a stage hands a micro-batch
  // off without waiting and starts the next. Returns the logits on holds_logits(), an undefined
  // tensor elsewhere.
  tensor::Tensor run(const Step& step);

 private:
  // Builds the cache (logging its size), then sizes the scratch with one step's worth of tokens.
  void prepare();

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<cache::PagedCache> cache_;
  WorkerOptions options_;
  int64_t steps_ = 0;
};

}  // namespace handoff::runtime
