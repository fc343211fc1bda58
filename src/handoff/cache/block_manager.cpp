#include "handoff/cache/block_manager.h"

#include "handoff/error.h"

namespace handoff::cache {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    fail("BlockManager: num_blocks ({}) and block_size ({}) must be positive", num_blocks,
         block_size);
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks; b-- > 0;) free_.push_back(static_cast<int32_t>(b));
}

int64_t BlockManager::blocks_needed(const BlockTable& table, int64_t num_tokens) const {
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  const int64_t have = static_cast<int64_t>(table.blocks_.size());
  return want > have ? want - have : 0;
}

void BlockManager::reserve(BlockTable& table, int64_t num_tokens) {
  const int64_t need = blocks_needed(table, num_tokens);
  if (need > free_blocks())
    fail("KV cache exhausted: {} more blocks needed for {} tokens, {} free of {}", need, num_tokens,
         free_blocks(), num_blocks_);
  for (int64_t i = 0; i < need; ++i) {
    table.blocks_.push_back(free_.back());
    free_.pop_back();
  }
}

void BlockManager::release(BlockTable& table) {
  for (auto it = table.blocks_.rbegin(); it != table.blocks_.rend(); ++it) free_.push_back(*it);
  table.blocks_.clear();
}

}  // namespace handoff::cache
