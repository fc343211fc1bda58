// Cache rows go in and out as f32: stored exactly at f32, rounded to nearest even at bf16, and
// the sizes the plan and the load log report follow the storage types.
#include "handoff/cache/paged_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/fp8_blocks.h"

namespace handoff::cache {
namespace {

CacheShape shape(tensor::DType latent, tensor::DType index) {
  CacheShape s;
  s.num_layers = 2;
  s.kv_lora_rank = 24;
  s.rope_dim = 8;
  s.index_dim = 16;
  s.block_size = 4;
  s.num_blocks = 3;
  s.latent_dtype = latent;
  s.index_dtype = index;
  return s;
}

std::vector<float> values(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TEST(PagedCache, RowsRoundTripExactlyAtF32AndRoundedAtBf16) {
  for (auto dtype : {tensor::DType::kF32, tensor::DType::kBF16}) {
    PagedCache cache(shape(dtype, dtype));
    const auto ckv = values(24, 1), kpe = values(8, 2), key = values(16, 3);
    cache.write_latent(1, 7, ckv.data(), kpe.data());
    cache.write_index_key(1, 7, key.data());
    std::vector<float> latent(32), index(16), other(32);
    cache.read_latent(1, 7, latent.data());
    cache.read_index_key(1, 7, index.data());
    cache.read_latent(0, 7, other.data());  // another layer's row is untouched
    auto stored = [&](float f) {
      return dtype == tensor::DType::kF32 ? f : tensor::bf16_to_f32(tensor::f32_to_bf16(f));
    };
    for (size_t i = 0; i < 24; ++i) EXPECT_EQ(latent[i], stored(ckv[i])) << i;
    for (size_t i = 0; i < 8; ++i) EXPECT_EQ(latent[24 + i], stored(kpe[i])) << i;
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(index[i], stored(key[i])) << i;
    for (float f : other) EXPECT_EQ(f, 0.0f);
    if (dtype == tensor::DType::kBF16) {
      EXPECT_NE(latent[0], ckv[0]);  // really rounded
    }
  }
}

TEST(PagedCache, BytesPerTokenFollowTheStorageTypes) {
  EXPECT_EQ(PagedCache(shape(tensor::DType::kF32, tensor::DType::kF32)).bytes_per_token(),
            2u * (32 + 16) * 4);
  EXPECT_EQ(PagedCache(shape(tensor::DType::kBF16, tensor::DType::kF32)).bytes_per_token(),
            2u * (32 * 2 + 16 * 4));
  EXPECT_EQ(PagedCache(shape(tensor::DType::kBF16, tensor::DType::kBF16)).bytes_per_token(),
            2u * (32 + 16) * 2);
  // An fp8 indexer key: one byte per value and one f32 scale per block (16 values: one block).
  EXPECT_EQ(PagedCache(shape(tensor::DType::kBF16, tensor::DType::kF8E4M3)).bytes_per_token(),
            2u * (32 * 2 + 16 + 4));
  EXPECT_THROW(PagedCache(shape(tensor::DType::kF8E4M3, tensor::DType::kF32)), Error);
}

TEST(PagedCache, Fp8IndexKeysAreStoredAsE4m3WithABlockScale) {
  PagedCache cache(shape(tensor::DType::kF32, tensor::DType::kF8E4M3));
  const auto key = values(16, 5), other = values(16, 6);
  cache.write_index_key(1, 7, key.data());
  cache.write_index_key(1, 6, other.data());
  std::vector<uint8_t> codes(16);
  float scale = 0;
  ops::quantize_fp8_row(key.data(), 16, codes.data(), &scale);
  std::vector<float> got(16);
  cache.read_index_key(1, 7, got.data());
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(got[i], tensor::f8e4m3_to_f32(codes[i]) * scale) << i;
    EXPECT_NEAR(got[i], key[i], std::fabs(key[i]) / 16 + scale / 512) << i;
  }
  cache.copy_block(1, 2);  // slots 4..7 -> 8..11, scales included
  std::vector<float> copied(16);
  cache.read_index_key(1, 11, copied.data());
  EXPECT_EQ(copied, got);
}

TEST(PagedCache, ReadingARunOfKeysEqualsReadingEachKey) {
  for (auto dtype : {tensor::DType::kF32, tensor::DType::kBF16, tensor::DType::kF8E4M3}) {
    PagedCache cache(shape(tensor::DType::kF32, dtype));
    for (int64_t slot = 0; slot < 12; ++slot) {
      const auto key = values(16, static_cast<unsigned>(40 + slot));
      cache.write_index_key(1, slot, key.data());
    }
    std::vector<float> run(7 * 16), one(16);
    cache.read_index_keys(1, 3, 7, run.data());  // slots 3..9, across blocks
    for (int64_t i = 0; i < 7; ++i) {
      cache.read_index_key(1, 3 + i, one.data());
      EXPECT_EQ(std::vector<float>(run.begin() + i * 16, run.begin() + (i + 1) * 16), one)
          << tensor::dtype_name(dtype) << " slot " << 3 + i;
    }
  }
}

TEST(PagedCache, CopyBlockCopiesEveryRowOfEveryLayerAndNothingElse) {
  for (auto dtype : {tensor::DType::kF32, tensor::DType::kBF16}) {
    PagedCache cache(shape(dtype, dtype));  // 3 blocks of 4 slots
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t slot = 0; slot < 12; ++slot) {
        const auto v = values(48, static_cast<unsigned>(100 * l + slot));
        cache.write_latent(l, slot, v.data(), v.data() + 24);
        cache.write_index_key(l, slot, v.data() + 32);
      }
    auto latent = [&](int64_t l, int64_t slot) {
      std::vector<float> out(32);
      cache.read_latent(l, slot, out.data());
      return out;
    };
    auto key = [&](int64_t l, int64_t slot) {
      std::vector<float> out(16);
      cache.read_index_key(l, slot, out.data());
      return out;
    };
    const auto untouched = latent(1, 4), source = latent(0, 0);
    cache.copy_block(0, 2);  // slots 0..3 -> 8..11
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t r = 0; r < 4; ++r) {
        EXPECT_EQ(latent(l, 8 + r), latent(l, r));
        EXPECT_EQ(key(l, 8 + r), key(l, r));
      }
    EXPECT_EQ(latent(1, 4), untouched);  // block 1
    EXPECT_EQ(latent(0, 0), source);     // and the source
    EXPECT_THROW(cache.copy_block(0, 3), Error);
  }
}

}  // namespace
}  // namespace handoff::cache
