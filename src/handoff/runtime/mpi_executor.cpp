#include "handoff/runtime/mpi_executor.h"

#include <cstdint>
#include <cstdlib>
#include <thread>

#include "handoff/error.h"
#include "handoff/runtime/count_gather.h"
#include "handoff/runtime/step_message.h"

namespace handoff::runtime {
namespace {

// Header of each step: the length of the step message in words, kStop, or kCounts (every rank
// sends its collective counts to rank 0, gather_counts).
constexpr int64_t kStop = -1;
constexpr int64_t kCounts = -2;

// Rows of logits a step returns: every token of an all_logits chunk, else one per chunk.
int64_t logit_rows(const std::vector<model::SequenceChunk>& chunks) {
  int64_t rows = 0;
  for (const auto& c : chunks) rows += c.all_logits ? static_cast<int64_t>(c.tokens.size()) : 1;
  return rows;
}

// The runtime's own messages are counted under their own scope, apart from the model's.
class RuntimeScope {
 public:
  explicit RuntimeScope(comm::Communicator& comm) : comm_(comm), saved_(comm.scope()) {
    comm_.set_scope("runtime");
  }
  ~RuntimeScope() { comm_.set_scope(saved_); }
  RuntimeScope(const RuntimeScope&) = delete;
  RuntimeScope& operator=(const RuntimeScope&) = delete;

 private:
  comm::Communicator& comm_;
  std::string saved_;
};

}  // namespace

MpiExecutor::MpiExecutor(std::unique_ptr<comm::Communicator> comm, std::unique_ptr<Worker> worker)
    : comm_(std::move(comm)), worker_(std::move(worker)) {
  if (comm_->topology().rank != 0)
    fail("MpiExecutor runs on world rank 0, not rank {}", comm_->topology().rank);
}

MpiExecutor::~MpiExecutor() {
  try {
    stop_workers();
  } catch (const std::exception&) {
    // The job is failing anyway; mpirun ends the ranks that did not hear the stop.
  }
}

void MpiExecutor::stop_workers() {
  std::lock_guard lock(mutex_);
  if (stopped_ || failed_) return;
  stopped_ = true;
  RuntimeScope scope(*comm_);
  int64_t header = kStop;
  comm_->broadcast(comm::Group::kWorld, &header, sizeof header, 0);
}

tensor::Tensor MpiExecutor::step(const Step& step) {
  std::lock_guard lock(mutex_);
  const std::vector<model::SequenceChunk>& chunks = step.chunks;
  if (stopped_ || failed_)
    fail("the MPI ranks are {}{}", failed_ ? "gone after a failure" : "stopped",
         failure_.empty() ? "" : ": " + failure_);
  try {
    {
      RuntimeScope scope(*comm_);
      std::vector<int64_t> message = encode_step(step);
      int64_t header = static_cast<int64_t>(message.size());
      comm_->broadcast(comm::Group::kWorld, &header, sizeof header, 0);
      comm_->broadcast(comm::Group::kWorld, message.data(), message.size() * sizeof(int64_t), 0);
    }
    tensor::Tensor logits = worker_->run(step);
    if (!worker_->holds_logits()) {
      RuntimeScope scope(*comm_);
      logits =
          tensor::Tensor::empty({logit_rows(chunks), config().vocab_size}, tensor::DType::kF32);
      comm_->recv(logits.data<float>(), logits.numel(), worker_->logits_rank());
    }
    return logits;
  } catch (const comm::CommError&) {
    failed_ = true;  // another rank failed (or timed out); it told the others
    throw;
  } catch (const std::exception& e) {
    failed_ = true;
    comm_->announce_failure(e.what());  // rank 0's own part failed: free the worker ranks
    throw;
  }
}

CollectiveCounts MpiExecutor::comm_counts() const {
  std::lock_guard lock(mutex_);
  if (stopped_ || failed_) return counts_;
  try {
    RuntimeScope scope(*comm_);
    int64_t header = kCounts;
    comm_->broadcast(comm::Group::kWorld, &header, sizeof header, 0);
    counts_ = sum_counts(gather_counts(*comm_, 0));
  } catch (const comm::CommError& e) {
    // A rank failed: the engine's next step reports it.
    failed_ = true;
    failure_ = e.what();
  }
  return counts_;
}

void fail_worker_rank(comm::Communicator& comm, const std::exception& error) {
  // A CommError is the consequence of a failure some rank already announced (or a timeout every
  // rank meets); anything else is this rank's own failure, which the others must hear of.
  if (dynamic_cast<const comm::CommError*>(&error) == nullptr) comm.announce_failure(error.what());
  // Rank 0 answers its clients, then ends the job; should it not, this rank does.
  std::this_thread::sleep_for(comm.timeout());
  comm.abort(error.what());
  // MPI's abort ends the job and does not return; should a backend's return, this rank still
  // must not go on serving.
  std::abort();
}

void run_mpi_worker(comm::Communicator& comm, Worker& worker) {
  for (;;) {
    int64_t header = 0;
    std::vector<int64_t> message;
    {
      RuntimeScope scope(comm);
      comm.await_broadcast(&header, sizeof header, 0);
      if (header == kStop) return;
      if (header == kCounts) {
        gather_counts(comm, 0);
        continue;
      }
      if (header < 1) fail("rank {}: bad step header {} from rank 0", comm.topology().rank, header);
      message.resize(static_cast<size_t>(header));
      comm.broadcast(comm::Group::kWorld, message.data(), message.size() * sizeof(int64_t), 0);
    }
    const DecodedStep step(std::move(message));
    const tensor::Tensor logits = worker.run(step.step());
    if (worker.holds_logits()) {
      RuntimeScope scope(comm);
      comm.send(logits.data<float>(), logits.numel(), 0);
    }
  }
}

}  // namespace handoff::runtime
