// bf16 and FP8 weights against activations rounded to bf16 (--activations bf16, beyond
// kSmallMMax rows) with vdpbf16ps; FP8 blocks are first widened to bf16 (exact), a chunk at a
// time, as the FMA kernels' prefill path does. The packed bf16 layout already holds each row's k
// pairs in one 32-bit lane, as the instruction takes them, so one load of 16 rows × 2 k and one
// broadcast of x's pair feed one instruction (32 multiply-adds) where the exact path widens the
// load in two and issues two FMAs. On the 2-core Zen 5 it issues twice a cycle, as FMA does, so
// this doubles the multiply-add rate; on the Intel AVX-512 BF16 Xeon it did not pay
// (linear_avx512.cpp), so it runs on AMD only (cpu_features.h). Each lane adds k + 1's product,
// then k's, each rounded as an FMA would be (measured equal bit for bit to that pair of FMAs on Zen
// 5, 3.2M random lanes), where the FMA kernels add k's first: the sums differ from theirs in the
// last bits, by that order alone.
#include <immintrin.h>

#include <algorithm>

#include "handoff/ops/linear_kernels.h"
#include "handoff/ops/linear_lane_avx512.h"

namespace handoff::ops::detail::avx512bf16 {

namespace {

// K chunks and prefetch distances as the FMA kernels' (linear_kernels.h).
using avx512::kDecodePrefetchBytes;
using avx512::kKChunk;
using avx512::kPrefetchBytes;
// Rows of x per tile: NB × kRows accumulators (24 at NB = 4) beside NB weight vectors and the
// broadcast pair stay within the 32 registers.
constexpr int64_t kRows = 6;

// Block b's first NB lanes × MR rows of x over k in [k0, k1); y (+)= the sums, or with kScaled
// (a widened FP8 k block) y (+)= sum · the rows' scales.
template <int NB, int MR, bool kFromMemory, bool kScaled = false>
void tile(const PackedWeight& w, const uint16_t* xb, int64_t ldx, float* y, int64_t ldy, int64_t b,
          int64_t k0, int64_t k1, bool accumulate, const float* scales = nullptr) {
  constexpr int kAhead = kFromMemory ? kDecodePrefetchBytes : kPrefetchBytes;
  __m512 acc[NB][MR];
  for (int j = 0; j < NB; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = _mm512_setzero_ps();
  const auto* base = static_cast<const uint16_t*>(w.data) + b * w.k_pad * kRowBlock;
  for (int64_t k = k0; k < k1; k += 2) {
    __m512i wv[NB];
    for (int j = 0; j < NB; ++j) {
      const uint16_t* p = base + k * kRowBlock + j * 32;
      _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead, _MM_HINT_T0);
      wv[j] = _mm512_loadu_si512(p);
    }
    for (int i = 0; i < MR; ++i) {
      int pair;  // x's k and k + 1 as bf16, k's in the low half as in the weights' lanes
      __builtin_memcpy(&pair, xb + i * ldx + k, sizeof(pair));
      const __m512bh xv = reinterpret_cast<__m512bh>(_mm512_set1_epi32(pair));
      for (int j = 0; j < NB; ++j)
        acc[j][i] = _mm512_dpbf16_ps(acc[j][i], reinterpret_cast<__m512bh>(wv[j]), xv);
    }
  }
  for (int j = 0; j < NB; ++j) {
    const int64_t row0 = b * kRowBlock + j * kLane;
    const __mmask16 mask = lane_rows_mask(w, row0);
    for (int i = 0; i < MR; ++i)
      store_lane(y + i * ldy + row0, mask, acc[j][i], accumulate,
                 kScaled ? scales + j * kLane : nullptr);
  }
}

template <int NB, bool kFromMemory, bool kScaled = false>
void tile_mr(int64_t mr, const PackedWeight& w, const uint16_t* xb, int64_t ldx, float* y,
             int64_t ldy, int64_t b, int64_t k0, int64_t k1, bool accumulate,
             const float* scales = nullptr) {
  switch (mr) {
    case 1:
      return tile<NB, 1, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate, scales);
    case 2:
      return tile<NB, 2, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate, scales);
    case 3:
      return tile<NB, 3, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate, scales);
    case 4:
      return tile<NB, 4, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate, scales);
    case 5:
      return tile<NB, 5, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate, scales);
    default:
      return tile<NB, kRows, kFromMemory, kScaled>(w, xb, ldx, y, ldy, b, k0, k1, accumulate,
                                                   scales);
  }
}

// All m rows against block b: K in chunks, the first row tile of each bringing it from memory.
template <int NB>
void block_rows(const PackedWeight& w, const uint16_t* xb, int64_t m, float* y, int64_t ldy,
                int64_t b) {
  const int64_t ldx = w.k_pad;
  for (int64_t k0 = 0; k0 < ldx; k0 += kKChunk) {
    const int64_t k1 = std::min(ldx, k0 + kKChunk);
    for (int64_t i = 0; i < m; i += kRows) {
      const int64_t mr = std::min(kRows, m - i);
      if (i == 0) {
        tile_mr<NB, true>(mr, w, xb, ldx, y, ldy, b, k0, k1, k0 > 0);
      } else {
        tile_mr<NB, false>(mr, w, xb + i * ldx, ldx, y + i * ldy, ldy, b, k0, k1, k0 > 0);
      }
    }
  }
}

// FP8 block `part` (widened to bf16, unscaled) against all m rows, one k block at a time:
// y (+)= sum · scale, as the FMA kernels' widened path sums it (rows outside, k blocks inside).
template <int NB>
void widened_rows(const PackedWeight& part, const uint16_t* xb, int64_t ldx, int64_t m, float* y,
                  int64_t ldy, int64_t k_block, const float* scales, bool accumulate) {
  for (int64_t i = 0; i < m; i += kRows) {
    const int64_t mr = std::min(kRows, m - i);
    const float* s = scales;
    for (int64_t k0 = 0; k0 < part.k_pad; k0 += k_block, s += kRowBlock)
      tile_mr<NB, false, true>(mr, part, xb + i * ldx, ldx, y + i * ldy, ldy, 0, k0, k0 + k_block,
                               accumulate || k0 > 0, s);
  }
}

}  // namespace

void linear_fp8_dot(const PackedWeight& w, const uint16_t* xb, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1) {
  for_each_widened_fp8_chunk(
      w, b0, b1, [&](const PackedWeight& part, int64_t c0, int64_t row0, const float* scales) {
        const uint16_t* xc = xb + c0;
        float* yb = y + row0;
        const int64_t ldx = w.k_pad;
        switch (live_lanes(part, 0)) {
          case 1:
            widened_rows<1>(part, xc, ldx, m, yb, ldy, w.k_block, scales, c0 > 0);
            break;
          case 2:
            widened_rows<2>(part, xc, ldx, m, yb, ldy, w.k_block, scales, c0 > 0);
            break;
          case 3:
            widened_rows<3>(part, xc, ldx, m, yb, ldy, w.k_block, scales, c0 > 0);
            break;
          default:
            widened_rows<4>(part, xc, ldx, m, yb, ldy, w.k_block, scales, c0 > 0);
            break;
        }
      });
}

void linear_bf16_dot(const PackedWeight& w, const uint16_t* xb, int64_t m, float* y, int64_t ldy,
                     int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    switch (live_lanes(w, b)) {
      case 1:
        block_rows<1>(w, xb, m, y, ldy, b);
        break;
      case 2:
        block_rows<2>(w, xb, m, y, ldy, b);
        break;
      case 3:
        block_rows<3>(w, xb, m, y, ldy, b);
        break;
      default:
        block_rows<4>(w, xb, m, y, ldy, b);
        break;
    }
  }
}

}  // namespace handoff::ops::detail::avx512bf16
