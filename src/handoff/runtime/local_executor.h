#pragma once
// The embedded executors: the model's ranks live in this process. SingleRankExecutor runs one
// rank in the calling thread; LocalExecutor runs a tp × pp layout as threads, each rank with its
// Worker and a communicator of the local (shared-memory) backend.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/runtime/executor.h"
#include "handoff/runtime/worker.h"

namespace handoff::runtime {

class SingleRankExecutor : public Executor {
 public:
  explicit SingleRankExecutor(std::unique_ptr<Worker> worker) : worker_(std::move(worker)) {}
  const model::ModelConfig& config() const override { return worker_->config(); }
  tensor::Tensor step(const Step& step) override { return worker_->run(step); }

 private:
  std::unique_ptr<Worker> worker_;
};

class LocalExecutor : public Executor {
 public:
  // `load` carries the dtype and the layout (load.parallel). Returns once every rank has loaded
  // its part and run the profiling pass; throws the first rank's error.
  LocalExecutor(const std::string& model_dir, const model::LoadOptions& load,
                std::chrono::milliseconds timeout, const WorkerOptions& options);
  ~LocalExecutor() override;

  const model::ModelConfig& config() const override { return config_; }
  tensor::Tensor step(const Step& step) override;
  CollectiveCounts comm_counts() const override;

 private:
  void rank_main(int rank, const std::string& model_dir, const model::LoadOptions& load,
                 const WorkerOptions& options);
  // Waits (holding `lock`) until every rank reported; rethrows a rank's failure.
  void wait_for_ranks(std::unique_lock<std::mutex>& lock);

  model::ModelConfig config_;
  int ranks_ = 1;
  std::vector<std::unique_ptr<comm::Communicator>> world_;
  std::vector<std::thread> threads_;
  mutable std::mutex mutex_;
  comm::CommCounts counts_;  // summed over ranks after the last step, read by /metrics
  std::condition_variable cv_;
  uint64_t step_id_ = 0;  // bumped for every published step
  int reported_ = 0;      // ranks done with the current phase
  bool stopping_ = false;
  std::exception_ptr error_;
  const Step* step_ = nullptr;
  tensor::Tensor logits_;
};

}  // namespace handoff::runtime
