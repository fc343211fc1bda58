#include "handoff/cache/paged_cache.h"

#include <gtest/gtest.h>

#include "handoff/error.h"

namespace handoff::cache {
namespace {

TEST(PagedCache, CopyBlockCopiesEveryRowOfEveryLayerAndNothingElse) {
  CacheShape shape{/*num_layers=*/2, /*kv_lora_rank=*/3,
                   /*rope_dim=*/2,   /*index_dim=*/4,
                   /*block_size=*/2, /*num_blocks=*/3};
  PagedCache cache(shape);
  auto fill = [&](int64_t slot, float base) {
    for (int64_t l = 0; l < 2; ++l) {
      for (int i = 0; i < 3; ++i) cache.ckv(l, slot)[i] = base + static_cast<float>(10 * l + i);
      for (int i = 0; i < 2; ++i) cache.kpe(l, slot)[i] = -base - static_cast<float>(10 * l + i);
      for (int i = 0; i < 4; ++i) cache.index_key(l, slot)[i] = base * 2 + static_cast<float>(l);
    }
  };
  for (int64_t s = 0; s < 6; ++s) fill(s, 100.0f * static_cast<float>(s + 1));
  cache.copy_block(0, 2);  // rows 0, 1 -> rows 4, 5
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t r = 0; r < 2; ++r) {
      for (int i = 0; i < 3; ++i) EXPECT_EQ(cache.ckv(l, 4 + r)[i], cache.ckv(l, r)[i]);
      for (int i = 0; i < 2; ++i) EXPECT_EQ(cache.kpe(l, 4 + r)[i], cache.kpe(l, r)[i]);
      for (int i = 0; i < 4; ++i) EXPECT_EQ(cache.index_key(l, 4 + r)[i], cache.index_key(l, r)[i]);
    }
  EXPECT_EQ(cache.ckv(1, 2)[0], 300.0f + 10.0f);  // block 1 untouched
  EXPECT_EQ(cache.ckv(0, 0)[0], 100.0f);          // the source too
  EXPECT_THROW(cache.copy_block(0, 3), Error);
}

}  // namespace
}  // namespace handoff::cache
