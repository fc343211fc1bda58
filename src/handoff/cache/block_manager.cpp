#include "handoff/cache/block_manager.h"

#include <algorithm>

#include "handoff/error.h"

namespace handoff::cache {
namespace {

// The parent hash of a sequence's first block.
constexpr uint64_t kRootHash = 0x6a09e667f3bcc909ULL;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: every input bit reaches every output bit
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching)
    : num_blocks_(num_blocks), block_size_(block_size), prefix_caching_(prefix_caching) {
  if (num_blocks <= 0 || block_size <= 0 || num_blocks > INT32_MAX)
    fail("BlockManager: num_blocks ({}) and block_size ({}) must be positive", num_blocks,
         block_size);
  const auto n = static_cast<size_t>(num_blocks);
  refs_.assign(n, 0);
  free_.reserve(n);
  for (int64_t b = num_blocks; b-- > 0;) free_.push_back(static_cast<int32_t>(b));
  if (prefix_caching_) {
    lru_prev_.assign(n, kNone);
    lru_next_.assign(n, kNone);
    registered_.assign(n, false);
    hash_of_.assign(n, 0);
    parent_of_.assign(n, 0);
    tokens_of_.assign(n * static_cast<size_t>(block_size), 0);
    by_hash_.reserve(n);
  }
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
  for (int64_t i = 0; i < need; ++i) table.blocks_.push_back(take_block());
}

int64_t BlockManager::blocks_to_write(const BlockTable& table, int64_t from, int64_t to) const {
  if (to <= from) return 0;
  int64_t n = blocks_needed(table, to);
  const auto have = static_cast<int64_t>(table.blocks_.size());
  for (int64_t b = from / block_size_; b < std::min(have, (to - 1) / block_size_ + 1); ++b)
    if (refs_[static_cast<size_t>(table.blocks_[static_cast<size_t>(b)])] > 1) ++n;
  return n;
}

void BlockManager::prepare_write(BlockTable& table, int64_t from, int64_t to,
                                 std::vector<BlockCopy>& copies) {
  if (to <= from) return;
  const int64_t need = blocks_to_write(table, from, to);
  if (need > free_blocks())
    fail("KV cache exhausted: {} more blocks needed to write positions {}..{}, {} free of {}", need,
         from, to - 1, free_blocks(), num_blocks_);
  const auto have = static_cast<int64_t>(table.blocks_.size());
  for (int64_t b = from / block_size_; b < std::min(have, (to - 1) / block_size_ + 1); ++b) {
    int32_t& block = table.blocks_[static_cast<size_t>(b)];
    if (refs_[static_cast<size_t>(block)] <= 1) continue;
    const int32_t own = take_block();
    if (b * block_size_ < from) copies.push_back({block, own});  // rows before `from` are kept
    --refs_[static_cast<size_t>(block)];                         // still held by the others
    block = own;
  }
  reserve(table, to);
}

uint64_t BlockManager::chain_hash(uint64_t parent, std::span<const int32_t> block_tokens) const {
  uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t t : block_tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

int64_t BlockManager::acquire_cached_prefix(BlockTable& table, std::span<const int32_t> tokens) {
  if (!prefix_caching_ || !table.blocks_.empty() || tokens.empty()) return 0;
  const auto bs = static_cast<size_t>(block_size_);
  // Full blocks before the last token: that one is always computed, for its logits.
  const size_t max_blocks = (tokens.size() - 1) / bs;
  uint64_t parent = kRootHash;
  for (size_t b = 0; b < max_blocks; ++b) {
    const auto block_tokens = tokens.subspan(b * bs, bs);
    const uint64_t h = chain_hash(parent, block_tokens);
    const auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const int32_t block = it->second;
    const auto i = static_cast<size_t>(block);
    if (parent_of_[i] != parent ||
        !std::equal(block_tokens.begin(), block_tokens.end(), tokens_of_.begin() + i * bs))
      break;  // a hash collision: not our tokens
    if (refs_[i]++ == 0) lru_remove(block);
    table.blocks_.push_back(block);
    table.hashes_.push_back(h);
    parent = h;
  }
  return static_cast<int64_t>(table.blocks_.size()) * block_size_;
}

void BlockManager::register_full_blocks(BlockTable& table, std::span<const int32_t> tokens,
                                        int64_t num_computed) {
  if (!prefix_caching_) return;
  const auto bs = static_cast<size_t>(block_size_);
  const size_t full =
      std::min({static_cast<size_t>(num_computed) / bs, table.blocks_.size(), tokens.size() / bs});
  for (size_t b = table.hashes_.size(); b < full; ++b) {
    const uint64_t parent = b == 0 ? kRootHash : table.hashes_[b - 1];
    const auto block_tokens = tokens.subspan(b * bs, bs);
    const uint64_t h = chain_hash(parent, block_tokens);
    table.hashes_.push_back(h);
    const int32_t block = table.blocks_[b];
    const auto i = static_cast<size_t>(block);
    if (registered_[i] || by_hash_.count(h) != 0) continue;
    registered_[i] = true;
    hash_of_[i] = h;
    parent_of_[i] = parent;
    std::copy(block_tokens.begin(), block_tokens.end(), tokens_of_.begin() + i * bs);
    by_hash_.emplace(h, block);
  }
}

void BlockManager::fork(const BlockTable& src, BlockTable& dst) {
  if (!dst.blocks_.empty()) fail("BlockManager::fork: the destination table is not empty");
  dst.blocks_ = src.blocks_;
  dst.hashes_ = src.hashes_;
  for (int32_t b : dst.blocks_) ++refs_[static_cast<size_t>(b)];
}

void BlockManager::release(BlockTable& table) {
  for (auto it = table.blocks_.rbegin(); it != table.blocks_.rend(); ++it) {
    const auto i = static_cast<size_t>(*it);
    if (--refs_[i] > 0) continue;
    if (prefix_caching_ && registered_[i])
      lru_push_back(*it);
    else
      free_.push_back(*it);
  }
  table.blocks_.clear();
  table.hashes_.clear();
}

int32_t BlockManager::take_block() {
  int32_t block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else {
    if (lru_head_ == kNone) fail("BlockManager: no free block (check can_reserve first)");
    block = lru_head_;  // the least recently used cached block: its prefix is forgotten
    lru_remove(block);
    forget(block);
  }
  refs_[static_cast<size_t>(block)] = 1;
  return block;
}

void BlockManager::forget(int32_t block) {
  const auto i = static_cast<size_t>(block);
  if (!registered_[i]) return;
  by_hash_.erase(hash_of_[i]);
  registered_[i] = false;
}

void BlockManager::lru_push_back(int32_t block) {
  const auto i = static_cast<size_t>(block);
  lru_prev_[i] = lru_tail_;
  lru_next_[i] = kNone;
  if (lru_tail_ != kNone)
    lru_next_[static_cast<size_t>(lru_tail_)] = block;
  else
    lru_head_ = block;
  lru_tail_ = block;
  ++lru_size_;
}

void BlockManager::lru_remove(int32_t block) {
  const auto i = static_cast<size_t>(block);
  const int32_t prev = lru_prev_[i], next = lru_next_[i];
  if (prev != kNone)
    lru_next_[static_cast<size_t>(prev)] = next;
  else
    lru_head_ = next;
  if (next != kNone)
    lru_prev_[static_cast<size_t>(next)] = prev;
  else
    lru_tail_ = prev;
  lru_prev_[i] = lru_next_[i] = kNone;
  --lru_size_;
}

}  // namespace handoff::cache
