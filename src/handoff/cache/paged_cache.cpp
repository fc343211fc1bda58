#include "handoff/cache/paged_cache.h"

#include <cstring>

#include "handoff/error.h"

namespace handoff::cache {

PagedCache::PagedCache(const CacheShape& shape) : shape_(shape) {
  if (shape.num_layers < 0 || shape.block_size <= 0 || shape.num_blocks <= 0)
    fail("PagedCache: bad shape (layers {}, block size {}, blocks {})", shape.num_layers,
         shape.block_size, shape.num_blocks);
  const int64_t slots = num_slots();
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    ckv_.push_back(tensor::Tensor::zeros({slots, shape.kv_lora_rank}, tensor::DType::kF32));
    kpe_.push_back(tensor::Tensor::zeros({slots, shape.rope_dim}, tensor::DType::kF32));
    if (shape.index_dim > 0)
      index_key_.push_back(tensor::Tensor::zeros({slots, shape.index_dim}, tensor::DType::kF32));
  }
}

size_t PagedCache::bytes_per_token() const {
  return static_cast<size_t>(shape_.num_layers) *
         static_cast<size_t>(shape_.kv_lora_rank + shape_.rope_dim + shape_.index_dim) *
         sizeof(float);
}

void PagedCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= shape_.num_blocks || dst >= shape_.num_blocks)
    fail("PagedCache::copy_block: block {} -> {} outside the cache of {} blocks", src, dst,
         shape_.num_blocks);
  const int64_t first_src = src * shape_.block_size, first_dst = dst * shape_.block_size;
  auto copy = [&](std::vector<tensor::Tensor>& store, int64_t width) {
    const auto bytes = static_cast<size_t>(shape_.block_size * width) * sizeof(float);
    for (int64_t l = 0; l < static_cast<int64_t>(store.size()); ++l)
      std::memcpy(row(store, l, first_dst, width), row(store, l, first_src, width), bytes);
  };
  copy(ckv_, shape_.kv_lora_rank);
  copy(kpe_, shape_.rope_dim);
  copy(index_key_, shape_.index_dim);
}

}  // namespace handoff::cache
