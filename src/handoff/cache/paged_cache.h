#pragma once
// The per-layer cache of every token: MLA's latent c_kv (kv_lora_rank) and roped k_pe
// (qk_rope_head_dim), and the DSA indexer's key (index_head_dim), in rows addressed by slot.
// Stored f32 so that cached and freshly computed values are bit-identical.
#include <cstdint>
#include <vector>

#include "handoff/tensor/tensor.h"

namespace handoff::cache {

struct CacheShape {
  int64_t num_layers = 0;
  int64_t kv_lora_rank = 0;
  int64_t rope_dim = 0;
  int64_t index_dim = 0;  // 0 without an indexer
  int64_t block_size = 16;
  int64_t num_blocks = 0;
};

class PagedCache {
 public:
  explicit PagedCache(const CacheShape& shape);

  const CacheShape& shape() const { return shape_; }
  int64_t num_slots() const { return shape_.block_size * shape_.num_blocks; }
  size_t bytes_per_token() const;

  float* ckv(int64_t layer, int64_t slot) { return row(ckv_, layer, slot, shape_.kv_lora_rank); }
  float* kpe(int64_t layer, int64_t slot) { return row(kpe_, layer, slot, shape_.rope_dim); }
  float* index_key(int64_t layer, int64_t slot) {
    return row(index_key_, layer, slot, shape_.index_dim);
  }
  // Copies every row of block `src` into block `dst`, in every layer (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

 private:
  float* row(std::vector<tensor::Tensor>& store, int64_t layer, int64_t slot, int64_t width) {
    return store[static_cast<size_t>(layer)].data<float>() + slot * width;
  }
  CacheShape shape_;
  std::vector<tensor::Tensor> ckv_, kpe_, index_key_;
};

}  // namespace handoff::cache
