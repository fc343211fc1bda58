// One process per rank under mpirun (Open MPI). Every operation is a non-blocking MPI call
// completed by polling against the deadline, so a dead or missing rank becomes a CommError
// instead of a hang; abort() takes the whole job down through MPI_Abort. Between polls a rank
// spins, then yields, and sleeps only after milliseconds of waiting (backoff.h).
//
// Reductions use MPI's own collectives, arranged so every rank ends with the same bits:
// reduce_scatter is MPI_Ireduce_scatter_block (block i is summed by member i alone), and
// all_reduce is that reduce-scatter followed by an all-gather of the summed blocks, so each
// element is summed once, by one rank, and copied to the others. The summation order within an
// element is Open MPI's (it depends on the algorithm it picks and the group size), so it may
// differ from the local backend's group-rank order: with two members (a + b) both backends
// agree bit for bit, with more they agree to rounding. A count that does not divide by the
// group size is zero-padded to the next multiple for the all-reduce (zeros add nothing).
//
// Process-wide state: MPI itself is the one process-wide thing here; whether it is
// initialised is asked of MPI (MPI_Initialized / MPI_Finalized), so this file keeps no globals.
// Only the C API is used: keep Open MPI's deprecated C++ bindings (which need libmpi_cxx) out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <string>

#include "handoff/comm/backoff.h"
#include "handoff/comm/communicator.h"
#include "handoff/comm/local_world.h"

namespace handoff::comm {

namespace {

bool mpi_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void ensure_mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // SERIALIZED: the engine may call MPI from whichever thread runs the step loop, but
  // never from two threads at once; OpenMP threads inside kernels never call MPI.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    fail("MPI provides thread level {}, need MPI_THREAD_SERIALIZED", provided);
  }
}

int to_int(int64_t count, std::string_view what) {
  if (count < 0 || count > std::numeric_limits<int>::max()) {
    fail_input("{}: count {} does not fit an MPI count", what, count);
  }
  return static_cast<int>(count);
}

// A sent message whose buffer MPI still owns: send() copies, so it never waits for the
// receiver, like the local backend's mailboxes.
struct PendingSend {
  std::vector<float> data;
  MPI_Request request = MPI_REQUEST_NULL;
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(Topology topology, std::chrono::milliseconds timeout)
      : Communicator(topology, timeout) {
    MPI_Comm_dup(MPI_COMM_WORLD, &world_);
    // Key = rank within the group, so MPI's rank in each communicator is the group rank.
    MPI_Comm_split(MPI_COMM_WORLD, topology.pp_rank(), topology.tp_rank(), &tp_);
    MPI_Comm_split(MPI_COMM_WORLD, topology.tp_rank(), topology.pp_rank(), &pp_);
  }

  ~MpiCommunicator() override {
    if (!mpi_active()) return;
    // Give queued sends their chance to complete; a receiver that never came is not worth
    // hanging the exit for.
    Backoff backoff(timeout());
    for (reap_sends(); !sends_.empty() && backoff.pause(); reap_sends()) {
    }
    for (auto& s : sends_) {
      MPI_Cancel(&s.request);
      MPI_Request_free(&s.request);
    }
    MPI_Comm_free(&pp_);
    MPI_Comm_free(&tp_);
    MPI_Comm_free(&world_);
  }

  void abort(const std::string& reason) override {
    // mpirun kills every rank once one calls MPI_Abort: that is the "no rank hangs" promise.
    announce_failure(reason);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  void announce_failure(const std::string& reason) override {
    if (announced_) return;
    announced_ = true;
    const std::string message = fmt::format("rank {} failed: {}", topology().rank, reason);
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    // One small message per rank, sent without waiting (eager): every wait loop probes for it.
    failure_message_.assign(message.begin(), message.end());
    for (int r = 0; r < topology().world_size(); ++r) {
      if (r == topology().rank) continue;
      MPI_Request& request = failure_sends_.emplace_back();
      MPI_Isend(failure_message_.data(), static_cast<int>(failure_message_.size()), MPI_CHAR, r,
                kFailureTag, world_, &request);
    }
  }

 protected:
  void do_all_reduce(Group g, float* data, int64_t count) override {
    const int n = topology().group_size(g);
    // Nothing to add (every member has the same count and group, so all return together).
    if (count == 0 || n == 1) return;
    const int64_t block = (count + n - 1) / n;
    const int block_count = to_int(block, "all_reduce");
    to_int(block * n, "all_reduce");  // MPI sums the whole padded buffer as one int count
    // Exact multiple: reduce straight from `data` and gather straight back into it. Otherwise
    // the input is padded with zeros to n blocks in staging, and the result trimmed on copy.
    const bool padded = block * n != count;
    float* mine = staging(block + (padded ? block * n : 0));
    float* whole = padded ? mine + block : data;
    if (padded) {
      std::memcpy(whole, data, static_cast<size_t>(count) * sizeof(float));
      std::memset(whole + count, 0, static_cast<size_t>(block * n - count) * sizeof(float));
    }
    // One deadline for both steps; each starts with a spin.
    Backoff backoff(timeout());
    MPI_Request request;
    MPI_Ireduce_scatter_block(whole, mine, block_count, MPI_FLOAT, MPI_SUM, comm(g), &request);
    wait(request, Op::kAllReduce, g, backoff);
    backoff.restart();
    MPI_Iallgather(mine, block_count, MPI_FLOAT, whole, block_count, MPI_FLOAT, comm(g), &request);
    wait(request, Op::kAllReduce, g, backoff);
    if (padded) std::memcpy(data, whole, static_cast<size_t>(count) * sizeof(float));
  }

  void do_reduce_scatter(Group g, const float* send, float* recv, int64_t count) override {
    if (count == 0) return;
    const int n = topology().group_size(g);
    const int block_count = to_int(count, "reduce_scatter");
    to_int(count * n, "reduce_scatter");
    // MPI forbids overlapping buffers; callers may reduce in place (recv inside send), so the
    // result goes through staging then.
    const std::less<const float*> before;
    const bool overlaps = before(recv, send + count * n) && before(send, recv + count);
    float* out = overlaps ? staging(count) : recv;
    MPI_Request request;
    MPI_Ireduce_scatter_block(send, out, block_count, MPI_FLOAT, MPI_SUM, comm(g), &request);
    wait(request, Op::kReduceScatter, g);
    if (overlaps) std::memcpy(recv, out, static_cast<size_t>(count) * sizeof(float));
  }

  void do_all_gather(Group g, const float* send, float* recv, int64_t count) override {
    const int n = to_int(count, "all_gather");
    // The in-place form (send inside recv at this member's block) must use MPI_IN_PLACE.
    const bool in_place = send == recv + topology().group_rank(g) * count;
    MPI_Request request;
    MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm(g),
                   &request);
    wait(request, Op::kAllGather, g);
  }

  void do_send(const float* data, int64_t count, int dst_rank) override {
    reap_sends();
    PendingSend& s = sends_.emplace_back();
    s.data.assign(data, data + count);
    MPI_Isend(s.data.data(), to_int(count, "send"), MPI_FLOAT, dst_rank, kTag, world_, &s.request);
    reap_sends();
  }

  void do_recv(float* data, int64_t count, int src_rank) override {
    // Probe first, so a message of the wrong size is an error naming both sizes rather
    // than MPI's truncation abort.
    MPI_Status status;
    Backoff backoff(timeout());
    for (;;) {
      reap_sends();
      int ready = 0;
      MPI_Iprobe(src_rank, kTag, world_, &ready, &status);
      if (ready) break;
      check_failures();
      if (!backoff.pause()) timed_out(Op::kRecv, Group::kWorld);
    }
    int got = 0;
    MPI_Get_count(&status, MPI_FLOAT, &got);
    if (got != count) {
      throw CommError(fmt::format("rank {}: recv from rank {} expected {} floats, got {}",
                                  topology().rank, src_rank, count, got));
    }
    MPI_Request request;
    MPI_Irecv(data, got, MPI_FLOAT, src_rank, kTag, world_, &request);
    wait(request, Op::kRecv, Group::kWorld);
  }

  void do_broadcast(Group g, void* data, size_t bytes, int root) override {
    MPI_Request request;
    MPI_Ibcast(data, to_int(static_cast<int64_t>(bytes), "broadcast"), MPI_BYTE, root, comm(g),
               &request);
    wait(request, Op::kBroadcast, g);
  }

  void do_await_broadcast(void* data, size_t bytes, int root) override {
    MPI_Request request;
    MPI_Ibcast(data, to_int(static_cast<int64_t>(bytes), "broadcast"), MPI_BYTE, root, world_,
               &request);
    // No deadline: the wait is for work, not for a peer inside a step. Sleeping between tests
    // keeps an idle worker off the cores; a millisecond is noise next to a step.
    for (;;) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      reap_sends();
      check_failures();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void do_barrier(Group g) override {
    MPI_Request request;
    MPI_Ibarrier(comm(g), &request);
    wait(request, Op::kBarrier, g);
  }

 private:
  static constexpr int kTag = 0x4f;
  static constexpr int kFailureTag = 0x50;

  MPI_Comm comm(Group g) const {
    switch (g) {
      case Group::kTp:
        return tp_;
      case Group::kPp:
        return pp_;
      case Group::kWorld:
        break;
    }
    return world_;
  }

  // Scratch of the reductions that cannot work in the caller's buffers (padding, overlap);
  // grows to the largest and is reused (no allocation per step).
  float* staging(int64_t count) {
    if (staging_.size() < static_cast<size_t>(count)) staging_.resize(static_cast<size_t>(count));
    return staging_.data();
  }

  [[noreturn]] void timed_out(Op op, Group g) const {
    throw CommError(fmt::format("rank {}: {} on {} group timed out after {}", topology().rank,
                                op_name(op), group_name(g), format_timeout(timeout())));
  }

  void wait(MPI_Request& request, Op op, Group g) {
    Backoff backoff(timeout());
    wait(request, op, g, backoff);
  }

  void wait(MPI_Request& request, Op op, Group g, Backoff& backoff) {
    for (;;) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      reap_sends();
      check_failures();
      if (!backoff.pause()) {
        // The request cannot be cancelled (collectives) and its buffers belong to the
        // caller; the caller is expected to abort() the job, which ends every rank.
        timed_out(op, g);
      }
    }
  }

  // Throws the failure another rank announced, once it has arrived (and ever after).
  void check_failures() {
    if (received_failure_.empty()) {
      int ready = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kFailureTag, world_, &ready, &status);
      if (!ready) return;
      int length = 0;
      MPI_Get_count(&status, MPI_CHAR, &length);
      std::string message(static_cast<size_t>(std::max(length, 0)), '\0');
      MPI_Recv(message.data(), length, MPI_CHAR, status.MPI_SOURCE, kFailureTag, world_,
               MPI_STATUS_IGNORE);
      received_failure_ =
          message.empty() ? fmt::format("rank {} failed", status.MPI_SOURCE) : message;
    }
    throw CommError(fmt::format("rank {}: {}", topology().rank, received_failure_));
  }

  void reap_sends() {
    while (!sends_.empty()) {
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) return;
      sends_.pop_front();
    }
  }

  MPI_Comm world_ = MPI_COMM_NULL;
  MPI_Comm tp_ = MPI_COMM_NULL;
  MPI_Comm pp_ = MPI_COMM_NULL;
  std::deque<PendingSend> sends_;
  // announce_failure(): the message and its sends, kept alive until the process ends (they
  // are never waited for: the job is ending).
  bool announced_ = false;
  std::vector<char> failure_message_;
  std::deque<MPI_Request> failure_sends_;
  std::string received_failure_;
  std::vector<float> staging_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(int tp, int pp,
                                                    std::chrono::milliseconds timeout) {
  if (tp < 1 || pp < 1) fail_input("MPI world needs tp >= 1 and pp >= 1, got tp={} pp={}", tp, pp);
  ensure_mpi_initialized();
  int size = 0;
  int rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size != tp * pp) {
    fail_input("MPI world has {} processes but tp={} x pp={} needs {}", size, tp, pp, tp * pp);
  }
  return std::make_unique<MpiCommunicator>(Topology{tp, pp, rank}, timeout);
}

void abort_mpi_job(int code) {
  if (mpi_active()) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void finalize_mpi() {
  if (mpi_active()) MPI_Finalize();
}

int mpi_world_rank() {
  if (mpi_active()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  // Before MPI_Init the launcher's environment already says which rank this process is.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

}  // namespace handoff::comm
