// Topology arithmetic and the counting front door every backend shares: counts are recorded
// here, before the backend runs, so the accounting cannot drift between backends.
#include "handoff/comm/communicator.h"

namespace handoff::comm {

std::string_view op_name(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "all_reduce";
    case Op::kReduceScatter:
      return "reduce_scatter";
    case Op::kAllGather:
      return "all_gather";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kBarrier:
      return "barrier";
  }
  return "unknown";
}

std::string_view group_name(Group group) {
  switch (group) {
    case Group::kWorld:
      return "world";
    case Group::kTp:
      return "tp";
    case Group::kPp:
      return "pp";
  }
  return "unknown";
}

int Topology::group_size(Group g) const {
  switch (g) {
    case Group::kWorld:
      return world_size();
    case Group::kTp:
      return tp;
    case Group::kPp:
      return pp;
  }
  return 0;
}

int Topology::group_rank(Group g) const {
  switch (g) {
    case Group::kWorld:
      return rank;
    case Group::kTp:
      return tp_rank();
    case Group::kPp:
      return pp_rank();
  }
  return 0;
}

int Topology::world_rank_of(Group g, int group_rank) const {
  switch (g) {
    case Group::kWorld:
      return group_rank;
    case Group::kTp:
      return pp_rank() * tp + group_rank;
    case Group::kPp:
      return group_rank * tp + tp_rank();
  }
  return 0;
}

void Communicator::count(Op op, Group g, int64_t bytes) {
  CallStats& stats = counts_[{scope_, op, g}];
  stats.calls += 1;
  stats.bytes += bytes;
}

namespace {
constexpr int64_t kFloatBytes = static_cast<int64_t>(sizeof(float));
}  // namespace

void Communicator::all_reduce(Group g, float* data, int64_t count) {
  this->count(Op::kAllReduce, g, count * kFloatBytes);
  do_all_reduce(g, data, count);
}

void Communicator::reduce_scatter(Group g, const float* send, float* recv, int64_t count) {
  this->count(Op::kReduceScatter, g, topology_.group_size(g) * count * kFloatBytes);
  do_reduce_scatter(g, send, recv, count);
}

void Communicator::all_gather(Group g, const float* send, float* recv, int64_t count) {
  this->count(Op::kAllGather, g, count * kFloatBytes);
  do_all_gather(g, send, recv, count);
}

void Communicator::send(const float* data, int64_t count, int dst_rank) {
  if (dst_rank < 0 || dst_rank >= topology_.world_size() || dst_rank == topology_.rank) {
    fail_input("rank {}: send to invalid rank {} (world size {})", topology_.rank, dst_rank,
               topology_.world_size());
  }
  // A pipeline hand-off (same tp rank, another stage) is counted on the pp group.
  this->count(Op::kSend,
              dst_rank % topology_.tp == topology_.tp_rank() ? Group::kPp : Group::kWorld,
              count * kFloatBytes);
  do_send(data, count, dst_rank);
}

void Communicator::recv(float* data, int64_t count, int src_rank) {
  if (src_rank < 0 || src_rank >= topology_.world_size() || src_rank == topology_.rank) {
    fail_input("rank {}: recv from invalid rank {} (world size {})", topology_.rank, src_rank,
               topology_.world_size());
  }
  this->count(Op::kRecv,
              src_rank % topology_.tp == topology_.tp_rank() ? Group::kPp : Group::kWorld,
              count * kFloatBytes);
  do_recv(data, count, src_rank);
}

void Communicator::broadcast(Group g, void* data, size_t bytes, int root) {
  if (root < 0 || root >= topology_.group_size(g)) {
    fail_input("rank {}: broadcast on {} group from invalid root {} (group size {})",
               topology_.rank, group_name(g), root, topology_.group_size(g));
  }
  this->count(Op::kBroadcast, g, static_cast<int64_t>(bytes));
  do_broadcast(g, data, bytes, root);
}

void Communicator::await_broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= topology_.world_size()) {
    fail_input("rank {}: broadcast from invalid root {} (world size {})", topology_.rank, root,
               topology_.world_size());
  }
  this->count(Op::kBroadcast, Group::kWorld, static_cast<int64_t>(bytes));
  do_await_broadcast(data, bytes, root);
}

void Communicator::barrier(Group g) {
  this->count(Op::kBarrier, g, 0);
  do_barrier(g);
}

}  // namespace handoff::comm
