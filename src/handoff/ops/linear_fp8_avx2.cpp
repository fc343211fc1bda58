// AVX2 small-M kernel over the packed FP8 layout of linear_kernels.h. e4m3 becomes f32 in
// registers with shifts and masks only: an e4m3 byte's sign, exponent and mantissa bits moved to
// f32's bit 31 and bits 26..20 are the f32 whose exponent and mantissa fields are the e4m3 ones,
// i.e. the e4m3 value times 2^-120 (subnormals included: both formats' subnormals scale alike).
// One 32-byte load holds 32 rows of one k with row 8r + j in byte r of 32-bit lane j (the
// packing's permutation), so four fixed byte positions give four vectors of 8 rows: 16-bit
// arithmetic shifts put the odd bytes' fields in place for both halves of a lane at once, a left
// shift first does the same for the even bytes; 9 integer ops per 32 weights and no shuffle, where
// widening to f16 and vcvtph2ps cost twice the ops on the ports the FMAs use. x is taken times
// 2^60 and the block scale times 2^60, so products of the smallest subnormal weights stay normal
// f32 and every product and sum is the unscaled one times a power of two (the same roundings).
// Each k block (the quantisation grid's 128 columns) is summed in registers, then
// y += partial · scale, so every weight byte is read once per row tile and a block's 64 × 128
// bytes stay in L1 while the row tiles pass over them. From 5 rows of x on (prefill), the
// conversion would be repeated per row tile, so a 64-row block is instead widened once per chunk
// of k blocks into unscaled bf16 (exact for e4m3) in a per-thread buffer that stays in L2, and
// the bf16 kernels of linear_avx2.cpp run on it, applying the block scales per k block as
// here; a partial block's rows left over (m mod 5) take the direct path.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "handoff/ops/cpu_features.h"
#include "handoff/ops/linear_kernels.h"

namespace handoff::ops::detail::avx2 {

namespace {

constexpr int64_t kHalves = kRowBlock / 32;  // 32-row halves per block
// Prefetch distance along a block's stream (64 k ahead): 1024 bytes were 16 k, ~50 ns of
// conversion, less than a DRAM access; 4096 took 0.95-0.99 of the time for experts from DRAM
// and 0.974 of an FP8 decode step (Zen 3, alternating in one process).
constexpr int kPrefetchBytes = 4096;
// Columns per dequantised chunk (rounded down to whole k blocks): 64 rows × 512 × 2 bytes =
// 64 KiB, an eighth of Zen 3's L2.
constexpr int64_t kDequantCols = 512;
// The 2^120 the f32 view drops, split between x (or the weight) and the scale.
constexpr float kHalfUnit = 0x1p60f;

// 32 e4m3 bytes of one k -> rows 8r..8r+7 in v[r], each 2^-120 times its value.
inline void widen32(const uint8_t* p, __m256 v[4]) {
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0x87F00000u));  // sign, bits 26..20
  const __m256i low = _mm256_set1_epi32(0x000087F0);                      // the same 16 bits lower
  const __m256i odd = _mm256_srai_epi16(y, 4);                            // bytes 1 and 3
  const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(y, 8), 4);     // bytes 0 and 2
  v[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(even, low), 16));
  v[1] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(odd, low), 16));
  v[2] = _mm256_castsi256_ps(_mm256_and_si256(even, high));
  v[3] = _mm256_castsi256_ps(_mm256_and_si256(odd, high));
}

__m256i row_mask(int64_t valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(valid, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Halves [h0, h0 + NH) of block b × MR rows of x over k block kb: y (+)= partial · scale. x is
// taken times 2^60 (scaled_rows).
template <int NH, int MR>
void tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
          int64_t h0, int64_t kb, bool accumulate) {
  __m256 acc[NH][4][MR];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < 4; ++r)
      for (int i = 0; i < MR; ++i) acc[h][r][i] = _mm256_setzero_ps();
  const int64_t k0 = kb * w.k_block, k1 = k0 + w.k_block;
  const auto* base = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock + h0 * 32;
  for (int64_t k = k0; k < k1; ++k) {
    const uint8_t* p = base + k * kRowBlock;
    if (h0 == 0) _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_broadcast_ss(x + i * ldx + k);
    for (int h = 0; h < NH; ++h) {
      __m256 v[4];
      widen32(p + h * 32, v);
      for (int r = 0; r < 4; ++r)
        for (int i = 0; i < MR; ++i) acc[h][r][i] = _mm256_fmadd_ps(v[r], xv[i], acc[h][r][i]);
    }
  }
  const int64_t nkb = w.k_pad / w.k_block;
  const float* scales = w.scales + (b * nkb + kb) * kRowBlock + h0 * 32;
  const __m256 unit = _mm256_set1_ps(kHalfUnit);
  // Unrolled so that every accumulator index is a constant: otherwise GCC keeps acc addressable
  // and stores all of it to the stack on every k (8 stores per 64 weights at NH = 2, MR = 1).
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const int64_t row0 = b * kRowBlock + (h0 + h) * 32 + r * 8;
      const int64_t valid = w.n - row0;
      if (valid <= 0) continue;
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(scales + h * 32 + r * 8), unit);
      const __m256i mask = row_mask(valid);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        float* out = y + i * ldy + row0;
        if (valid >= 8) {
          const __m256 prev = accumulate ? _mm256_loadu_ps(out) : _mm256_setzero_ps();
          _mm256_storeu_ps(out, _mm256_fmadd_ps(acc[h][r][i], s, prev));
        } else {
          const __m256 prev = accumulate ? _mm256_maskload_ps(out, mask) : _mm256_setzero_ps();
          _mm256_maskstore_ps(out, mask, _mm256_fmadd_ps(acc[h][r][i], s, prev));
        }
      }
    }
}

// MR rows of x against the 32-row halves of block b that hold rows, NH at a time.
template <int NH, int MR>
void halves(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
            int64_t kb, bool accumulate) {
  const int64_t live = std::min<int64_t>(kHalves, (w.n - b * kRowBlock + 31) / 32);
  for (int64_t h = 0; h < live; h += NH) {
    if (live - h >= NH)
      tile<NH, MR>(w, x, ldx, y, ldy, b, h, kb, accumulate);
    else
      tile<1, MR>(w, x, ldx, y, ldy, b, h, kb, accumulate);
  }
}

// Rows [i0, m) of x against block b, straight from the FP8 bytes, two rows at a time; x times
// 2^60 (scaled_rows).
void direct_rows(const PackedWeight& w, const float* x, int64_t ldx, int64_t i0, int64_t m,
                 float* y, int64_t ldy, int64_t b) {
  const int64_t nkb = w.k_pad / w.k_block;
  for (int64_t kb = 0; kb < nkb; ++kb)
    for (int64_t i = i0; i < m; i += 2) {
      const float* xi = x + i * ldx;
      float* yi = y + i * ldy;
      if (m - i == 1)
        halves<2, 1>(w, xi, ldx, yi, ldy, b, kb, kb > 0);
      else
        halves<1, 2>(w, xi, ldx, yi, ldy, b, kb, kb > 0);
    }
}

// Rows [i0, m) of x ([m][ldx]) times 2^60 in a per-thread buffer (rows before i0 left unset):
// once per call rather than a multiply per k and row in every tile (an exact scaling either way).
const float* scaled_rows(const float* x, int64_t ldx, int64_t i0, int64_t m) {
  thread_local std::vector<float> scaled;  // only grows: no allocation in steady state
  scaled.resize(static_cast<size_t>(m * ldx));
  for (int64_t j = i0 * ldx; j < m * ldx; ++j) scaled[static_cast<size_t>(j)] = x[j] * kHalfUnit;
  return scaled.data();
}

}  // namespace

// Columns [c0, c1) (even) of block b, unscaled, in the bf16 layout [K/2][64][2] of the bf16
// kernels: e4m3 values are exact in bf16 (the 2^-120 of widen32 undone by an exact multiply).
void dequantize_block_bf16(const PackedWeight& w, int64_t b, int64_t c0, int64_t c1,
                           uint16_t* out) {
  const auto* src = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock;
  const __m256 unscale = _mm256_set1_ps(0x1p120f);
  const bool non_temporal = cpu_is_amd();
  for (int64_t k = c0; k < c1; k += 2) {
    const uint8_t* p = src + k * kRowBlock;
    uint16_t* o = out + (k - c0) * kRowBlock;
    for (int l = 0; l < 2; ++l) {
      const char* line = reinterpret_cast<const char*>(p + l * kRowBlock);
      if (non_temporal) {
        _mm_prefetch(line + avx512::kFp8NonTemporalPrefetchBytes, _MM_HINT_NTA);
      } else {
        _mm_prefetch(line + avx512::kPrefetchBytes, _MM_HINT_T0);
        _mm_prefetch(line + avx512::kFp8L2PrefetchBytes, _MM_HINT_T1);
      }
    }
    for (int h = 0; h < kHalves; ++h) {
      __m256 even[4], odd[4];
      widen32(p + h * 32, even);
      widen32(p + kRowBlock + h * 32, odd);
      for (int r = 0; r < 4; ++r) {
        // Per 32-bit lane: the odd k's bf16 high, the even k's low. An e4m3 value as f32 has at
        // most 4 significant bits, so its low 16 bits are zero and need no mask.
        const __m256i e = _mm256_castps_si256(_mm256_mul_ps(even[r], unscale));
        const __m256i d = _mm256_castps_si256(_mm256_mul_ps(odd[r], unscale));
        const __m256i pair = _mm256_or_si256(d, _mm256_srli_epi32(e, 16));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 2 * (h * 32 + r * 8)), pair);
      }
    }
  }
}

void linear_small_m_fp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                        int64_t b0, int64_t b1) {
  const int64_t ldx = w.k_pad;
  const int64_t nkb = w.k_pad / w.k_block;
  // Whole k blocks per chunk.
  const int64_t chunk_cols = w.k_block * std::max<int64_t>(1, kDequantCols / w.k_block);
  // Only grows: no allocation in steady state.
  thread_local std::vector<uint16_t> chunk;
  const float* xs = nullptr;  // scaled_rows, from the first row the direct path takes
  int64_t xs_from = m;
  for (int64_t b = b0; b < b1; ++b) {
    int64_t done = 0;
    if (m >= kTallRowsBf16) {
      chunk.resize(static_cast<size_t>(chunk_cols * kRowBlock));
      const PackedWeight block{tensor::DType::kBF16,
                               std::min<int64_t>(kRowBlock, w.n - b * kRowBlock), 0, 1,
                               chunk.data()};
      for (int64_t c0 = 0; c0 < w.k_pad; c0 += chunk_cols) {
        const int64_t c1 = std::min(w.k_pad, c0 + chunk_cols);
        dequantize_block_bf16(w, b, c0, c1, chunk.data());
        PackedWeight part = block;
        part.k_pad = c1 - c0;
        done = linear_tall_bf16_scaled(part, x + c0, ldx, m, y + b * kRowBlock, ldy, w.k_block,
                                       w.scales + (b * nkb + c0 / w.k_block) * kRowBlock, c0 > 0);
      }
    }
    if (done == m) continue;
    if (done < xs_from) {
      xs = scaled_rows(x, ldx, done, m);
      xs_from = done;
    }
    direct_rows(w, xs, ldx, done, m, y, ldy, b);
  }
}

}  // namespace handoff::ops::detail::avx2
