#include "handoff/engine/executor.h"

namespace handoff::engine {

LocalExecutor::LocalExecutor(std::unique_ptr<model::Model> model, int64_t num_blocks,
                             int64_t block_size, int64_t max_step_tokens)
    : model_(std::move(model)), cache_(model_->cache_shape(num_blocks, block_size)) {
  model_->profile_run(max_step_tokens);
}

tensor::Tensor LocalExecutor::step(const std::vector<model::SequenceChunk>& chunks) {
  return model_->forward(chunks, cache_);
}

}  // namespace handoff::engine
