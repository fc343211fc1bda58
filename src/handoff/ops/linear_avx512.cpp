// AVX-512 kernels over the packed layout described in linear_kernels.h, for every M: decode's
// few rows stream each weight byte once; prefill's many rows go in tiles of 4 over K chunks that
// stay in L2. bf16 is widened to f32 in registers (a shift or a mask per 16 rows × 2 k) and
// multiplied with f32 FMAs, so activations stay exact; on the AVX-512 BF16 Xeon this was
// measured on, that ran prefill shapes at ~120 GFLOP/s per core against 34-36 for vdpbf16ps on
// hi + lo halves of x, and 65-75 for vdpbf16ps (or oneDNN's bf16 matmul) on rounded x. On AMD,
// where vdpbf16ps issues as often as FMA, rounded x goes to linear_avx512bf16.cpp instead.
//
// FP8: the AVX2 kernel's conversion (linear_fp8_avx2.cpp) on 64-byte lines. A line holds a
// block's 64 rows of one k, each 32-row half with row 8q + j in byte q of 32-bit lane j, so the
// same shifts and masks give four vectors v[q] of rows 8q..8q + 7 (lanes 0-7) and
// 32 + 8q..32 + 8q + 7 (lanes 8-15), each 2^-120 times its value; x and the scale are each taken
// times 2^60. Every row sums a k block in one FMA chain in k order, then y (+)= partial · scale,
// exactly as the AVX2 kernels do, so results are the same bit for bit whichever path a row takes.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "handoff/ops/cpu_features.h"
#include "handoff/ops/linear_kernels.h"
#include "handoff/ops/linear_lane_avx512.h"

namespace handoff::ops::detail::avx512 {

namespace {

// Where a tile's weights come from. kL2: a K chunk an earlier row tile brought in. kMemory: the
// first row tile of a chunk the later ones re-read from L2. kMemoryOnce: the only pass over
// them (decode's M <= 4 over the whole K), which on AMD are prefetched non-temporally, so that
// the weight stream does not evict from L2 what the step reads again soon (the activations,
// the attention's cache rows; the last-level cache keeps nothing across the stream either way,
// docs/performance.md): in alternating blocks of 25 decode steps in one process, bf16 steps on
// bench-moe took 0.96-1.11x less time than with T0 prefetches (median 1.08 over 12 pairs; an
// A/A run moves ±2.5 %), batch-16 steps the same (2-core Zen 5, 2026-12-06). Elsewhere single
// passes run as kMemory.
enum class Source { kL2, kMemory, kMemoryOnce };

// Largest unit (a 64-row block's k chunk) whose successor is prefetched while several row tiles
// walk it: bf16's 128 KiB units (f32's are 256 KiB and run without).
constexpr int64_t kRunAheadMaxBytes = 128 << 10;

// When several row tiles walk one unit (x beyond 4 rows), all but the first find it in L2 and
// would leave the memory idle while they compute. Instead every k step of every tile prefetches
// a share of the next unit (the memory right after it), so the tiles together fetch it once,
// spread over their time, as the AVX2 kernels do (linear_avx2.cpp). A batch-16 step against a
// batch-1 step beside it: 3.13-3.41 × against 3.03-3.25 × without in two series, T1 hints no
// better (bench-moe, depth 64, 2 threads, Zen 5, alternating processes); prefill the same.
struct RunAhead {
  const char* next = nullptr;
  int64_t bytes = 0;     // of the next unit
  int64_t pos = 0;       // bytes of it prefetched so far
  int64_t per_step = 0;  // bytes a k pair prefetches: the unit over all tiles' k pairs

  void step() {
    for (int64_t l = 0; l < per_step && pos + l < bytes; l += 64)
      _mm_prefetch(next + pos + l, _MM_HINT_T0);
    pos += per_step;
  }
};

// The first NB lanes (16 rows each) of block b × MR input rows; NB < 4 only for the last block
// of a matrix whose N leaves lanes unused, which are then not read at all. For tiny NB·MR, k
// goes round kAcc sets of accumulators (k mod 2 or k mod 4), so enough FMA chains are in flight
// that a late line stalls one chain, not the stream: decode's M = 1 tile on 2 chain sets streamed
// 36-42 GB/s (2 threads, Zen 5) where a pure load loop read 48-57; on 4 sets 47-52. Covers k in
// [k0, k1); when `accumulate`, adds to what y already holds (a previous k chunk). kScaled (the
// widened FP8 blocks): [k0, k1) is one k block, summed in one chain in k order as every FP8 path
// sums it, and y (+)= sum · scales[row in block]. kSource: where the weights come from
// (Source below), which sets how they are prefetched.
template <bool kBF16, int NB, int MR, bool kScaled = false, Source kSource = Source::kL2>
void tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
          int64_t k0, int64_t k1, bool accumulate, const float* scales = nullptr,
          RunAhead* ahead = nullptr) {
  constexpr int kAcc = kScaled ? 1 : NB * MR <= 4 ? 4 : NB * MR <= 8 ? 2 : 1;
  // k per step: two per 64-byte bf16 load; the 4-set tile takes two loads per lane a step.
  constexpr int kStep = kAcc == 4 ? 4 : 2;
  // Tiles that stream from DRAM want the prefetch further ahead than the ones that re-read
  // their K chunk from L2; a single pass takes its lines non-temporally.
  constexpr int kAhead = kSource == Source::kL2 ? kPrefetchBytes : kDecodePrefetchBytes;
  constexpr auto kHint = kSource == Source::kMemoryOnce ? _MM_HINT_NTA : _MM_HINT_T0;
  __m512 acc[kAcc][NB][MR];
  for (int s = 0; s < kAcc; ++s)
    for (int j = 0; j < NB; ++j)
      for (int i = 0; i < MR; ++i) acc[s][j][i] = _mm512_setzero_ps();

  const int64_t kp = w.k_pad;
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  RunAhead a = ahead != nullptr ? *ahead : RunAhead{};  // a local copy stays in registers
  for (int64_t k = k0; k < k1; k += kStep) {
    for (int half = 0; half < kStep / 2; ++half) {
      if (a.per_step > 0) a.step();  // once per k pair
      const int64_t kk = k + 2 * half;
      __m512 w0[NB], w1[NB];
      for (int j = 0; j < NB; ++j) {
        if constexpr (kBF16) {
          const auto* p = static_cast<const uint16_t*>(w.data) + (b * kp + kk) * kRowBlock + j * 32;
          _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead, kHint);
          const __m512i v = _mm512_loadu_si512(p);
          w0[j] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
          w1[j] = _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask));
        } else {
          const auto* p = static_cast<const float*>(w.data) + (b * kp + kk) * kRowBlock + j * kLane;
          _mm_prefetch(reinterpret_cast<const char*>(p) + kAhead, kHint);
          _mm_prefetch(reinterpret_cast<const char*>(p + kRowBlock) + kAhead, kHint);
          w0[j] = _mm512_loadu_ps(p);
          w1[j] = _mm512_loadu_ps(p + kRowBlock);
        }
      }
      // Sets: k mod kAcc (kAcc 2 or 4), or all k in one (kAcc 1).
      constexpr int kOdd = kAcc == 1 ? 0 : 1;
      const int s0 = kAcc == 4 ? 2 * half : 0;
      for (int i = 0; i < MR; ++i) {
        const __m512 x0 = _mm512_set1_ps(x[i * ldx + kk]);
        const __m512 x1 = _mm512_set1_ps(x[i * ldx + kk + 1]);
        for (int j = 0; j < NB; ++j) {
          acc[s0][j][i] = _mm512_fmadd_ps(w0[j], x0, acc[s0][j][i]);
          acc[s0 + kOdd][j][i] = _mm512_fmadd_ps(w1[j], x1, acc[s0 + kOdd][j][i]);
        }
      }
    }
  }
  if (ahead != nullptr) *ahead = a;
  for (int j = 0; j < NB; ++j) {
    const int64_t row0 = b * kRowBlock + j * kLane;
    const __mmask16 mask = lane_rows_mask(w, row0);
    for (int i = 0; i < MR; ++i) {
      __m512 r = acc[0][j][i];
      if constexpr (kAcc == 2) r = _mm512_add_ps(r, acc[1][j][i]);
      if constexpr (kAcc == 4)
        r = _mm512_add_ps(_mm512_add_ps(r, acc[1][j][i]),
                          _mm512_add_ps(acc[2][j][i], acc[3][j][i]));
      store_lane(y + i * ldy + row0, mask, r, accumulate, kScaled ? scales + j * kLane : nullptr);
    }
  }
}

// tile() with MR = mr (1 to 4) chosen at run time.
template <bool kBF16, int NB, Source kSource>
void tile_mr(int64_t mr, const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy,
             int64_t b, int64_t k0, int64_t k1, bool accumulate, RunAhead* ahead = nullptr) {
  switch (mr) {
    case 1:
      tile<kBF16, NB, 1, false, kSource>(w, x, ldx, y, ldy, b, k0, k1, accumulate, nullptr, ahead);
      break;
    case 2:
      tile<kBF16, NB, 2, false, kSource>(w, x, ldx, y, ldy, b, k0, k1, accumulate, nullptr, ahead);
      break;
    case 3:
      tile<kBF16, NB, 3, false, kSource>(w, x, ldx, y, ldy, b, k0, k1, accumulate, nullptr, ahead);
      break;
    default:
      tile<kBF16, NB, 4, false, kSource>(w, x, ldx, y, ldy, b, k0, k1, accumulate, nullptr, ahead);
      break;
  }
}

// kOnce: the Source of a single pass (M <= 4), kMemoryOnce on AMD, else kMemory.
template <bool kBF16, int NB, Source kOnce>
void tile_rows(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy, int64_t b) {
  // Rows of x beyond the first four re-read this block's weights. K is cut into chunks whose
  // slice of the block fits in L2, so the re-reads hit L2 instead of going back to memory.
  const int64_t ldx = w.k_pad;
  const int64_t chunk = m <= 4 ? ldx : kKChunk;
  for (int64_t k0 = 0; k0 < ldx; k0 += chunk) {
    const int64_t k1 = std::min(ldx, k0 + chunk);
    // The first row tile brings the chunk from memory; the others re-read it from L2.
    if (m <= 4) {
      tile_mr<kBF16, NB, kOnce>(m, w, x, ldx, y, ldy, b, k0, k1, k0 > 0);
      continue;
    }
    // The next unit is the memory right after this one, up to the matrix's end: it may pass
    // the thread's last block, as the pool deals each thread a contiguous run of blocks and a
    // routed expert's claims follow one another.
    constexpr int64_t kRowBytes = kRowBlock * (kBF16 ? 2 : 4);  // of one k in a block
    const char* data = static_cast<const char*>(w.data);
    const int64_t unit_bytes = (k1 - k0) * kRowBytes;
    RunAhead ahead;
    if (unit_bytes <= kRunAheadMaxBytes) {
      ahead.next = data + (b * ldx + k1) * kRowBytes;
      ahead.bytes = std::min<int64_t>(unit_bytes, data + w.n_blocks * ldx * kRowBytes - ahead.next);
      const int64_t steps = (m + 3) / 4 * ((k1 - k0) / 2);  // k pairs of all row tiles
      ahead.per_step = (ahead.bytes + steps - 1) / steps;
    }
    tile_mr<kBF16, NB, Source::kMemory>(4, w, x, ldx, y, ldy, b, k0, k1, k0 > 0, &ahead);
    for (int64_t i = 4; i < m; i += 4)
      tile_mr<kBF16, NB, Source::kL2>(std::min<int64_t>(4, m - i), w, x + i * ldx, ldx, y + i * ldy,
                                      ldy, b, k0, k1, k0 > 0, &ahead);
  }
}

template <bool kBF16, Source kOnce>
void run(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy, int64_t b0,
         int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    switch (live_lanes(w, b)) {
      case 1:
        tile_rows<kBF16, 1, kOnce>(w, x, m, y, ldy, b);
        break;
      case 2:
        tile_rows<kBF16, 2, kOnce>(w, x, m, y, ldy, b);
        break;
      case 3:
        tile_rows<kBF16, 3, kOnce>(w, x, m, y, ldy, b);
        break;
      default:
        tile_rows<kBF16, 4, kOnce>(w, x, m, y, ldy, b);
        break;
    }
  }
}

// ---- FP8 ----

constexpr float kHalfUnit = 0x1p60f;  // the 2^120 the f32 view drops, split between x and scale

// One k's line of 64 e4m3 bytes -> v[q] as described at the top.
inline void widen64(const uint8_t* p, __m512 v[4]) {
  const __m512i y = _mm512_loadu_si512(p);
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0x87F00000u));  // sign, bits 26..20
  const __m512i low = _mm512_set1_epi32(0x000087F0);                      // the same 16 bits lower
  const __m512i odd = _mm512_srai_epi16(y, 4);                            // bytes 1 and 3
  const __m512i even = _mm512_srai_epi16(_mm512_slli_epi16(y, 8), 4);     // bytes 0 and 2
  v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_and_si512(even, low), 16));
  v[1] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_and_si512(odd, low), 16));
  v[2] = _mm512_castsi512_ps(_mm512_and_si512(even, high));
  v[3] = _mm512_castsi512_ps(_mm512_and_si512(odd, high));
}

// Lanes of v[q] that hold rows of the matrix, `valid` rows being left in the block.
__mmask16 fp8_lane_mask(int64_t valid, int q) {
  auto half = [](int64_t rows) { return rows >= 8 ? 0xffu : rows <= 0 ? 0u : (1u << rows) - 1; };
  return static_cast<__mmask16>(half(valid - 8 * q) | half(valid - 32 - 8 * q) << 8);
}

// v[q]'s rows of a row-ordered array: rows 8q.. and 32 + 8q.. (masked lanes read nothing).
inline __m512 load_split(const float* p, int q, __mmask16 mask) {
  const __m256 lo = _mm256_maskz_loadu_ps(static_cast<__mmask8>(mask), p + 8 * q);
  const __m256 hi = _mm256_maskz_loadu_ps(static_cast<__mmask8>(mask >> 8), p + 32 + 8 * q);
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

inline void store_split(float* p, int q, __mmask16 mask, __m512 v) {
  _mm256_mask_storeu_ps(p + 8 * q, static_cast<__mmask8>(mask), _mm512_castps512_ps256(v));
  _mm256_mask_storeu_ps(p + 32 + 8 * q, static_cast<__mmask8>(mask >> 8),
                        _mm512_extractf32x8_ps(v, 1));
}

// Block b × MR rows of x over k block kb: y (+)= partial · scale. kNonTemporal: on AMD, one
// non-temporal prefetch (kFp8NonTemporalPrefetchBytes) instead of the L1 + L2 pair.
template <int MR, bool kNonTemporal>
void fp8_tile(const PackedWeight& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t b,
              int64_t kb, bool accumulate) {
  __m512 acc[4][MR];
  for (int q = 0; q < 4; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = _mm512_setzero_ps();
  const int64_t k0 = kb * w.k_block, k1 = k0 + w.k_block;
  const auto* base = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock;
  const __m512 unit = _mm512_set1_ps(kHalfUnit);
  for (int64_t k = k0; k < k1; ++k) {
    const uint8_t* p = base + k * kRowBlock;
    if constexpr (kNonTemporal) {
      _mm_prefetch(reinterpret_cast<const char*>(p) + kFp8NonTemporalPrefetchBytes, _MM_HINT_NTA);
    } else {
      _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p) + kFp8L2PrefetchBytes, _MM_HINT_T1);
    }
    __m512 v[4];
    widen64(p, v);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_mul_ps(_mm512_set1_ps(x[i * ldx + k]), unit);
      for (int q = 0; q < 4; ++q) acc[q][i] = _mm512_fmadd_ps(v[q], xv, acc[q][i]);
    }
  }
  const int64_t nkb = w.k_pad / w.k_block, row0 = b * kRowBlock;
  const float* scales = w.scales + (b * nkb + kb) * kRowBlock;
  for (int q = 0; q < 4; ++q) {
    const __mmask16 mask = fp8_lane_mask(w.n - row0, q);
    const __m512 s = _mm512_mul_ps(load_split(scales, q, mask), unit);
    for (int i = 0; i < MR; ++i) {
      float* out = y + i * ldy + row0;
      const __m512 prev = accumulate ? load_split(out, q, mask) : _mm512_setzero_ps();
      store_split(out, q, mask, _mm512_fmadd_ps(acc[q][i], s, prev));
    }
  }
}

// Prefill-sized m over FP8 weights: converting in registers per row tile would repeat the
// conversion m / 2 times, so each 64-row block is widened once per chunk of k blocks into bf16
// (exact for e4m3), in the bf16 layout, in a per-thread buffer, and the bf16 tiles run on it one
// k block at a time with the block's scales. Rows outside, k blocks inside: a row tile's y stays
// in L1 while the 64 KiB chunk comes from L2 (k blocks outside measured the same). This runs at
// 73-97 GFLOP/s per core against the bf16 path's 107-130; where the difference goes is open.
template <int NB, int MR>
void widened_rows(const PackedWeight& part, const float* x, int64_t ldx, float* y, int64_t ldy,
                  int64_t k_block, const float* scales, bool accumulate) {
  for (int64_t k0 = 0; k0 < part.k_pad; k0 += k_block, scales += kRowBlock)
    tile<true, NB, MR, true>(part, x, ldx, y, ldy, 0, k0, k0 + k_block, accumulate || k0 > 0,
                             scales);
}

template <int NB>
void widened_block(const PackedWeight& part, const float* x, int64_t ldx, int64_t m, float* y,
                   int64_t ldy, int64_t k_block, const float* scales, bool accumulate) {
  for (int64_t i = 0; i < m; i += 4) {
    const float* xi = x + i * ldx;
    float* yi = y + i * ldy;
    switch (std::min<int64_t>(4, m - i)) {
      case 1:
        widened_rows<NB, 1>(part, xi, ldx, yi, ldy, k_block, scales, accumulate);
        break;
      case 2:
        widened_rows<NB, 2>(part, xi, ldx, yi, ldy, k_block, scales, accumulate);
        break;
      case 3:
        widened_rows<NB, 3>(part, xi, ldx, yi, ldy, k_block, scales, accumulate);
        break;
      default:
        widened_rows<NB, 4>(part, xi, ldx, yi, ldy, k_block, scales, accumulate);
        break;
    }
  }
}

void widened(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy, int64_t b0,
             int64_t b1) {
  for_each_widened_fp8_chunk(
      w, b0, b1, [&](const PackedWeight& part, int64_t c0, int64_t row0, const float* scales) {
        const float* xc = x + c0;
        float* yb = y + row0;
        const int64_t ldx = w.k_pad;
        const bool acc = c0 > 0;
        switch (live_lanes(part, 0)) {
          case 1:
            widened_block<1>(part, xc, ldx, m, yb, ldy, w.k_block, scales, acc);
            break;
          case 2:
            widened_block<2>(part, xc, ldx, m, yb, ldy, w.k_block, scales, acc);
            break;
          case 3:
            widened_block<3>(part, xc, ldx, m, yb, ldy, w.k_block, scales, acc);
            break;
          default:
            widened_block<4>(part, xc, ldx, m, yb, ldy, w.k_block, scales, acc);
            break;
        }
      });
}

// Up to kFp8DirectRowsMax rows of x, each k block converted in registers. k blocks outside,
// rows inside: a block's k block (64 rows × 128 bytes) stays in L1 while the row tiles pass
// over it.
template <bool kNonTemporal>
void direct(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy, int64_t b0,
            int64_t b1) {
  const int64_t ldx = w.k_pad, nkb = w.k_pad / w.k_block;
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t kb = 0; kb < nkb; ++kb)
      for (int64_t i = 0; i < m; i += 2) {
        if (m - i == 1) {
          fp8_tile<1, kNonTemporal>(w, x + i * ldx, ldx, y + i * ldy, ldy, b, kb, kb > 0);
        } else {
          fp8_tile<2, kNonTemporal>(w, x + i * ldx, ldx, y + i * ldy, ldy, b, kb, kb > 0);
        }
      }
}

}  // namespace

void linear_small_m_fp8(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                        int64_t b0, int64_t b1) {
  if (m > kFp8DirectRowsMax) {
    widened(w, x, m, y, ldy, b0, b1);
  } else if (cpu_is_amd()) {
    direct<true>(w, x, m, y, ldy, b0, b1);
  } else {
    direct<false>(w, x, m, y, ldy, b0, b1);
  }
}

void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1) {
  const bool bf16 = w.dtype == tensor::DType::kBF16;
  if (cpu_is_amd()) {
    bf16 ? run<true, Source::kMemoryOnce>(w, x, m, y, ldy, b0, b1)
         : run<false, Source::kMemoryOnce>(w, x, m, y, ldy, b0, b1);
  } else {
    bf16 ? run<true, Source::kMemory>(w, x, m, y, ldy, b0, b1)
         : run<false, Source::kMemory>(w, x, m, y, ldy, b0, b1);
  }
}

}  // namespace handoff::ops::detail::avx512
