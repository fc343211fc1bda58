#pragma once
// Runs one engine step over the model, wherever the model lives. The engine hands it the
// step's chunks and gets the logits back (one row per chunk, its last token), so the engine
// does not care whether the model is one rank in this thread or many ranks elsewhere.
#include <memory>
#include <vector>

#include "handoff/cache/paged_cache.h"
#include "handoff/comm/communicator.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/model/model.h"
#include "handoff/tensor/tensor.h"

namespace handoff::engine {

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const model::ModelConfig& config() const = 0;
  // f32 logits [chunks, vocab].
  virtual tensor::Tensor step(const std::vector<model::SequenceChunk>& chunks) = 0;
  // What the ranks' collectives counted so far, summed over the ranks; safe from any thread.
  virtual comm::CommCounts comm_counts() const { return {}; }
};

// One rank in the calling thread: the model and its whole cache.
class LocalExecutor : public Executor {
 public:
  LocalExecutor(std::unique_ptr<model::Model> model, int64_t num_blocks, int64_t block_size,
                int64_t max_step_tokens);
  const model::ModelConfig& config() const override { return model_->config(); }
  tensor::Tensor step(const std::vector<model::SequenceChunk>& chunks) override;

 private:
  std::unique_ptr<model::Model> model_;
  cache::PagedCache cache_;
};

}  // namespace handoff::engine
