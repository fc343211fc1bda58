#include <gtest/gtest.h>

#include "handoff/comm/communicator.h"

namespace handoff::comm {
namespace {

TEST(CommTopology, RankOrderAndGroups) {
  // tp=4, pp=2: rank 6 is stage 1, tp rank 2.
  Topology t{4, 2, 6};
  EXPECT_EQ(t.world_size(), 8);
  EXPECT_EQ(t.tp_rank(), 2);
  EXPECT_EQ(t.pp_rank(), 1);
  EXPECT_EQ(t.group_size(Group::kTp), 4);
  EXPECT_EQ(t.group_size(Group::kPp), 2);
  EXPECT_EQ(t.group_size(Group::kWorld), 8);
  EXPECT_EQ(t.group_rank(Group::kTp), 2);
  EXPECT_EQ(t.group_rank(Group::kPp), 1);
  EXPECT_EQ(t.group_rank(Group::kWorld), 6);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.world_rank_of(Group::kTp, i), 4 + i);
  EXPECT_EQ(t.world_rank_of(Group::kPp, 0), 2);
  EXPECT_EQ(t.world_rank_of(Group::kPp, 1), 6);
  EXPECT_EQ(t.world_rank_of(Group::kWorld, 5), 5);
}

TEST(CommTopology, Names) {
  EXPECT_EQ(op_name(Op::kAllReduce), "all_reduce");
  EXPECT_EQ(op_name(Op::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(op_name(Op::kAllGather), "all_gather");
  EXPECT_EQ(op_name(Op::kSend), "send");
  EXPECT_EQ(op_name(Op::kRecv), "recv");
  EXPECT_EQ(op_name(Op::kBroadcast), "broadcast");
  EXPECT_EQ(op_name(Op::kBarrier), "barrier");
  EXPECT_EQ(group_name(Group::kWorld), "world");
  EXPECT_EQ(group_name(Group::kTp), "tp");
  EXPECT_EQ(group_name(Group::kPp), "pp");
}

}  // namespace
}  // namespace handoff::comm
