#pragma once
// The per-layer cache of every token: MLA's latent c_kv (kv_lora_rank) and roped k_pe
// (qk_rope_head_dim), and the DSA indexer's key (index_head_dim), in rows addressed by slot.
// Rows are stored f32 (cached and freshly computed values then agree bit for bit: the golden
// tests' setting) or bf16 (half the bytes per token, and half the bytes a long-context decode
// step reads); the indexer key may also be fp8: e4m3 codes with a power-of-two scale per block
// of 128 values (ops/fp8_blocks.h, the reference's FP8 indexer cache). Values go in and out as
// f32; every reader, the token's own step included, sees the stored (rounded) value.
#include <cstdint>
#include <string>
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
  tensor::DType latent_dtype = tensor::DType::kF32;  // c_kv and k_pe
  tensor::DType index_dtype = tensor::DType::kF32;   // the indexer's key (f32, bf16 or f8e4m3)
};

// Bytes one token takes in every layer of a cache of this shape.
size_t cache_bytes_per_token(const CacheShape& shape);

class PagedCache {
 public:
  explicit PagedCache(const CacheShape& shape);

  const CacheShape& shape() const { return shape_; }
  int64_t num_slots() const { return shape_.block_size * shape_.num_blocks; }
  size_t bytes_per_token() const { return cache_bytes_per_token(shape_); }
  // "cache of N tokens, B bytes per token (latent bf16, indexer key f8_e4m3), M MiB": the load
  // log's line.
  std::string summary() const;

  void write_latent(int64_t layer, int64_t slot, const float* ckv, const float* kpe);
  // out: kv_lora_rank values of c_kv, then rope_dim of k_pe.
  void read_latent(int64_t layer, int64_t slot, float* out) const;
  // Asks the CPU to start loading that row: attention gathers rows chosen from the whole context,
  // so each read would otherwise wait on memory (11 % of a 64K prefill's time, measured).
  void prefetch_latent(int64_t layer, int64_t slot) const;
  void write_index_key(int64_t layer, int64_t slot, const float* key);
  void read_index_key(int64_t layer, int64_t slot, float* out) const;
  // The keys of slots [first, first + count), index_dim floats each, in one conversion: a
  // block's slots are consecutive, so a long-context scan converts whole blocks, not keys.
  void read_index_keys(int64_t layer, int64_t first, int64_t count, float* out) const;
  // The stored keys from slot `first` on (index_dim values per row) of a bf16 cache; nullptr for
  // another dtype. A decode step scores them as they are instead of converting them first.
  const uint16_t* index_keys_bf16(int64_t layer, int64_t first) const;
  // Copies every row of block `src` into block `dst`, in every layer (copy-on-write).
  void copy_block(int32_t src, int32_t dst);

 private:
  CacheShape shape_;
  // Per layer, [slots, kv_lora_rank + rope_dim] (c_kv then k_pe: one read per key) and
  // [slots, index_dim], with [slots, blocks] f32 scales beside an fp8 key.
  std::vector<tensor::Tensor> latent_, index_key_, index_scale_;
};

}  // namespace handoff::cache
