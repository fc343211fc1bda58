#include "handoff/cache/paged_cache.h"

#include <fmt/format.h>

#include <cstring>

#include "handoff/error.h"
#include "handoff/ops/fp8_blocks.h"
#include "handoff/ops/vector_ops.h"

namespace handoff::cache {

namespace {

void check_dtype(tensor::DType dtype, const char* what, bool fp8_allowed) {
  if (dtype == tensor::DType::kF32 || dtype == tensor::DType::kBF16) return;
  if (fp8_allowed && dtype == tensor::DType::kF8E4M3) return;
  fail("PagedCache: {} rows cannot be stored as {} (f32{})", what, tensor::dtype_name(dtype),
       fp8_allowed ? ", bf16 or f8e4m3" : " or bf16");
}

bool is_fp8(tensor::DType dtype) { return dtype == tensor::DType::kF8E4M3; }

size_t row_offset(const tensor::Tensor& store, int64_t slot, int64_t width) {
  return static_cast<size_t>(slot * width) * tensor::dtype_size(store.dtype());
}
char* row(tensor::Tensor& store, int64_t slot, int64_t width) {
  return static_cast<char*>(store.raw()) + row_offset(store, slot, width);
}
const char* row(const tensor::Tensor& store, int64_t slot, int64_t width) {
  return static_cast<const char*>(store.raw()) + row_offset(store, slot, width);
}

// Stored f32 or bf16 rows (a bf16 row's start is 2-byte aligned) as f32. bf16 goes through the
// vector kernel: every attention key row and indexer key passes here on each step.
void widen(tensor::DType dtype, const char* src, float* out, int64_t n) {
  if (dtype == tensor::DType::kBF16)
    ops::widen_bf16(reinterpret_cast<const uint16_t*>(src), out, n);
  else
    tensor::convert_to_f32(dtype, src, out, static_cast<size_t>(n));
}

}  // namespace

size_t cache_bytes_per_token(const CacheShape& s) {
  const size_t index_scales =
      is_fp8(s.index_dtype) ? static_cast<size_t>(ops::fp8_blocks_per_row(s.index_dim)) * 4 : 0;
  return static_cast<size_t>(s.num_layers) *
         (static_cast<size_t>(s.kv_lora_rank + s.rope_dim) * tensor::dtype_size(s.latent_dtype) +
          static_cast<size_t>(s.index_dim) * tensor::dtype_size(s.index_dtype) + index_scales);
}

PagedCache::PagedCache(const CacheShape& shape) : shape_(shape) {
  if (shape.num_layers < 0 || shape.block_size <= 0 || shape.num_blocks <= 0)
    fail("PagedCache: bad shape (layers {}, block size {}, blocks {})", shape.num_layers,
         shape.block_size, shape.num_blocks);
  check_dtype(shape.latent_dtype, "latent", false);
  check_dtype(shape.index_dtype, "indexer key", true);
  const int64_t slots = num_slots();
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    latent_.push_back(
        tensor::Tensor::zeros({slots, shape.kv_lora_rank + shape.rope_dim}, shape.latent_dtype));
    if (shape.index_dim > 0)
      index_key_.push_back(tensor::Tensor::zeros({slots, shape.index_dim}, shape.index_dtype));
    if (shape.index_dim > 0 && is_fp8(shape.index_dtype))
      index_scale_.push_back(tensor::Tensor::zeros(
          {slots, ops::fp8_blocks_per_row(shape.index_dim)}, tensor::DType::kF32));
  }
}

std::string PagedCache::summary() const {
  const size_t per_token = bytes_per_token();
  std::string index;
  if (shape_.index_dim > 0)
    index = ", indexer key " + std::string(tensor::dtype_name(shape_.index_dtype));
  return fmt::format("cache of {} tokens, {} bytes per token (latent {}{}), {:.1f} MiB",
                     num_slots(), per_token, tensor::dtype_name(shape_.latent_dtype), index,
                     static_cast<double>(per_token) * static_cast<double>(num_slots()) / (1 << 20));
}

void PagedCache::write_latent(int64_t layer, int64_t slot, const float* ckv, const float* kpe) {
  tensor::Tensor& store = latent_[static_cast<size_t>(layer)];
  char* dst = row(store, slot, shape_.kv_lora_rank + shape_.rope_dim);
  tensor::convert_from_f32(ckv, store.dtype(), dst, static_cast<size_t>(shape_.kv_lora_rank));
  tensor::convert_from_f32(
      kpe, store.dtype(),
      dst + static_cast<size_t>(shape_.kv_lora_rank) * tensor::dtype_size(store.dtype()),
      static_cast<size_t>(shape_.rope_dim));
}

void PagedCache::read_latent(int64_t layer, int64_t slot, float* out) const {
  const tensor::Tensor& store = latent_[static_cast<size_t>(layer)];
  const int64_t width = shape_.kv_lora_rank + shape_.rope_dim;
  widen(store.dtype(), row(store, slot, width), out, width);
}

void PagedCache::prefetch_latent(int64_t layer, int64_t slot) const {
  const tensor::Tensor& store = latent_[static_cast<size_t>(layer)];
  const int64_t width = shape_.kv_lora_rank + shape_.rope_dim;
  const char* begin = row(store, slot, width);
  const char* end = begin + row_offset(store, 1, width);
  for (const char* line = begin; line < end; line += 64) __builtin_prefetch(line, 0, 3);
}

void PagedCache::write_index_key(int64_t layer, int64_t slot, const float* key) {
  tensor::Tensor& store = index_key_[static_cast<size_t>(layer)];
  char* dst = row(store, slot, shape_.index_dim);
  if (is_fp8(store.dtype())) {
    tensor::Tensor& scales = index_scale_[static_cast<size_t>(layer)];
    ops::quantize_fp8_row(key, shape_.index_dim, reinterpret_cast<uint8_t*>(dst),
                          reinterpret_cast<float*>(row(scales, slot, scales.shape()[1])));
    return;
  }
  tensor::convert_from_f32(key, store.dtype(), dst, static_cast<size_t>(shape_.index_dim));
}

void PagedCache::read_index_key(int64_t layer, int64_t slot, float* out) const {
  read_index_keys(layer, slot, 1, out);
}

void PagedCache::read_index_keys(int64_t layer, int64_t first, int64_t count, float* out) const {
  const tensor::Tensor& store = index_key_[static_cast<size_t>(layer)];
  const char* src = row(store, first, shape_.index_dim);
  if (!is_fp8(store.dtype())) {
    widen(store.dtype(), src, out, count * shape_.index_dim);
    return;
  }
  const tensor::Tensor& scales = index_scale_[static_cast<size_t>(layer)];
  const int64_t blocks = scales.shape()[1];
  const auto* codes = reinterpret_cast<const uint8_t*>(src);
  const auto* scale = reinterpret_cast<const float*>(row(scales, first, blocks));
  for (int64_t i = 0; i < count; ++i)
    ops::dequantize_fp8_row(codes + i * shape_.index_dim, scale + i * blocks, shape_.index_dim,
                            out + i * shape_.index_dim);
}

const uint16_t* PagedCache::index_keys_bf16(int64_t layer, int64_t first) const {
  const tensor::Tensor& store = index_key_[static_cast<size_t>(layer)];
  if (store.dtype() != tensor::DType::kBF16) return nullptr;
  return reinterpret_cast<const uint16_t*>(row(store, first, shape_.index_dim));
}

void PagedCache::copy_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= shape_.num_blocks || dst >= shape_.num_blocks)
    fail("PagedCache::copy_block: block {} -> {} outside the cache of {} blocks", src, dst,
         shape_.num_blocks);
  const int64_t first_src = src * shape_.block_size, first_dst = dst * shape_.block_size;
  auto copy = [&](std::vector<tensor::Tensor>& store, int64_t width) {
    for (tensor::Tensor& layer : store)
      std::memcpy(row(layer, first_dst, width), row(layer, first_src, width),
                  row_offset(layer, shape_.block_size, width));
  };
  copy(latent_, shape_.kv_lora_rank + shape_.rope_dim);
  copy(index_key_, shape_.index_dim);
  copy(index_scale_, ops::fp8_blocks_per_row(shape_.index_dim));
}

}  // namespace handoff::cache
