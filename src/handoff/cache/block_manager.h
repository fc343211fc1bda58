#pragma once
// Hands out fixed-size cache blocks to sequences. A sequence's BlockTable maps its token
// positions to cache rows ("slots"); the forward writes and reads the cache through them.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace handoff::cache {

class BlockTable {
 public:
  BlockTable() = default;
  // A table that mirrors one kept elsewhere (a worker rank rebuilding rank 0's step).
  explicit BlockTable(std::vector<int32_t> blocks) : blocks_(std::move(blocks)) {}
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int64_t capacity(int64_t block_size) const {
    return static_cast<int64_t>(blocks_.size()) * block_size;
  }
  // The cache row of token position `pos`; pos must be below capacity.
  int64_t slot(int64_t pos, int64_t block_size) const {
    return static_cast<int64_t>(blocks_[static_cast<size_t>(pos / block_size)]) * block_size +
           pos % block_size;
  }

 private:
  friend class BlockManager;
  std::vector<int32_t> blocks_;
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  // Blocks a table needs to hold `num_tokens` tokens beyond what it has.
  int64_t blocks_needed(const BlockTable& table, int64_t num_tokens) const;
  bool can_reserve(const BlockTable& table, int64_t num_tokens) const {
    return blocks_needed(table, num_tokens) <= free_blocks();
  }
  // Grows `table` to hold `num_tokens` tokens; throws Error when blocks run out (the
  // scheduler checks can_reserve first).
  void reserve(BlockTable& table, int64_t num_tokens);
  // Returns every block of `table` to the pool and empties it.
  void release(BlockTable& table);

 private:
  int64_t num_blocks_;
  int64_t block_size_;
  std::vector<int32_t> free_;  // a stack: recently freed blocks are reused first
};

}  // namespace handoff::cache
