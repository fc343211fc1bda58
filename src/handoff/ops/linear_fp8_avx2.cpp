// AVX2 + F16C small-M kernel over the packed FP8 layout of linear_kernels.h. e4m3 becomes f32 in
// registers without a table: sign-extending a byte to 16 bits, shifting it left by 7 and clearing
// bit 14 gives the f16 whose exponent and mantissa fields are the e4m3 ones (sign in bit 15), i.e.
// the e4m3 value times 2^-8 (subnormals included, as both formats' subnormals scale alike), which
// vcvtph2ps widens exactly; the 2^8 goes into the block scale. A 16-byte load is 16 rows of one
// k. Each k block (the quantisation grid's 128 columns) is summed in registers, then
// y += partial · scale, so every weight byte is read once per row tile and, for large M, a
// block's 64 × 128 bytes stay in L1 while all row tiles pass over them. From kDequantRows rows
// of x on, the conversion would be repeated per row tile, so a 64-row block is instead
// dequantised once per K chunk (value · scale, rounded once to f32) into a per-thread buffer
// that stays in L2, and the f32 kernel of linear_avx2.cpp runs on it.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "handoff/ops/linear_kernels.h"

namespace handoff::ops::detail::avx2 {

namespace {

constexpr int64_t kGroups = kRowBlock / 16;  // 16-row groups per block
constexpr int kPrefetchBytes = 1024;
// Rows of x from which a block is dequantised first (the conversion then costs a fraction of
// the FMAs instead of one per row tile).
constexpr int64_t kDequantRows = 4;
// Columns per dequantised chunk: 64 rows × 512 × 4 bytes = 128 KiB, a quarter of Zen 3's L2.
constexpr int64_t kDequantCols = 512;

// 16 e4m3 bytes -> rows 0-7 and 8-15 as f32, each 2^-8 times its value.
inline void widen16(const uint8_t* p, __m256& lo, __m256& hi) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256i h = _mm256_cvtepi8_epi16(b);
  h = _mm256_and_si256(_mm256_slli_epi16(h, 7), _mm256_set1_epi16(static_cast<short>(0xBFFF)));
  lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
  hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
}

__m256i row_mask(int64_t valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(valid, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Groups [g0, g0 + NG) of block b × MR rows of x over k block kb: y (+)= partial · scale.
template <int NG, int MR>
void tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
          int64_t g0, int64_t kb, bool accumulate) {
  __m256 acc[NG][2][MR];
  for (int j = 0; j < NG; ++j)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < MR; ++i) acc[j][h][i] = _mm256_setzero_ps();
  const int64_t k0 = kb * w.k_block, k1 = k0 + w.k_block;
  const auto* base = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock + g0 * 16;
  for (int64_t k = k0; k < k1; ++k) {
    const uint8_t* p = base + k * kRowBlock;
    if (g0 == 0) _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
    for (int j = 0; j < NG; ++j) {
      __m256 lo, hi;
      widen16(p + j * 16, lo, hi);
      for (int i = 0; i < MR; ++i) {
        const __m256 xv = _mm256_broadcast_ss(x + i * ldx + k);
        acc[j][0][i] = _mm256_fmadd_ps(lo, xv, acc[j][0][i]);
        acc[j][1][i] = _mm256_fmadd_ps(hi, xv, acc[j][1][i]);
      }
    }
  }
  const int64_t nkb = w.k_pad / w.k_block;
  const float* scales = w.scales + (b * nkb + kb) * kRowBlock + g0 * 16;
  const __m256 unit = _mm256_set1_ps(256.0f);  // the 2^8 the f16 view dropped
  for (int j = 0; j < NG; ++j)
    for (int h = 0; h < 2; ++h) {
      const int64_t row0 = b * kRowBlock + (g0 + j) * 16 + h * 8;
      const int64_t valid = w.n - row0;
      if (valid <= 0) continue;
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(scales + j * 16 + h * 8), unit);
      const __m256i mask = row_mask(valid);
      for (int i = 0; i < MR; ++i) {
        float* out = y + i * ldy + row0;
        if (valid >= 8) {
          const __m256 prev = accumulate ? _mm256_loadu_ps(out) : _mm256_setzero_ps();
          _mm256_storeu_ps(out, _mm256_fmadd_ps(acc[j][h][i], s, prev));
        } else {
          const __m256 prev = accumulate ? _mm256_maskload_ps(out, mask) : _mm256_setzero_ps();
          _mm256_maskstore_ps(out, mask, _mm256_fmadd_ps(acc[j][h][i], s, prev));
        }
      }
    }
}

// MR rows of x against the 16-row groups of block b that hold rows, NG at a time.
template <int NG, int MR>
void groups(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
            int64_t kb, bool accumulate) {
  const int64_t live = std::min<int64_t>(kGroups, (w.n - b * kRowBlock + 15) / 16);
  for (int64_t g = 0; g < live; g += NG) {
    switch (std::min<int64_t>(NG, live - g)) {
      case 1:
        tile<1, MR>(w, x, ldx, y, ldy, b, g, kb, accumulate);
        break;
      case 2:
        tile<2, MR>(w, x, ldx, y, ldy, b, g, kb, accumulate);
        break;
      case 3:
        if constexpr (NG >= 3) tile<3, MR>(w, x, ldx, y, ldy, b, g, kb, accumulate);
        break;
      default:
        if constexpr (NG >= 4) tile<4, MR>(w, x, ldx, y, ldy, b, g, kb, accumulate);
        break;
    }
  }
}

// Columns [c0, c1) of block b as f32 in the [K][64] layout of the f32 kernels: value · scale per
// row and k block.
void dequantize_block(const PackedWeight& w, int64_t b, int64_t c0, int64_t c1, float* out) {
  const int64_t nkb = w.k_pad / w.k_block;
  const auto* src = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock;
  const __m256 unit = _mm256_set1_ps(256.0f);
  for (int64_t kb = c0 / w.k_block; kb * w.k_block < c1; ++kb) {
    const float* scales = w.scales + (b * nkb + kb) * kRowBlock;
    __m256 s[8];
    for (int j = 0; j < 8; ++j) s[j] = _mm256_mul_ps(_mm256_loadu_ps(scales + j * 8), unit);
    const int64_t k0 = std::max(c0, kb * w.k_block), k1 = std::min(c1, (kb + 1) * w.k_block);
    for (int64_t k = k0; k < k1; ++k) {
      const uint8_t* p = src + k * kRowBlock;
      float* o = out + (k - c0) * kRowBlock;
      for (int g = 0; g < 4; ++g) {
        __m256 lo, hi;
        widen16(p + g * 16, lo, hi);
        _mm256_storeu_ps(o + g * 16, _mm256_mul_ps(lo, s[2 * g]));
        _mm256_storeu_ps(o + g * 16 + 8, _mm256_mul_ps(hi, s[2 * g + 1]));
      }
    }
  }
}

}  // namespace

void linear_small_m_fp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                        int64_t b0, int64_t b1) {
  const int64_t ldx = w.k_pad;
  const int64_t nkb = w.k_pad / w.k_block;
  if (m >= kDequantRows) {
    // Grows to the largest K once per thread; no allocation in steady state.
    // A fixed size: no allocation after a thread's first call.
    thread_local std::vector<float> chunk(static_cast<size_t>(kDequantCols * kRowBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t rows = std::min<int64_t>(kRowBlock, w.n - b * kRowBlock);
      for (int64_t c0 = 0; c0 < w.k_pad; c0 += kDequantCols) {
        const int64_t c1 = std::min(w.k_pad, c0 + kDequantCols);
        dequantize_block(w, b, c0, c1, chunk.data());
        // c1 - c0 is a multiple of the f32 layout's K alignment (16): k_pad and kDequantCols are.
        const PackedWeight f32{tensor::DType::kF32, rows, c1 - c0, 1, chunk.data()};
        linear_small_m_f32_into(f32, x + c0, ldx, m, y + b * kRowBlock, ldy, c0 > 0);
      }
    }
    return;
  }
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t kb = 0; kb < nkb; ++kb)
      for (int64_t i = 0; i < m; i += 3) {
        const float* xi = x + i * ldx;
        float* yi = y + i * ldy;
        switch (std::min<int64_t>(3, m - i)) {
          case 1:
            groups<4, 1>(w, xi, ldx, yi, ldy, b, kb, kb > 0);
            break;
          case 2:
            groups<2, 2>(w, xi, ldx, yi, ldy, b, kb, kb > 0);
            break;
          default:
            groups<2, 3>(w, xi, ldx, yi, ldy, b, kb, kb > 0);
            break;
        }
      }
}

}  // namespace handoff::ops::detail::avx2
