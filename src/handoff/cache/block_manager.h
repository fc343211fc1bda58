#pragma once
// Hands out fixed-size cache blocks to sequences. A sequence's BlockTable maps its token
// positions to cache rows ("slots"); the forward writes and reads the cache through them.
//
// Blocks are reference-counted: sequences forked from one request share their prompt's blocks,
// and with prefix caching a full block is registered under the hash of (its parent block's
// hash, its token ids), so a later sequence that begins with the same tokens takes a reference
// on it instead of computing it again. An unreferenced registered block stays in an LRU and is
// evicted (its hash forgotten) only when no never-used or unregistered free block is left.
// A sequence about to write into a block it shares gets a copy of its own first
// (copy-on-write); the copy is returned as a BlockCopy that every rank applies to its own cache
// before the step, so all ranks keep their parts under the same block ids.
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace handoff::cache {

// Copy every cache row of block `src` into block `dst` (all layers): a copy-on-write.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

class BlockTable {
 public:
  BlockTable() = default;
  // A table that mirrors one kept elsewhere (a worker rank rebuilding rank 0's step).
  explicit BlockTable(std::vector<int32_t> blocks) : blocks_(std::move(blocks)) {}
  const std::vector<int32_t>& blocks() const { return blocks_; }
  bool empty() const { return blocks_.empty(); }
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
  // Chain hashes of the leading full blocks already looked up or registered (prefix caching).
  std::vector<uint64_t> hashes_;
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching = false);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks no table references: never used, or kept only for prefix reuse (evictable).
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()) + lru_size_; }
  // Blocks at least one table references.
  int64_t used_blocks() const { return num_blocks_ - free_blocks(); }
  // Unreferenced blocks kept for prefix reuse.
  int64_t cached_blocks() const { return lru_size_; }
  int32_t ref_count(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

  // Blocks a table needs to hold `num_tokens` tokens beyond what it has.
  int64_t blocks_needed(const BlockTable& table, int64_t num_tokens) const;
  bool can_reserve(const BlockTable& table, int64_t num_tokens) const {
    return blocks_needed(table, num_tokens) <= free_blocks();
  }
  // Grows `table` to hold `num_tokens` tokens; throws Error when blocks run out (the
  // scheduler checks can_reserve first). Does not copy shared blocks: see prepare_write.
  void reserve(BlockTable& table, int64_t num_tokens);

  // Blocks that writing positions [from, to) of `table` takes: new ones past its end, and a
  // copy of each block in the range that another table shares.
  int64_t blocks_to_write(const BlockTable& table, int64_t from, int64_t to) const;
  bool can_write(const BlockTable& table, int64_t from, int64_t to) const {
    return blocks_to_write(table, from, to) <= free_blocks();
  }
  // Makes positions [from, to) of `table` its own: grows it, and replaces each shared block in
  // the range by a fresh one; when that block already holds rows (positions before `from`), a
  // copy is appended to `copies`. Throws Error when blocks run out (check can_write first).
  void prepare_write(BlockTable& table, int64_t from, int64_t to, std::vector<BlockCopy>& copies);

  // Prefix caching. On an empty table: takes references on the longest chain of registered
  // blocks holding the leading full blocks of `tokens`, leaving at least the last token to be
  // computed (its logits are needed). Returns the tokens those blocks hold; 0 when off.
  int64_t acquire_cached_prefix(BlockTable& table, std::span<const int32_t> tokens);
  // Registers the table's full blocks within the first `num_computed` positions of `tokens`
  // (the sequence's tokens; their cache rows are written) under their chain hashes. A block
  // whose hash is already registered (another sequence computed the same tokens) stays
  // unregistered. No-op when off.
  void register_full_blocks(BlockTable& table, std::span<const int32_t> tokens,
                            int64_t num_computed);

  // Makes empty `dst` share every block of `src` (a forked sequence).
  void fork(const BlockTable& src, BlockTable& dst);
  // Drops the table's reference on each of its blocks and empties it. A block nobody
  // references any more becomes free: registered ones go to the LRU (the table's last blocks
  // first, so its first blocks, the likelier shared prefix, are evicted last).
  void release(BlockTable& table);

 private:
  static constexpr int32_t kNone = -1;
  uint64_t chain_hash(uint64_t parent, std::span<const int32_t> block_tokens) const;
  int32_t take_block();  // a free block with one reference; evicts the LRU's oldest if needed
  void lru_push_back(int32_t block);
  void lru_remove(int32_t block);
  void forget(int32_t block);  // drops a registered block's hash

  int64_t num_blocks_;
  int64_t block_size_;
  bool prefix_caching_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // unreferenced, unregistered; a stack: recently freed first
  // Unreferenced registered blocks, least recently used at the head (intrusive list).
  std::vector<int32_t> lru_prev_, lru_next_;
  int32_t lru_head_ = kNone, lru_tail_ = kNone;
  int64_t lru_size_ = 0;
  // Registration: a hash names the block holding its tokens. The parent hash and the tokens
  // are kept to verify a hit, so a 64-bit hash collision cannot hand out the wrong rows.
  std::vector<bool> registered_;
  std::vector<uint64_t> hash_of_, parent_of_;
  std::vector<int32_t> tokens_of_;  // block_size ids per block
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace handoff::cache
