#pragma once
// The state that the threads of one local world share: a rendezvous per group, a mailbox per
// (src, dst) pair and the world's failure. One mutex and one condition variable guard all of
// it; collectives read each other's buffers outside the lock, between two rendezvous phases.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "handoff/comm/communicator.h"

namespace handoff::comm {

// What one member posts for a collective: enough to check that every member called the same
// thing, and the buffers the others read from.
struct Contribution {
  Op op = Op::kBarrier;
  int64_t count = 0;  // floats, or bytes for broadcast
  int root = 0;
  const void* send = nullptr;
};

class LocalWorld {
 public:
  LocalWorld(int tp, int pp);

  // Phase 1: posts `mine` and waits until every member of `me`'s group `g` has posted. Returns
  // every member's contribution in group-rank order, after checking they all match (a mismatch
  // fails the world). Throws CommError on timeout or when the world has failed.
  std::vector<Contribution> arrive(const Topology& me, Group g, const Contribution& mine,
                                   std::chrono::milliseconds timeout);
  // Phase 2: waits until every member has finished reading the buffers posted in phase 1, so
  // nobody returns and reuses its buffer while another member still reads it.
  void depart(const Topology& me, Group g, Op op, std::chrono::milliseconds timeout);

  // Point to point: messages are copied, so send never waits.
  void post(const Topology& me, int dst, const float* data, int64_t count);
  std::vector<float> take(const Topology& me, int src, std::chrono::milliseconds timeout);

  // Marks the world failed; every waiting and later call throws CommError(message). The first
  // failure wins: later ones are consequences of it.
  void fail(const std::string& message);
  // Throws CommError if the world has failed.
  void check_alive();

 private:
  struct Rendezvous {
    int size = 0;
    uint64_t generation = 0;  // completed rendezvous; consecutive collectives never mix
    int arrived = 0;
    std::vector<char> present;  // who arrived in the current generation (for timeout messages)
    std::vector<Contribution> slots;
  };
  Rendezvous& rendezvous(const Topology& me, Group g);
  // One generation of the group's rendezvous; on timeout fails the world naming who is missing.
  void meet(std::unique_lock<std::mutex>& lock, Rendezvous& r, const Topology& me, Group g, Op op,
            std::chrono::milliseconds timeout, bool stop_on_failure);
  void fail_locked(const std::string& message);

  int tp_;
  int pp_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool failed_ = false;
  std::string failure_;
  // (group, index of the group among its kind) -> rendezvous; a tp group is indexed by its
  // pp_rank, a pp group by its tp_rank.
  std::map<std::pair<Group, int>, Rendezvous> rendezvous_;
  std::map<std::pair<int, int>, std::deque<std::vector<float>>> mailboxes_;
};

// "60 s" or "200 ms": how long a wait lasted, as users read it in an error.
std::string format_timeout(std::chrono::milliseconds timeout);

}  // namespace handoff::comm
