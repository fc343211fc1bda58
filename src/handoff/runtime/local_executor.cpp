#include "handoff/runtime/local_executor.h"

#include <algorithm>

#include "handoff/tensor/thread_pool.h"

namespace handoff::runtime {

LocalExecutor::LocalExecutor(const std::string& model_dir, const model::LoadOptions& load,
                             std::chrono::milliseconds timeout, const WorkerOptions& options)
    : config_(model::load_config(model_dir + "/config.json")) {
  const auto& o = load.parallel;
  ranks_ = o.tp * o.pp;
  world_ = comm::make_local_world(o.tp, o.pp, timeout);
  // Ranks share the machine: each gets cores / ranks kernel threads, at least one.
  const int threads = std::max(1, tensor::num_threads() / ranks_);
  for (int r = 0; r < ranks_; ++r)
    threads_.emplace_back([this, r, threads, model_dir, load, options] {
      tensor::set_num_threads(threads);
      rank_main(r, model_dir, load, options);
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

LocalExecutor::~LocalExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void LocalExecutor::wait_for_ranks(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return reported_ == ranks_; });
  reported_ = 0;
  if (error_) std::rethrow_exception(error_);
}

void LocalExecutor::rank_main(int rank, const std::string& model_dir,
                              const model::LoadOptions& load, const WorkerOptions& options) {
  comm::Communicator& comm = *world_[static_cast<size_t>(rank)];
  auto report = [&](std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (error && !error_) error_ = error;
    ++reported_;
    cv_.notify_all();
  };
  std::unique_ptr<Worker> worker;
  try {
    worker = std::make_unique<Worker>(model_dir, load, &comm, options);
    report(nullptr);
  } catch (const std::exception& e) {
    comm.abort(e.what());
    report(std::current_exception());
    return;
  }
  uint64_t seen = 0;
  while (true) {
    const Step* step = nullptr;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || step_id_ != seen; });
      if (stopping_) return;
      seen = step_id_;
      step = step_;
    }
    try {
      tensor::Tensor logits = worker->run(*step);
      if (worker->holds_logits()) {
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

tensor::Tensor LocalExecutor::step(const Step& step) {
  std::unique_lock lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  step_ = &step;
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

CollectiveCounts LocalExecutor::comm_counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

}  // namespace handoff::runtime
