#pragma once
// Runs each engine step on a multi-rank layout of the local backend: every rank is a thread of
// this process that loads its part of the model (its stage, heads, experts) and its own cache.
// step() publishes the chunks to every rank, each runs its part of the forward (the ranks talk
// through their communicators), and the last stage's first tp rank hands back the logits. With
// pp > 1 a step of several sequences runs as up to pp micro-batches in flight at once.
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
#include "handoff/engine/executor.h"
#include "handoff/model/model.h"

namespace handoff::engine {

class LocalRanksExecutor : public Executor {
 public:
  // `load` carries the dtype and the parallel layout (its comm is set per rank). Returns once
  // every rank has loaded its part and run the profiling pass; throws the first rank's error.
  LocalRanksExecutor(const std::string& model_dir, const model::LoadOptions& load,
                     std::chrono::milliseconds timeout, int64_t num_blocks, int64_t block_size,
                     int64_t max_step_tokens);
  ~LocalRanksExecutor() override;

  const model::ModelConfig& config() const override { return config_; }
  tensor::Tensor step(const std::vector<model::SequenceChunk>& chunks) override;
  comm::CommCounts comm_counts() const override;

 private:
  void rank_main(int rank, const std::string& model_dir, model::LoadOptions load,
                 int64_t num_blocks, int64_t block_size, int64_t max_step_tokens);
  // Waits (holding `lock`) until every rank reported; rethrows a rank's failure.
  void wait_for_ranks(std::unique_lock<std::mutex>& lock);

  model::ModelConfig config_;
  int ranks_ = 1;
  int pp_ = 1;
  int root_ = 0;
  std::vector<std::unique_ptr<comm::Communicator>> world_;
  std::vector<std::thread> threads_;
  mutable std::mutex mutex_;
  comm::CommCounts counts_;  // summed over ranks after the last step, read by /metrics
  std::condition_variable cv_;
  uint64_t step_id_ = 0;  // bumped for every published step
  int reported_ = 0;      // ranks done with the current phase
  bool stopping_ = false;
  std::exception_ptr error_;
  const std::vector<model::SequenceChunk>* chunks_ = nullptr;
  tensor::Tensor logits_;
};

}  // namespace handoff::engine
