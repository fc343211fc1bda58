#include "handoff/cache/block_manager.h"

#include <gtest/gtest.h>

#include <set>

#include "handoff/error.h"

namespace handoff::cache {
namespace {

TEST(BlockManager, ReservesMapsSlotsAndReleases) {
  BlockManager manager(4, 3);
  BlockTable a, b;
  manager.reserve(a, 5);  // 2 blocks
  EXPECT_EQ(a.blocks().size(), 2u);
  EXPECT_EQ(manager.free_blocks(), 2);
  manager.reserve(a, 6);  // still 2 blocks
  EXPECT_EQ(manager.free_blocks(), 2);
  manager.reserve(b, 4);
  EXPECT_EQ(manager.free_blocks(), 0);
  std::set<int64_t> slots;
  for (int64_t p = 0; p < 6; ++p) slots.insert(a.slot(p, 3));
  for (int64_t p = 0; p < 4; ++p) slots.insert(b.slot(p, 3));
  EXPECT_EQ(slots.size(), 10u);  // no two positions share a cache row
  EXPECT_EQ(a.slot(4, 3), a.blocks()[1] * 3 + 1);
  EXPECT_FALSE(manager.can_reserve(a, 7));
  EXPECT_THROW(manager.reserve(a, 7), Error);
  manager.release(b);
  EXPECT_EQ(manager.free_blocks(), 2);
  EXPECT_TRUE(b.blocks().empty());
  manager.reserve(a, 12);
  EXPECT_EQ(manager.free_blocks(), 0);
}

}  // namespace
}  // namespace handoff::cache
