#include "handoff/cache/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>
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

std::vector<int32_t> iota(int32_t first, size_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A sequence that computed `tokens`: its blocks hold them and the full ones are registered.
BlockTable computed(BlockManager& m, const std::vector<int32_t>& tokens) {
  BlockTable t;
  std::vector<BlockCopy> copies;
  m.prepare_write(t, 0, static_cast<int64_t>(tokens.size()), copies);
  m.register_full_blocks(t, tokens, static_cast<int64_t>(tokens.size()));
  return t;
}

TEST(BlockManagerPrefix, HashesChainsOfFullBlocksAndLeavesTheLastTokenToCompute) {
  BlockManager m(16, 4, /*prefix_caching=*/true);
  const std::vector<int32_t> tokens = iota(100, 10);  // 2 full blocks + 2 tokens
  BlockTable a = computed(m, tokens);
  const std::vector<int32_t> a_blocks = a.blocks();
  m.release(a);
  EXPECT_EQ(m.used_blocks(), 0);    // kept for reuse, but not in use
  EXPECT_EQ(m.cached_blocks(), 2);  // the full blocks only; the partial one is plain free
  EXPECT_EQ(m.free_blocks(), 16);

  // Same first 8 tokens, different tail: both blocks, the very same ones.
  std::vector<int32_t> same8 = tokens;
  same8[9] = 7;
  BlockTable b;
  EXPECT_EQ(m.acquire_cached_prefix(b, same8), 8);
  EXPECT_EQ(b.blocks(), std::vector<int32_t>(a_blocks.begin(), a_blocks.begin() + 2));
  EXPECT_EQ(m.cached_blocks(), 0);
  EXPECT_EQ(m.used_blocks(), 2);
  m.release(b);

  // The second block differs in one token: only the first block.
  std::vector<int32_t> other = tokens;
  other[6] = 5;
  BlockTable c;
  EXPECT_EQ(m.acquire_cached_prefix(c, other), 4);
  m.release(c);
  // The second block's tokens after a different first block: the chain (parent hash) differs.
  std::vector<int32_t> new_parent = tokens;
  new_parent[0] = 1;
  BlockTable d;
  EXPECT_EQ(m.acquire_cached_prefix(d, new_parent), 0);
  EXPECT_TRUE(d.empty());
  // Exactly 8 tokens: the last must be computed for its logits, so only the first block.
  BlockTable e;
  EXPECT_EQ(m.acquire_cached_prefix(e, std::vector<int32_t>(tokens.begin(), tokens.begin() + 8)),
            4);
  m.release(e);
  // 9 tokens: both blocks, the ninth is computed.
  BlockTable f;
  EXPECT_EQ(m.acquire_cached_prefix(f, std::vector<int32_t>(tokens.begin(), tokens.begin() + 9)),
            8);
  m.release(f);
}

TEST(BlockManagerPrefix, ReferenceCountsAndUseCountOnlyReferencedBlocks) {
  BlockManager m(8, 4, true);
  const std::vector<int32_t> tokens = iota(1, 13);  // 3 full blocks + 1
  BlockTable a = computed(m, tokens);
  EXPECT_EQ(m.used_blocks(), 4);
  BlockTable b;
  EXPECT_EQ(m.acquire_cached_prefix(b, tokens), 12);  // shared while a still runs
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(m.ref_count(b.blocks()[i]), 2);
  EXPECT_EQ(m.used_blocks(), 4);  // shared blocks count once
  m.release(a);
  EXPECT_EQ(m.used_blocks(), 3);  // b still holds the 3 full blocks; a's partial one is free
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(m.ref_count(b.blocks()[i]), 1);
  EXPECT_EQ(m.cached_blocks(), 0);
  m.release(b);
  EXPECT_EQ(m.used_blocks(), 0);
  EXPECT_EQ(m.cached_blocks(), 3);
}

TEST(BlockManagerPrefix, EvictsLeastRecentlyUsedUnreferencedBlocksOnly) {
  BlockManager m(4, 2, true);
  const std::vector<int32_t> x = {1, 2, 3}, y = {4, 5, 6}, z = {7, 8, 9};
  BlockTable tx = computed(m, x), ty = computed(m, y);  // 2 blocks each, the first full
  m.release(tx);                                        // x's full block cached first (older) ...
  m.release(ty);                                        // ... then y's
  EXPECT_EQ(m.cached_blocks(), 2);
  EXPECT_EQ(m.free_blocks(), 4);
  // A hit refreshes x: now y's block is the least recently used.
  BlockTable hx;
  EXPECT_EQ(m.acquire_cached_prefix(hx, x), 2);
  m.release(hx);
  // z takes both plain free blocks first, then must evict one cached block: y's.
  BlockTable tz;
  std::vector<BlockCopy> copies;
  m.prepare_write(tz, 0, 6, copies);  // 3 blocks
  EXPECT_EQ(m.cached_blocks(), 1);    // x's
  BlockTable probe;
  EXPECT_EQ(m.acquire_cached_prefix(probe, y), 0);  // forgotten
  EXPECT_EQ(m.acquire_cached_prefix(probe, x), 2);  // kept
  // Every block referenced now: nothing may be evicted.
  EXPECT_EQ(m.free_blocks(), 0);
  EXPECT_FALSE(m.can_reserve(tz, 8));
  EXPECT_THROW(m.reserve(tz, 8), Error);
  EXPECT_EQ(m.ref_count(probe.blocks()[0]), 1);
  m.release(probe);
  m.release(tz);
  EXPECT_EQ(m.used_blocks(), 0);
}

TEST(BlockManagerPrefix, ForkSharesBlocksAndCopiesTheLastPartialBlockOnWrite) {
  BlockManager m(8, 4, true);
  const std::vector<int32_t> prompt = iota(10, 6);  // one full block + 2 tokens
  BlockTable leader = computed(m, prompt);
  BlockTable child;
  m.fork(leader, child);
  EXPECT_EQ(child.blocks(), leader.blocks());
  EXPECT_EQ(m.ref_count(leader.blocks()[1]), 2);
  EXPECT_EQ(m.used_blocks(), 2);
  // The child writes position 6, inside the shared partial block: it needs a copy.
  EXPECT_EQ(m.blocks_to_write(child, 6, 7), 1);
  std::vector<BlockCopy> copies;
  m.prepare_write(child, 6, 7, copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, leader.blocks()[1]);
  EXPECT_EQ(copies[0].dst, child.blocks()[1]);
  EXPECT_NE(child.blocks()[1], leader.blocks()[1]);
  EXPECT_EQ(child.blocks()[0], leader.blocks()[0]);  // the full block stays shared
  EXPECT_EQ(m.ref_count(leader.blocks()[0]), 2);
  EXPECT_EQ(m.ref_count(leader.blocks()[1]), 1);
  // The leader now owns its block alone: it writes in place.
  copies.clear();
  EXPECT_EQ(m.blocks_to_write(leader, 6, 7), 0);
  m.prepare_write(leader, 6, 7, copies);
  EXPECT_TRUE(copies.empty());
  // Writing across into a new block: a fresh one, no copy.
  m.prepare_write(child, 7, 9, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(child.blocks().size(), 3u);
  m.release(child);
  m.release(leader);
  EXPECT_EQ(m.used_blocks(), 0);
}

TEST(BlockManagerPrefix, ForkOfABlockAlignedPromptCopiesNothing) {
  BlockManager m(8, 4, true);
  BlockTable leader = computed(m, iota(1, 8)), child;
  m.fork(leader, child);
  std::vector<BlockCopy> copies;
  m.prepare_write(child, 8, 9, copies);
  m.prepare_write(leader, 8, 9, copies);
  EXPECT_TRUE(copies.empty());
  EXPECT_NE(child.blocks()[2], leader.blocks()[2]);
  EXPECT_EQ(m.used_blocks(), 4);
}

TEST(BlockManagerPrefix, TheSameTokensComputedTwiceRegisterOneBlock) {
  BlockManager m(8, 4, true);
  const std::vector<int32_t> tokens = iota(3, 5);
  BlockTable a = computed(m, tokens), b = computed(m, tokens);  // both computed (same step)
  EXPECT_NE(a.blocks()[0], b.blocks()[0]);
  m.release(b);  // its block was never registered: plain free, not cached
  EXPECT_EQ(m.cached_blocks(), 0);
  m.release(a);
  EXPECT_EQ(m.cached_blocks(), 1);
}

TEST(BlockManagerPrefix, OffFindsNothingAndKeepsNothing) {
  BlockManager m(8, 4);
  EXPECT_FALSE(m.prefix_caching());
  const std::vector<int32_t> tokens = iota(1, 9);
  BlockTable a = computed(m, tokens);
  m.release(a);
  EXPECT_EQ(m.cached_blocks(), 0);
  BlockTable b;
  EXPECT_EQ(m.acquire_cached_prefix(b, tokens), 0);
  EXPECT_TRUE(b.empty());
}

}  // namespace
}  // namespace handoff::cache
