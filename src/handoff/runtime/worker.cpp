#include "handoff/runtime/worker.h"

#include <algorithm>
#include <cstring>

#include "handoff/error.h"
#include "handoff/log.h"

namespace handoff::runtime {
namespace {

// Splits the step's chunks into at most `count` contiguous groups of similar token counts.
std::vector<std::vector<model::SequenceChunk>> micro_batches(
    const std::vector<model::SequenceChunk>& chunks, int count) {
  const auto groups =
      static_cast<size_t>(std::max(1, std::min<int>(count, static_cast<int>(chunks.size()))));
  int64_t total = 0;
  for (const auto& c : chunks) total += static_cast<int64_t>(c.tokens.size());
  std::vector<std::vector<model::SequenceChunk>> out(1);
  int64_t done = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    // Close a group once it reaches its share of the tokens, leaving one chunk per later group.
    const int64_t share = total * static_cast<int64_t>(out.size()) / static_cast<int64_t>(groups);
    if (!out.back().empty() && out.size() < groups && done >= share &&
        chunks.size() - i >= groups - out.size())
      out.emplace_back();
    out.back().push_back(chunks[i]);
    done += static_cast<int64_t>(chunks[i].tokens.size());
  }
  return out;
}

tensor::Tensor concat_rows(const std::vector<tensor::Tensor>& parts) {
  if (parts.size() == 1) return parts[0];
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.size(0);
  tensor::Tensor out = tensor::Tensor::empty({rows, parts[0].size(1)}, tensor::DType::kF32);
  size_t offset = 0;
  for (const auto& p : parts) {
    std::memcpy(static_cast<uint8_t*>(out.raw()) + offset, p.raw(), p.nbytes());
    offset += p.nbytes();
  }
  return out;
}

}  // namespace

Worker::Worker(const std::string& model_dir, model::LoadOptions load, comm::Communicator* comm,
               const WorkerOptions& options)
    : options_(options) {
  load.comm = comm;
  model_ = model::Model::load(model_dir, load);
  prepare();
}

Worker::Worker(std::unique_ptr<model::Model> model, const WorkerOptions& options)
    : model_(std::move(model)), options_(options) {
  prepare();
}

void Worker::prepare() {
  cache_ = std::make_unique<cache::PagedCache>(
      model_->cache_shape(options_.num_blocks, options_.block_size));
  log::info("rank {}: {}", rank(), cache_->summary());
  model_->profile_run(options_.max_step_tokens);
}

int Worker::rank() const {
  const comm::Communicator* c = model_->comm();
  return c == nullptr ? 0 : c->topology().rank;
}

int Worker::logits_rank() const {
  const auto& o = model_->plan().options;
  return (o.pp - 1) * o.tp;
}

bool Worker::holds_logits() const {
  const comm::Communicator* c = model_->comm();
  return c == nullptr || c->topology().rank == logits_rank();
}

tensor::Tensor Worker::run(const Step& step) {
  if (rank() == options_.fail_rank && steps_ == options_.fail_at_step)
    fail("rank {}: injected failure at step {} (--fail-rank {} --fail-at-step {})", rank(), steps_,
         options_.fail_rank, options_.fail_at_step);
  ++steps_;
  // Before any chunk writes: a copied block's new owner writes into the copy this step.
  for (const cache::BlockCopy& c : step.copies) cache_->copy_block(c.src, c.dst);
  std::vector<tensor::Tensor> parts;
  for (const auto& group : micro_batches(step.chunks, model_->plan().options.pp))
    parts.push_back(model_->forward(group, *cache_));
  return holds_logits() ? concat_rows(parts) : tensor::Tensor();
}

}  // namespace handoff::runtime
