#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "handoff/comm/communicator.h"
#include "run_ranks.h"

namespace handoff::comm {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;

constexpr Group kGroups[] = {Group::kTp, Group::kPp, Group::kWorld};
constexpr int64_t kCounts[] = {1, 7, 33};

void expect_no_errors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

class CommLocal : public ::testing::TestWithParam<std::pair<int, int>> {
 protected:
  std::vector<std::unique_ptr<Communicator>> world(std::chrono::milliseconds timeout = 10s) {
    return make_local_world(GetParam().first, GetParam().second, timeout);
  }
};

TEST_P(CommLocal, AllReduceExact) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    for (Group g : kGroups) {
      for (int64_t n : kCounts) {
        std::vector<float> data(n);
        for (int64_t i = 0; i < n; ++i) data[i] = float((t.rank + 1) * 1000 + i);
        c.all_reduce(g, data.data(), n);
        const int size = t.group_size(g);
        for (int64_t i = 0; i < n; ++i) {
          float want = 0;
          for (int m = 0; m < size; ++m) want += float((t.world_rank_of(g, m) + 1) * 1000 + i);
          ASSERT_EQ(data[i], want) << group_name(g) << " n=" << n << " i=" << i;
        }
      }
    }
  }));
}

TEST_P(CommLocal, ReduceScatterExact) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    for (Group g : kGroups) {
      const int size = t.group_size(g);
      for (int64_t n : kCounts) {
        std::vector<float> send(size * n);
        for (int b = 0; b < size; ++b) {
          for (int64_t i = 0; i < n; ++i) send[b * n + i] = float((t.rank + 1) * 100 + b * 10 + i);
        }
        std::vector<float> recv(n, -1.0f);
        c.reduce_scatter(g, send.data(), recv.data(), n);
        const int me = t.group_rank(g);
        for (int64_t i = 0; i < n; ++i) {
          float want = 0;
          for (int m = 0; m < size; ++m) {
            want += float((t.world_rank_of(g, m) + 1) * 100 + me * 10 + i);
          }
          ASSERT_EQ(recv[i], want) << group_name(g) << " n=" << n << " i=" << i;
        }
      }
    }
  }));
}

TEST_P(CommLocal, AllGatherExact) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    for (Group g : kGroups) {
      const int size = t.group_size(g);
      for (int64_t n : kCounts) {
        std::vector<float> send(n);
        for (int64_t i = 0; i < n; ++i) send[i] = float(t.rank * 100 + i);
        std::vector<float> recv(size * n, -1.0f);
        c.all_gather(g, send.data(), recv.data(), n);
        for (int m = 0; m < size; ++m) {
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(recv[m * n + i], float(t.world_rank_of(g, m) * 100 + i))
                << group_name(g) << " n=" << n << " m=" << m;
          }
        }
        // In place: this member's block already sits in recv.
        std::vector<float> inplace(size * n, -1.0f);
        float* mine = inplace.data() + t.group_rank(g) * n;
        std::copy(send.begin(), send.end(), mine);
        c.all_gather(g, mine, inplace.data(), n);
        ASSERT_EQ(inplace, recv);
      }
    }
  }));
}

TEST_P(CommLocal, AllReduceBitIdenticalForRandomFloats) {
  auto comms = world();
  const int world_size = int(comms.size());
  constexpr int64_t n = 33 * 17;
  // results[group][rank]
  std::vector<std::vector<std::vector<float>>> results(3,
                                                       std::vector<std::vector<float>>(world_size));
  std::vector<std::vector<float>> inputs(world_size);
  for (int r = 0; r < world_size; ++r) {
    std::mt19937 rng(1234 + r);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    inputs[r].resize(n);
    for (auto& x : inputs[r]) x = dist(rng) * std::pow(10.0f, float(r % 5) - 2);
  }
  expect_no_errors(run_ranks(comms, [&](Communicator& c) {
    for (int gi = 0; gi < 3; ++gi) {
      std::vector<float> data = inputs[c.topology().rank];
      c.all_reduce(kGroups[gi], data.data(), n);
      results[gi][c.topology().rank] = data;
    }
  }));
  for (int gi = 0; gi < 3; ++gi) {
    for (int r = 0; r < world_size; ++r) {
      Topology t{GetParam().first, GetParam().second, r};
      Group g = kGroups[gi];
      // The documented order: group rank 0 first, then 1, 2, ...
      std::vector<float> want = inputs[t.world_rank_of(g, 0)];
      for (int m = 1; m < t.group_size(g); ++m) {
        for (int64_t i = 0; i < n; ++i) want[i] += inputs[t.world_rank_of(g, m)][i];
      }
      ASSERT_EQ(std::memcmp(results[gi][r].data(), want.data(), n * sizeof(float)), 0)
          << group_name(g) << " rank " << r;
    }
  }
}

TEST_P(CommLocal, SendRecvBetweenStages) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    constexpr int64_t n = 33;
    // Two messages in a row: FIFO order per (src, dst).
    if (t.pp_rank() + 1 < t.pp) {
      for (int k = 0; k < 2; ++k) {
        std::vector<float> out(n);
        for (int64_t i = 0; i < n; ++i) out[i] = float(t.rank * 1000 + k * 100 + i);
        c.send(out.data(), n, t.rank + t.tp);
      }
    }
    if (t.pp_rank() > 0) {
      for (int k = 0; k < 2; ++k) {
        std::vector<float> in(n, -1.0f);
        c.recv(in.data(), n, t.rank - t.tp);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(in[i], float((t.rank - t.tp) * 1000 + k * 100 + i));
        }
      }
    }
  }));
}

TEST_P(CommLocal, BroadcastFromEveryRoot) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    for (Group g : kGroups) {
      for (int root = 0; root < t.group_size(g); ++root) {
        char buf[13];
        std::memset(buf, t.group_rank(g) == root ? 'a' + root : '?', sizeof(buf));
        c.broadcast(g, buf, sizeof(buf), root);
        for (char ch : buf) ASSERT_EQ(ch, 'a' + root);
      }
      c.barrier(g);
    }
  }));
}

TEST_P(CommLocal, CountsPerScopeOpGroup) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    std::vector<float> buf(64 * 8, 1.0f);
    std::vector<float> out(64 * 8);
    c.set_scope("layer 0");
    c.all_reduce(Group::kTp, buf.data(), 7);
    c.all_reduce(Group::kTp, buf.data(), 7);
    c.reduce_scatter(Group::kTp, buf.data(), out.data(), 5);
    c.all_gather(Group::kPp, buf.data(), out.data(), 3);
    c.set_scope("stage exit");
    if (t.pp_rank() + 1 < t.pp) c.send(buf.data(), 11, t.rank + t.tp);
    if (t.pp_rank() > 0) c.recv(out.data(), 11, t.rank - t.tp);
    c.broadcast(Group::kWorld, buf.data(), 10, 0);
    c.barrier(Group::kWorld);

    CommCounts want;
    want[{"layer 0", Op::kAllReduce, Group::kTp}] = {2, 2 * 7 * 4};
    want[{"layer 0", Op::kReduceScatter, Group::kTp}] = {1, t.tp * 5 * 4};
    want[{"layer 0", Op::kAllGather, Group::kPp}] = {1, 3 * 4};
    if (t.pp_rank() + 1 < t.pp) want[{"stage exit", Op::kSend, Group::kPp}] = {1, 11 * 4};
    if (t.pp_rank() > 0) want[{"stage exit", Op::kRecv, Group::kPp}] = {1, 11 * 4};
    want[{"stage exit", Op::kBroadcast, Group::kWorld}] = {1, 10};
    want[{"stage exit", Op::kBarrier, Group::kWorld}] = {1, 0};
    const CommCounts& got = c.counts();
    ASSERT_EQ(got.size(), want.size());
    for (const auto& [key, stats] : want) {
      auto it = got.find(key);
      ASSERT_NE(it, got.end()) << std::get<0>(key) << " " << op_name(std::get<1>(key));
      EXPECT_EQ(it->second.calls, stats.calls) << op_name(std::get<1>(key));
      EXPECT_EQ(it->second.bytes, stats.bytes) << op_name(std::get<1>(key));
    }
    c.reset_counts();
    EXPECT_TRUE(c.counts().empty());
  }));
}

TEST_P(CommLocal, ThousandConsecutiveCollectivesDoNotMix) {
  auto comms = world();
  expect_no_errors(run_ranks(comms, [](Communicator& c) {
    const Topology& t = c.topology();
    const int tp = t.tp;
    for (int it = 0; it < 1000; ++it) {
      // Alternate groups and ops; the values depend on the iteration, so a member that read
      // another generation's buffer would produce a wrong value.
      float x = float((t.rank + 1) * (it % 97 + 1));
      c.all_reduce(Group::kWorld, &x, 1);
      float want = 0;
      for (int r = 0; r < t.world_size(); ++r) want += float((r + 1) * (it % 97 + 1));
      ASSERT_EQ(x, want) << "iteration " << it;
      float mine[2] = {float(it), float(t.rank)};
      std::vector<float> gathered(2 * tp);
      c.all_gather(Group::kTp, mine, gathered.data(), 2);
      for (int m = 0; m < tp; ++m) {
        ASSERT_EQ(gathered[2 * m], float(it));
        ASSERT_EQ(gathered[2 * m + 1], float(t.world_rank_of(Group::kTp, m)));
      }
      float y = float(it + t.rank);
      c.all_reduce(Group::kPp, &y, 1);
      float want_y = 0;
      for (int m = 0; m < t.pp; ++m) want_y += float(it + t.world_rank_of(Group::kPp, m));
      ASSERT_EQ(y, want_y) << "iteration " << it;
    }
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, CommLocal,
                         ::testing::Values(std::pair{1, 1}, std::pair{2, 1}, std::pair{4, 1},
                                           std::pair{2, 2}, std::pair{1, 3}, std::pair{4, 2}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) + "_pp" +
                                  std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace handoff::comm
