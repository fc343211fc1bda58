// AVX-512 body of the small f32 GEMM (attention's per-tile products: scores of 64 keys × the
// heads over the latent width, and the probability-weighted latent sum). Register tiles of up to
// 12 rows × 16 columns, or 8 rows × 32 columns beyond 16 columns: 12 or 16 accumulators, one or
// two loads of b and one broadcast of a per row per step of p, column tails masked. (At 16 rows
// the 16 row pointers outnumbered the free registers and GCC moved four of them through vector
// registers every step: the scores product ran ~5 % slower, docs/performance.md.) Each element is
// summed as the AVX2 body sums it (from c or 0, one FMA per p in order), so the two agree bit
// for bit. Products of at most 8 columns (the indexer's heads) keep the AVX2
// body's narrow tiles. On the 2-core Zen 5 the attention products' share of a decode step's
// samples (bench-moe, depth 576) fell from 5.0 % (AVX2 tiles) to 3.1 % (docs/performance.md).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "handoff/ops/gemm_kernels.h"

namespace handoff::ops::avx512 {

namespace {

__mmask16 lane_mask(int64_t remaining) {
  return remaining >= 16  ? __mmask16(0xffff)
         : remaining <= 0 ? __mmask16(0)
                          : static_cast<__mmask16>((1u << remaining) - 1);
}

// Rows × (Vectors · 16) columns, the last `cols` < Vectors · 16 only at the right edge.
template <int Rows, int Vectors>
void tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, int64_t cols, bool accumulate) {
  __mmask16 mask[Vectors];
  for (int v = 0; v < Vectors; ++v) mask[v] = lane_mask(cols - 16 * v);
  __m512 acc[Rows][Vectors];
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      acc[r][v] =
          accumulate ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[Vectors];
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * ldb + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < Rows; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + p]);
#pragma GCC unroll 2
      for (int v = 0; v < Vectors; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < Vectors; ++v)
      _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
}

template <int Vectors, int Rows>
void row_tile(int64_t rows, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, int64_t cols, bool accumulate) {
  if constexpr (Rows > 1) {
    if (rows < Rows)
      return row_tile<Vectors, Rows - 1>(rows, k, a, lda, b, ldb, c, ldc, cols, accumulate);
  }
  tile<Rows, Vectors>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
}

// Row tiles of up to Rows over column blocks of Vectors · 16; a block of b (k × 16 or 32)
// stays in L1 while every row tile uses it.
template <int Vectors, int Rows>
void blocks(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
            int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  constexpr int64_t kCols = 16 * Vectors;
  for (int64_t j = 0; j < n; j += kCols)
    for (int64_t i = 0; i < m; i += Rows)
      row_tile<Vectors, Rows>(std::min<int64_t>(Rows, m - i), k, a + i * lda, lda, b + j, ldb,
                              c + i * ldc + j, ldc, std::min(kCols, n - j), accumulate);
}

// r[i] = row i of a 16 × 16 block -> r[j] = its column j: pairs, then quads within each
// 128-bit lane, then lanes across registers.
void transpose16(__m512 (&r)[16]) {
  // Zero-masking forms with every lane set: GCC 12's unmasked ones pass an undefined source
  // that -Wmaybe-uninitialized reports.
  constexpr __mmask16 kAll = 0xffff;
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_ps(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[i], r[i + 1]);
  }
  auto lo = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(
        _mm512_maskz_unpacklo_pd(0xff, _mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  auto hi = [](__m512 x, __m512 y) {
    return _mm512_castpd_ps(
        _mm512_maskz_unpackhi_pd(0xff, _mm512_castps_pd(x), _mm512_castps_pd(y)));
  };
  for (int i = 0; i < 16; i += 4) {
    r[i] = lo(t[i], t[i + 2]);
    r[i + 1] = hi(t[i], t[i + 2]);
    r[i + 2] = lo(t[i + 1], t[i + 3]);
    r[i + 3] = hi(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)
    for (int q = 0; q < 4; ++q) {
      t[i + q] = _mm512_maskz_shuffle_f32x4(kAll, r[i + q], r[i + q + 4], 0x88);
      t[i + q + 4] = _mm512_maskz_shuffle_f32x4(kAll, r[i + q], r[i + q + 4], 0xdd);
    }
  for (int q = 0; q < 8; ++q) {
    r[q] = _mm512_maskz_shuffle_f32x4(kAll, t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_maskz_shuffle_f32x4(kAll, t[q], t[q + 8], 0xdd);
  }
}

}  // namespace

// 16 × 16 blocks in registers (the attention query's 16 heads × 288 columns: 18 blocks), the
// edges by the AVX2 body's 8 × 8 blocks and element copies.
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  const int64_t full_rows = rows / 16 * 16, full_cols = cols / 16 * 16;
  for (int64_t i = 0; i < full_rows; i += 16)
    for (int64_t j = 0; j < full_cols; j += 16) {
      __m512 r[16];
      for (int q = 0; q < 16; ++q) r[q] = _mm512_loadu_ps(src + (i + q) * lds + j);
      transpose16(r);
      for (int q = 0; q < 16; ++q) _mm512_storeu_ps(dst + (j + q) * ldd + i, r[q]);
    }
  if (full_cols < cols)
    avx2::transpose(full_rows, cols - full_cols, src + full_cols, lds, dst + full_cols * ldd, ldd);
  if (full_rows < rows)
    avx2::transpose(rows - full_rows, cols, src + full_rows * lds, lds, dst + full_rows, ldd);
}

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate) {
  if (n <= 8) return avx2::gemm(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  if (n <= 16) return blocks<1, 12>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  blocks<2, 8>(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

}  // namespace handoff::ops::avx512
