#pragma once
// Every collective of a run goes through a Communicator, which counts calls and bytes per
// (scope, op, group). The parallel plan predicts those counts; a test asserts prediction ==
// measurement. Every wait has a timeout, and a rank that fails makes every other rank stop with
// an error naming it instead of hanging.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "handoff/error.h"

namespace handoff::comm {

enum class Op { kAllReduce, kReduceScatter, kAllGather, kSend, kRecv, kBroadcast, kBarrier };
enum class Group { kWorld, kTp, kPp };

std::string_view op_name(Op op);           // "all_reduce", "reduce_scatter", "all_gather", ...
std::string_view group_name(Group group);  // "world", "tp", "pp"

// Rank order: world rank = pp_rank * tp + tp_rank. A tp group is the tp consecutive ranks of
// one pipeline stage; a pp group is the ranks with the same tp_rank, one per stage.
struct Topology {
  int tp = 1;
  int pp = 1;
  int rank = 0;
  int world_size() const { return tp * pp; }
  int tp_rank() const { return rank % tp; }
  int pp_rank() const { return rank / tp; }
  int group_size(Group g) const;
  int group_rank(Group g) const;
  // World rank of member `group_rank` of this rank's group `g`.
  int world_rank_of(Group g, int group_rank) const;
};

// A collective that timed out or was aborted by a failing rank; the message names the rank.
class CommError : public Error {
 public:
  using Error::Error;
};

struct CallStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  bool operator==(const CallStats&) const = default;
};
// (scope, op, group) -> stats. The scope is set by the caller (e.g. "layer 5", "stage 0 exit").
using CommCounts = std::map<std::tuple<std::string, Op, Group>, CallStats>;

// out[i] = Σ_m block_of(m)[i] over members m = 0 … members−1, added in that order, so every
// member that computes it gets the same bits (the local backend's all-reduce /
// reduce-scatter). `out` must not alias any block.
template <typename BlockOf>
void sum_in_rank_order(int members, int64_t count, const BlockOf& block_of, float* out) {
  const float* first = block_of(0);
  for (int64_t i = 0; i < count; ++i) out[i] = first[i];
  for (int m = 1; m < members; ++m) {
    const float* in = block_of(m);
    for (int64_t i = 0; i < count; ++i) out[i] += in[i];
  }
}

class Communicator {
 public:
  explicit Communicator(Topology topology, std::chrono::milliseconds timeout)
      : topology_(topology), timeout_(timeout) {}
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const Topology& topology() const { return topology_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Sum over the group, in place; every member ends with bit-identical values, so decisions
  // taken on the result (routing, top-k) never diverge between members. The order of addition
  // is the backend's: local adds in group-rank order; MPI sums each element once, on one
  // member, in the order of Open MPI's reduce-scatter algorithm, and copies it to the others.
  // The backends therefore agree to rounding, and bit for bit with two members (a + b = b + a).
  void all_reduce(Group g, float* data, int64_t count);
  // `send` holds group_size blocks of `count` floats; member i receives in `recv` the sum of
  // every member's block i (same order of addition as all_reduce). `recv` may lie inside
  // `send` (in place).
  void reduce_scatter(Group g, const float* send, float* recv, int64_t count);
  // Each member contributes `count` floats; `recv` gets group_size * count, in group-rank order.
  void all_gather(Group g, const float* send, float* recv, int64_t count);
  // Point to point between world ranks (pipeline hand-off).
  void send(const float* data, int64_t count, int dst_rank);
  void recv(float* data, int64_t count, int src_rank);
  // Copies `bytes` from member `root` of the group to every member.
  void broadcast(Group g, void* data, size_t bytes, int root);
  // A world broadcast whose receivers wait without deadline: an idle worker rank waiting for
  // its next step, which may be hours away. A failed world still ends the wait (CommError).
  // Counted as a broadcast.
  void await_broadcast(void* data, size_t bytes, int root);
  void barrier(Group g);

  // Called when this rank fails: every member's pending and future waits throw CommError naming
  // this rank and `reason`. Under MPI it ends the job at once (MPI_Abort).
  virtual void abort(const std::string& reason) = 0;
  // Tells every other rank that this one failed, without waiting and without ending the job:
  // their pending and later waits throw CommError naming this rank and `reason`, so a serving
  // rank 0 can answer its clients before the job ends. The local backend's abort() does
  // exactly this.
  virtual void announce_failure(const std::string& reason) { abort(reason); }

  // Accounting. Bytes = the payload this rank contributes (its send buffer): all_reduce and
  // all_gather `count` floats, reduce_scatter group_size * count floats, send `count` floats;
  // recv counts the floats it receives; broadcast the bytes (on every member), barrier 0.
  // send/recv between ranks of one pp group (a stage hand-off) count on group pp, else world.
  void set_scope(std::string scope) { scope_ = std::move(scope); }
  const std::string& scope() const { return scope_; }
  const CommCounts& counts() const { return counts_; }
  void reset_counts() { counts_.clear(); }
  void restore_counts(CommCounts counts) { counts_ = std::move(counts); }

 protected:
  virtual void do_all_reduce(Group g, float* data, int64_t count) = 0;
  virtual void do_reduce_scatter(Group g, const float* send, float* recv, int64_t count) = 0;
  virtual void do_all_gather(Group g, const float* send, float* recv, int64_t count) = 0;
  virtual void do_send(const float* data, int64_t count, int dst_rank) = 0;
  virtual void do_recv(float* data, int64_t count, int src_rank) = 0;
  virtual void do_broadcast(Group g, void* data, size_t bytes, int root) = 0;
  virtual void do_await_broadcast(void* data, size_t bytes, int root) = 0;
  virtual void do_barrier(Group g) = 0;

 private:
  void count(Op op, Group g, int64_t bytes);
  Topology topology_;
  std::chrono::milliseconds timeout_;
  std::string scope_ = "step";
  CommCounts counts_;
};

// Ranks as threads of one process, collectives through shared memory. Returns one communicator
// per world rank (index = world rank); each rank's thread uses its own.
std::vector<std::unique_ptr<Communicator>> make_local_world(int tp, int pp,
                                                            std::chrono::milliseconds timeout);

// One process per rank under mpirun (Open MPI). Initialises MPI on first use; the world size
// must equal tp * pp (InputError otherwise).
std::unique_ptr<Communicator> make_mpi_communicator(int tp, int pp,
                                                    std::chrono::milliseconds timeout);
// Finalises MPI if it was initialised (call once at exit of an MPI run).
void finalize_mpi();
// Ends every process of the MPI job (MPI_Abort) with `code`; for a rank that cannot finish the
// job's protocol (the other ranks are not where MPI_Finalize needs them).
[[noreturn]] void abort_mpi_job(int code);
// MPI world rank and size as seen before any communicator exists (1 process: 0 and 1).
int mpi_world_rank();

}  // namespace handoff::comm
