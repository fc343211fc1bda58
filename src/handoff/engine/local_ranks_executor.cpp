#include "handoff/engine/local_ranks_executor.h"

#include <algorithm>
#include <cstring>

#include "handoff/error.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::engine {
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

LocalRanksExecutor::LocalRanksExecutor(const std::string& model_dir, const model::LoadOptions& load,
                                       std::chrono::milliseconds timeout, int64_t num_blocks,
                                       int64_t block_size, int64_t max_step_tokens)
    : config_(model::load_config(model_dir + "/config.json")) {
  const auto& o = load.parallel;
  ranks_ = o.tp * o.pp;
  pp_ = o.pp;
  root_ = (o.pp - 1) * o.tp;
  world_ = comm::make_local_world(o.tp, o.pp, timeout);
  // Ranks share the machine: each gets cores / ranks kernel threads, at least one.
  const int threads = std::max(1, tensor::num_threads() / ranks_);
  for (int r = 0; r < ranks_; ++r)
    threads_.emplace_back(
        [this, r, threads, model_dir, load, num_blocks, block_size, max_step_tokens] {
          tensor::set_num_threads(threads);
          rank_main(r, model_dir, load, num_blocks, block_size, max_step_tokens);
        });
  std::unique_lock lock(mutex_);
  try {
    wait_for_ranks(lock);  // loaded and profiled
  } catch (...) {
    stopping_ = true;
    cv_.notify_all();
    lock.unlock();
    for (auto& t : threads_) t.join();
    throw;
  }
}

LocalRanksExecutor::~LocalRanksExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void LocalRanksExecutor::wait_for_ranks(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return reported_ == ranks_; });
  reported_ = 0;
  if (error_) std::rethrow_exception(error_);
}

void LocalRanksExecutor::rank_main(int rank, const std::string& model_dir, model::LoadOptions load,
                                   int64_t num_blocks, int64_t block_size,
                                   int64_t max_step_tokens) {
  comm::Communicator& comm = *world_[static_cast<size_t>(rank)];
  auto report = [&](std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (error && !error_) error_ = error;
    ++reported_;
    cv_.notify_all();
  };
  std::unique_ptr<model::Model> model;
  std::unique_ptr<cache::PagedCache> cache;
  try {
    load.comm = &comm;
    model = model::Model::load(model_dir, load);
    cache = std::make_unique<cache::PagedCache>(model->cache_shape(num_blocks, block_size));
    model->profile_run(max_step_tokens);
    report(nullptr);
  } catch (const std::exception& e) {
    comm.abort(e.what());
    report(std::current_exception());
    return;
  }
  uint64_t seen = 0;
  while (true) {
    const std::vector<model::SequenceChunk>* chunks = nullptr;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || step_id_ != seen; });
      if (stopping_) return;
      seen = step_id_;
      chunks = chunks_;
    }
    try {
      // With pp > 1 the step runs as micro-batches in program order on every rank. A stage
      // hands a micro-batch off without waiting (sends are buffered) and starts the next, so
      // stage s works on micro-batch m while stage s + 1 works on m - 1.
      const auto groups = micro_batches(*chunks, pp_);
      std::vector<tensor::Tensor> parts;
      for (const auto& group : groups) parts.push_back(model->forward(group, *cache));
      if (rank == root_) {
        tensor::Tensor logits = concat_rows(parts);
        std::lock_guard lock(mutex_);
        logits_ = std::move(logits);
      }
      report(nullptr);
    } catch (const std::exception& e) {
      comm.abort(e.what());  // the other ranks stop waiting on this one
      report(std::current_exception());
      return;
    }
  }
}

tensor::Tensor LocalRanksExecutor::step(const std::vector<model::SequenceChunk>& chunks) {
  std::unique_lock lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  chunks_ = &chunks;
  ++step_id_;
  cv_.notify_all();
  wait_for_ranks(lock);
  // The ranks are idle until the next step: their counters can be read now.
  counts_.clear();
  for (const auto& comm : world_)
    for (const auto& [key, stats] : comm->counts()) {
      auto& sum = counts_[key];
      sum.calls += stats.calls;
      sum.bytes += stats.bytes;
    }
  return std::move(logits_);
}

comm::CommCounts LocalRanksExecutor::comm_counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

}  // namespace handoff::engine
