// Ranks as threads of one process. Every collective is two rendezvous: after the first each
// member reads the others' buffers directly and computes its own result; the second keeps
// every buffer alive until all members are done reading it.
#include <algorithm>
#include <cstring>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/comm/local_world.h"

namespace handoff::comm {

namespace {

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(Topology topology, std::chrono::milliseconds timeout,
                    std::shared_ptr<LocalWorld> world)
      : Communicator(topology, timeout), world_(std::move(world)) {}

  void abort(const std::string& reason) override {
    world_->fail(fmt::format("rank {} failed: {}", topology().rank, reason));
  }

 protected:
  void do_all_reduce(Group g, float* data, int64_t count) override {
    auto slots = world_->arrive(topology(), g, {Op::kAllReduce, count, 0, data}, timeout());
    // The sum goes to scratch first because `data` is also an input the others are reading.
    float* sum = scratch(count);
    sum_in_rank_order(
        static_cast<int>(slots.size()), count,
        [&](int m) { return static_cast<const float*>(slots[static_cast<size_t>(m)].send); }, sum);
    world_->depart(topology(), g, Op::kAllReduce, timeout());
    std::copy(sum, sum + count, data);
  }

  void do_reduce_scatter(Group g, const float* send, float* recv, int64_t count) override {
    auto slots = world_->arrive(topology(), g, {Op::kReduceScatter, count, 0, send}, timeout());
    const int64_t offset = topology().group_rank(g) * count;
    float* sum = scratch(count);
    sum_in_rank_order(
        static_cast<int>(slots.size()), count,
        [&](int m) {
          return static_cast<const float*>(slots[static_cast<size_t>(m)].send) + offset;
        },
        sum);
    // `recv` may alias this member's own send buffer (in place), which others still read.
    world_->depart(topology(), g, Op::kReduceScatter, timeout());
    std::copy(sum, sum + count, recv);
  }

  void do_all_gather(Group g, const float* send, float* recv, int64_t count) override {
    auto slots = world_->arrive(topology(), g, {Op::kAllGather, count, 0, send}, timeout());
    for (size_t m = 0; m < slots.size(); ++m) {
      float* dst = recv + m * count;
      // In place (send == recv + rank * count) this member's block is already there, and
      // others are reading it: rewriting it would be a data race.
      if (dst == slots[m].send) continue;
      std::memcpy(dst, slots[m].send, count * sizeof(float));
    }
    world_->depart(topology(), g, Op::kAllGather, timeout());
  }

  void do_send(const float* data, int64_t count, int dst_rank) override {
    world_->post(topology(), dst_rank, data, count);
  }

  void do_recv(float* data, int64_t count, int src_rank) override {
    std::vector<float> message = world_->take(topology(), src_rank, timeout());
    if (static_cast<int64_t>(message.size()) != count) {
      throw CommError(fmt::format("rank {}: recv from rank {} expected {} floats, got {}",
                                  topology().rank, src_rank, count, message.size()));
    }
    std::copy(message.begin(), message.end(), data);
  }

  void do_broadcast(Group g, void* data, size_t bytes, int root) override {
    auto slots = world_->arrive(
        topology(), g, {Op::kBroadcast, static_cast<int64_t>(bytes), root, data}, timeout());
    if (topology().group_rank(g) != root) std::memcpy(data, slots[root].send, bytes);
    world_->depart(topology(), g, Op::kBroadcast, timeout());
  }

  void do_await_broadcast(void* data, size_t bytes, int root) override {
    // A wait without deadline: the world's failure still wakes it.
    constexpr std::chrono::milliseconds kForever = std::chrono::hours(24 * 365 * 100);
    auto slots =
        world_->arrive(topology(), Group::kWorld,
                       {Op::kBroadcast, static_cast<int64_t>(bytes), root, data}, kForever);
    if (topology().rank != root) std::memcpy(data, slots[root].send, bytes);
    world_->depart(topology(), Group::kWorld, Op::kBroadcast, timeout());
  }

  void do_barrier(Group g) override {
    // The second phase is still needed: a member released early could post its next call
    // before a slower one has checked this generation's slots.
    world_->arrive(topology(), g, {Op::kBarrier, 0, 0, nullptr}, timeout());
    world_->depart(topology(), g, Op::kBarrier, timeout());
  }

 private:
  // Grows to the largest collective and is reused: no allocation per step.
  float* scratch(int64_t count) {
    if (scratch_.size() < static_cast<size_t>(count)) scratch_.resize(static_cast<size_t>(count));
    return scratch_.data();
  }

  std::shared_ptr<LocalWorld> world_;
  std::vector<float> scratch_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_local_world(int tp, int pp,
                                                            std::chrono::milliseconds timeout) {
  if (tp < 1 || pp < 1)
    fail_input("local world needs tp >= 1 and pp >= 1, got tp={} pp={}", tp, pp);
  auto world = std::make_shared<LocalWorld>(tp, pp);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int rank = 0; rank < tp * pp; ++rank) {
    comms.push_back(std::make_unique<LocalCommunicator>(Topology{tp, pp, rank}, timeout, world));
  }
  return comms;
}

}  // namespace handoff::comm
