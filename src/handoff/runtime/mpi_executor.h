#pragma once
// The executor of an mpirun job. World rank 0 runs the engine (and the HTTP front) with an
// MpiExecutor: each step it broadcasts the step's description to every other rank, runs its own
// rank's part through its Worker, and receives the logits from the rank that ends the last stage.
// Every other rank runs run_mpi_worker(): wait for a step, run it, send the logits if it holds
// them, until rank 0 says stop.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/runtime/executor.h"
#include "handoff/runtime/worker.h"

namespace handoff::runtime {

class MpiExecutor : public Executor {
 public:
  // `worker` is rank 0's, loaded over `comm` (every rank loads and profiles together).
  MpiExecutor(std::unique_ptr<comm::Communicator> comm, std::unique_ptr<Worker> worker);
  // Stops the worker ranks (stop_workers()).
  ~MpiExecutor() override;

  const model::ModelConfig& config() const override { return worker_->config(); }
  tensor::Tensor step(const Step& step) override;
  // Every rank's counts summed, gathered from the worker ranks now: between steps (it waits for
  // a running step to end), through world broadcasts the workers answer from their loop. Safe
  // from any thread; after the job stopped or failed, the last gathered counts.
  CollectiveCounts comm_counts() const override;

  // Tells every worker rank to leave its loop (they then exit 0). Idempotent; not after a
  // failed step, whose ranks are already on their way out.
  void stop_workers();

 private:
  std::unique_ptr<comm::Communicator> comm_;
  std::unique_ptr<Worker> worker_;
  // Serialises the use of comm_ between the engine's steps and /metrics' gathers (MPI is
  // initialised MPI_THREAD_SERIALIZED), and guards the fields below.
  mutable std::mutex mutex_;
  mutable bool stopped_ = false;
  mutable bool failed_ = false;
  mutable std::string failure_;      // what ended the job, when a gather found it failed
  mutable comm::CommCounts counts_;  // the last gathered sum
};

// The loop of every rank but 0. Returns when rank 0 says stop; throws what a step threw.
void run_mpi_worker(comm::Communicator& comm, Worker& worker);
// A worker rank's way out after `error`: announces its own failure to the other ranks (rank 0
// then ends its requests with an error and the job), waits up to the comm timeout for the job
// to end, then ends it itself. Does not return.
[[noreturn]] void fail_worker_rank(comm::Communicator& comm, const std::exception& error);

}  // namespace handoff::runtime
