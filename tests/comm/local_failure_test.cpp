// How the local backend fails: timeouts name the missing rank, an abort stops every rank, a
// mismatched call is an error naming both sides; none of them hangs.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "handoff/comm/communicator.h"
#include "run_ranks.h"

namespace handoff::comm {
namespace {

using namespace std::chrono_literals;
using testing::run_ranks;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(CommLocalFailure, TimeoutNamesMissingRank) {
  auto comms = make_local_world(4, 1, 200ms);
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(comms, [](Communicator& c) {
    if (c.topology().rank == 3) return;  // never calls
    std::vector<float> send(7, 1.0f), recv(28);
    c.all_gather(Group::kTp, send.data(), recv.data(), 7);
  });
  const double elapsed = seconds_since(start);
  EXPECT_GE(elapsed, 0.19);
  EXPECT_LT(elapsed, 2.0);
  EXPECT_EQ(errors[3], "");
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("all_gather on tp group timed out after 200 ms waiting for rank(s) 3"),
              std::string::npos)
        << errors[r];
  }
  // The world stays failed: a later call throws at once.
  std::vector<float> x(1);
  EXPECT_THROW(comms[3]->all_reduce(Group::kTp, x.data(), 1), CommError);
}

TEST(CommLocalFailure, TimeoutNamesEveryMissingRankInWorld) {
  auto comms = make_local_world(2, 2, 200ms);
  auto errors = run_ranks(comms, [](Communicator& c) {
    if (c.topology().rank >= 2) return;
    c.barrier(Group::kWorld);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(
        errors[r].find("barrier on world group timed out after 200 ms waiting for rank(s) 2, 3"),
        std::string::npos)
        << errors[r];
  }
}

TEST(CommLocalFailure, RecvTimeoutNamesSender) {
  auto comms = make_local_world(1, 2, 200ms);
  auto errors = run_ranks(comms, [](Communicator& c) {
    if (c.topology().rank == 0) return;
    std::vector<float> in(5);
    c.recv(in.data(), 5, 0);
  });
  EXPECT_EQ(errors[1], "rank 1: recv on world group timed out after 200 ms waiting for rank(s) 0");
}

TEST(CommLocalFailure, AbortWakesEveryWaiter) {
  auto comms = make_local_world(2, 2, 10s);
  const auto start = std::chrono::steady_clock::now();
  auto errors = run_ranks(comms, [](Communicator& c) {
    const int rank = c.topology().rank;
    if (rank == 1) {
      std::this_thread::sleep_for(50ms);
      c.abort("boom");
      throw CommError("rank 1 failed: boom");
    }
    if (rank == 3) {
      std::vector<float> in(4);
      c.recv(in.data(), 4, 1);  // waits on a mailbox, not a rendezvous
    } else {
      c.barrier(Group::kWorld);
    }
  });
  EXPECT_LT(seconds_since(start), 2.0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_NE(errors[r].find("rank 1 failed: boom"), std::string::npos) << "rank " << r;
  }
  // Every later call throws immediately.
  std::vector<float> x(1);
  EXPECT_THROW(comms[0]->all_reduce(Group::kTp, x.data(), 1), CommError);
  EXPECT_THROW(comms[2]->send(x.data(), 1, 0), CommError);
  EXPECT_THROW(comms[2]->barrier(Group::kPp), CommError);
}

TEST(CommLocalFailure, MismatchedOpNamesBoth) {
  auto comms = make_local_world(2, 1, 10s);
  auto errors = run_ranks(comms, [](Communicator& c) {
    std::vector<float> buf(14, 1.0f), out(14);
    if (c.topology().rank == 0) {
      c.all_reduce(Group::kTp, buf.data(), 7);
    } else {
      c.all_gather(Group::kTp, buf.data(), out.data(), 7);
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(
        errors[r].find("rank 0 called all_reduce (count 7), rank 1 called all_gather (count 7)"),
        std::string::npos)
        << errors[r];
  }
}

TEST(CommLocalFailure, MismatchedCountNamesBoth) {
  auto comms = make_local_world(1, 2, 10s);
  auto errors = run_ranks(comms, [](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    c.all_reduce(Group::kPp, buf.data(), c.topology().rank == 0 ? 8 : 7);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(
        errors[r].find("rank 0 called all_reduce (count 8), rank 1 called all_reduce (count 7)"),
        std::string::npos)
        << errors[r];
  }
}

TEST(CommLocalFailure, RecvCountMismatchIsAnError) {
  auto comms = make_local_world(1, 2, 10s);
  auto errors = run_ranks(comms, [](Communicator& c) {
    std::vector<float> buf(8, 1.0f);
    if (c.topology().rank == 0)
      c.send(buf.data(), 8, 1);
    else
      c.recv(buf.data(), 7, 0);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "rank 1: recv from rank 0 expected 7 floats, got 8");
}

TEST(CommLocalFailure, SingleMemberGroupIsLocalCopyAndCounted) {
  auto comms = make_local_world(1, 1, 200ms);
  Communicator& c = *comms[0];
  std::vector<float> a = {1, 2, 3};
  c.all_reduce(Group::kTp, a.data(), 3);
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  std::vector<float> out(3);
  c.all_gather(Group::kPp, a.data(), out.data(), 3);
  EXPECT_EQ(out, a);
  c.reduce_scatter(Group::kWorld, a.data(), out.data(), 3);
  EXPECT_EQ(out, a);
  c.barrier(Group::kWorld);
  EXPECT_EQ(c.counts().size(), 4u);
  EXPECT_EQ((c.counts().at({"step", Op::kAllReduce, Group::kTp}).bytes), 12);
}

}  // namespace
}  // namespace handoff::comm
