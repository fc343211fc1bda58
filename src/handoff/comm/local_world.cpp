#include "handoff/comm/local_world.h"

#include <fmt/format.h>

namespace handoff::comm {

std::string format_timeout(std::chrono::milliseconds timeout) {
  if (timeout.count() % 1000 == 0) return fmt::format("{} s", timeout.count() / 1000);
  return fmt::format("{} ms", timeout.count());
}

namespace {

std::string describe(const Contribution& c) {
  if (c.op == Op::kBarrier) return std::string(op_name(c.op));
  if (c.op == Op::kBroadcast) {
    return fmt::format("{} ({} bytes, root {})", op_name(c.op), c.count, c.root);
  }
  return fmt::format("{} (count {})", op_name(c.op), c.count);
}

bool same_call(const Contribution& a, const Contribution& b) {
  return a.op == b.op && a.count == b.count && a.root == b.root;
}

}  // namespace

LocalWorld::LocalWorld(int tp, int pp) : tp_(tp), pp_(pp) {
  auto add = [this](Group g, int index, int size) {
    Rendezvous& r = rendezvous_[{g, index}];
    r.size = size;
    r.present.assign(size, 0);
    r.slots.resize(size);
  };
  add(Group::kWorld, 0, tp * pp);
  for (int p = 0; p < pp; ++p) add(Group::kTp, p, tp);
  for (int t = 0; t < tp; ++t) add(Group::kPp, t, pp);
}

LocalWorld::Rendezvous& LocalWorld::rendezvous(const Topology& me, Group g) {
  int index = g == Group::kTp ? me.pp_rank() : g == Group::kPp ? me.tp_rank() : 0;
  return rendezvous_.at({g, index});
}

void LocalWorld::fail_locked(const std::string& message) {
  if (failed_) return;
  failed_ = true;
  failure_ = message;
  changed_.notify_all();
}

void LocalWorld::fail(const std::string& message) {
  std::lock_guard lock(mutex_);
  fail_locked(message);
}

void LocalWorld::check_alive() {
  std::lock_guard lock(mutex_);
  if (failed_) throw CommError(failure_);
}

void LocalWorld::meet(std::unique_lock<std::mutex>& lock, Rendezvous& r, const Topology& me,
                      Group g, Op op, std::chrono::milliseconds timeout, bool stop_on_failure) {
  const int member = me.group_rank(g);
  const uint64_t generation = r.generation;
  r.present[member] = 1;
  if (++r.arrived == r.size) {
    r.arrived = 0;
    std::fill(r.present.begin(), r.present.end(), 0);
    ++r.generation;
    changed_.notify_all();
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  changed_.wait_until(lock, deadline,
                      [&] { return r.generation != generation || (stop_on_failure && failed_); });
  // A completed rendezvous wins over a failure that came meanwhile: the others may already be
  // reading this member's buffers, so it must go on as they do.
  if (r.generation != generation) return;
  if (stop_on_failure && failed_) throw CommError(failure_);
  std::string missing;
  for (int i = 0; i < r.size; ++i) {
    if (r.present[i]) continue;
    missing += fmt::format("{}{}", missing.empty() ? "" : ", ", me.world_rank_of(g, i));
  }
  std::string message =
      fmt::format("rank {}: {} on {} group timed out after {} waiting for rank(s) {}", me.rank,
                  op_name(op), group_name(g), format_timeout(timeout), missing);
  // This group's rendezvous is now inconsistent (this member counted as arrived), so the
  // whole world stops rather than let a late member pair up with the wrong call.
  fail_locked(message);
  throw CommError(message);
}

std::vector<Contribution> LocalWorld::arrive(const Topology& me, Group g, const Contribution& mine,
                                             std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (failed_) throw CommError(failure_);
  Rendezvous& r = rendezvous(me, g);
  r.slots[me.group_rank(g)] = mine;
  meet(lock, r, me, g, mine.op, timeout, /*stop_on_failure=*/true);
  // Nobody can overwrite a slot before everyone passed depart(), so this copy is this
  // generation's, and every member sees the same one and reaches the same verdict.
  std::vector<Contribution> slots = r.slots;
  for (int i = 1; i < r.size; ++i) {
    if (same_call(slots[i], slots[0])) continue;
    std::string message = fmt::format(
        "rank {}: mismatched collectives on {} group: rank {} called {}, rank {} called {}",
        me.rank, group_name(g), me.world_rank_of(g, 0), describe(slots[0]), me.world_rank_of(g, i),
        describe(slots[i]));
    fail_locked(message);
    throw CommError(message);
  }
  return slots;
}

void LocalWorld::depart(const Topology& me, Group g, Op op, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  // Members between the phases only read memory and never wait, so they always arrive here;
  // a failure elsewhere must not release a member whose buffer is still being read.
  meet(lock, rendezvous(me, g), me, g, op, timeout, /*stop_on_failure=*/false);
}

void LocalWorld::post(const Topology& me, int dst, const float* data, int64_t count) {
  std::lock_guard lock(mutex_);
  if (failed_) throw CommError(failure_);
  mailboxes_[{me.rank, dst}].emplace_back(data, data + count);
  changed_.notify_all();
}

std::vector<float> LocalWorld::take(const Topology& me, int src,
                                    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  auto& queue = mailboxes_[{src, me.rank}];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  changed_.wait_until(lock, deadline, [&] { return failed_ || !queue.empty(); });
  if (failed_) throw CommError(failure_);
  if (queue.empty()) {
    std::string message =
        fmt::format("rank {}: recv on world group timed out after {} waiting for rank(s) {}",
                    me.rank, format_timeout(timeout), src);
    fail_locked(message);
    throw CommError(message);
  }
  std::vector<float> message = std::move(queue.front());
  queue.pop_front();
  return message;
}

}  // namespace handoff::comm
