// AVX2 + FMA body of the small f32 GEMM: register tiles of up to 6 rows × 16 columns (12
// accumulators, 2 loads of b and one broadcast of a per step of p), column tails masked; 12 × 8
// tiles for products of at most 8 columns; and the indexer's scores on 12 × 8 tiles.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "handoff/ops/gemm_kernels.h"

namespace handoff::ops::avx2 {

namespace {

constexpr int64_t kRows = 6;
constexpr int64_t kCols = 16;

// Lanes [0, remaining) set; remaining <= 0 sets none, >= 8 all.
__m256i lane_mask(int64_t remaining) {
  const int r = static_cast<int>(std::clamp<int64_t>(remaining, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// One tile of Rows × (up to 16) columns; `cols` < 16 only at the right edge (Masked). The
// accumulators are named variables, not an array: GCC kept an array's lanes in memory and
// stored all 12 every step of p, which capped the kernel at a third of the FMA rate.
template <int Rows, bool Masked>
void tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
          int64_t ldc, int64_t cols, bool accumulate) {
  const __m256i m0 = lane_mask(cols), m1 = lane_mask(cols - 8);
  auto load = [&](const float* p, __m256i mask) {
    if constexpr (Masked) return _mm256_maskload_ps(p, mask);
    return _mm256_loadu_ps(p);
  };
  auto store = [&](float* p, __m256i mask, __m256 v) {
    if constexpr (Masked)
      _mm256_maskstore_ps(p, mask, v);
    else
      _mm256_storeu_ps(p, v);
  };
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define HANDOFF_GEMM_ROWS(X) \
  X(0, c00, c01) X(1, c10, c11) X(2, c20, c21) X(3, c30, c31) X(4, c40, c41) X(5, c50, c51)
#define HANDOFF_GEMM_LOAD(r, lo, hi) \
  if constexpr (r < Rows) {          \
    lo = load(c + r * ldc, m0);      \
    hi = load(c + r * ldc + 8, m1);  \
  }
#define HANDOFF_GEMM_FMA(r, lo, hi)                         \
  if constexpr (r < Rows) {                                 \
    const __m256 av = _mm256_broadcast_ss(a + r * lda + p); \
    lo = _mm256_fmadd_ps(av, b0, lo);                       \
    hi = _mm256_fmadd_ps(av, b1, hi);                       \
  }
#define HANDOFF_GEMM_STORE(r, lo, hi) \
  if constexpr (r < Rows) {           \
    store(c + r * ldc, m0, lo);       \
    store(c + r * ldc + 8, m1, hi);   \
  }
  if (accumulate) {
    HANDOFF_GEMM_ROWS(HANDOFF_GEMM_LOAD)
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = load(b + p * ldb, m0), b1 = load(b + p * ldb + 8, m1);
    HANDOFF_GEMM_ROWS(HANDOFF_GEMM_FMA)
  }
  HANDOFF_GEMM_ROWS(HANDOFF_GEMM_STORE)
#undef HANDOFF_GEMM_STORE
#undef HANDOFF_GEMM_FMA
#undef HANDOFF_GEMM_LOAD
#undef HANDOFF_GEMM_ROWS
}

template <bool Masked>
void row_tile(int64_t rows, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc, int64_t cols, bool accumulate) {
  switch (rows) {
    case 6:
      return tile<6, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
    case 5:
      return tile<5, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
    case 4:
      return tile<4, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
    case 3:
      return tile<3, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
    case 2:
      return tile<2, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
    default:
      return tile<1, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
  }
}

// Products with at most 8 columns (the decode indexer's 8 heads) would leave half of every
// 16-wide tile idle: these tiles are up to 12 rows × 8 columns, again 12 accumulators, and sum
// each element over p in the same order as `tile`.
constexpr int64_t kNarrowRows = 12;

template <int Rows, bool Masked>
void narrow_tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                 int64_t ldc, int64_t cols, bool accumulate) {
  const __m256i mask = lane_mask(cols);
  auto load = [&](const float* p) {
    if constexpr (Masked) return _mm256_maskload_ps(p, mask);
    return _mm256_loadu_ps(p);
  };
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
         c8 = c0, c9 = c0, c10 = c0, c11 = c0;
#define HANDOFF_NARROW_ROWS(X) \
  X(0, c0)                     \
  X(1, c1)                     \
  X(2, c2) X(3, c3) X(4, c4) X(5, c5) X(6, c6) X(7, c7) X(8, c8) X(9, c9) X(10, c10) X(11, c11)
#define HANDOFF_NARROW_LOAD(r, acc) \
  if constexpr (r < Rows) acc = load(c + r * ldc);
#define HANDOFF_NARROW_FMA(r, acc) \
  if constexpr (r < Rows) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * lda + p), b0, acc);
#define HANDOFF_NARROW_STORE(r, acc)               \
  if constexpr (r < Rows) {                        \
    if constexpr (Masked)                          \
      _mm256_maskstore_ps(c + r * ldc, mask, acc); \
    else                                           \
      _mm256_storeu_ps(c + r * ldc, acc);          \
  }
  if (accumulate) {
    HANDOFF_NARROW_ROWS(HANDOFF_NARROW_LOAD)
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = load(b + p * ldb);
    HANDOFF_NARROW_ROWS(HANDOFF_NARROW_FMA)
  }
  HANDOFF_NARROW_ROWS(HANDOFF_NARROW_STORE)
#undef HANDOFF_NARROW_STORE
#undef HANDOFF_NARROW_FMA
#undef HANDOFF_NARROW_LOAD
#undef HANDOFF_NARROW_ROWS
}

template <bool Masked, int Rows = kNarrowRows>
void narrow_row_tile(int64_t rows, int64_t k, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* c, int64_t ldc, int64_t cols, bool accumulate) {
  if constexpr (Rows > 1) {
    if (rows < Rows)
      return narrow_row_tile<Masked, Rows - 1>(rows, k, a, lda, b, ldb, c, ldc, cols, accumulate);
  }
  narrow_tile<Rows, Masked>(k, a, lda, b, ldb, c, ldc, cols, accumulate);
}

// The 8 × 8 matrix whose rows are r[0..7], transposed in place: the usual unpack / shuffle /
// lane-swap.
void transpose8(__m256 (&r)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}

// dst (8 × 8, ldd) = transpose of src (8 × 8, lds).
void transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  transpose8(r);
  for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, r[i]);
}

// Scores of Rows (<= 12) keys: per group of 8 heads, the keys × heads dots as narrow_tile sums
// them (12 accumulators, one FMA per p, in order from 0), then ReLU times the head weights,
// transposed so that lanes are keys (keys 0-7, then 8-11 padded with zeros), added head by head
// onto the running scores. Key is float, or uint16_t for bf16 keys read straight from the cache:
// one 32-bit broadcast carries a pair (p, p + 1), widened exactly by a shift and a mask.
template <typename Key, int Rows, bool Masked>
void score_group(int64_t lanes, int64_t dims, const Key* keys, int64_t ldk, const float* q_t,
                 int64_t ldq, const float* w, __m256& score_lo, __m256& score_hi) {
  const __m256i mask = lane_mask(lanes);
  auto load = [&](const float* p) {
    if constexpr (Masked) return _mm256_maskload_ps(p, mask);
    return _mm256_loadu_ps(p);
  };
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
         c8 = c0, c9 = c0, c10 = c0, c11 = c0;
#define HANDOFF_SCORE_ROWS(X) \
  X(0, c0)                    \
  X(1, c1)                    \
  X(2, c2) X(3, c3) X(4, c4) X(5, c5) X(6, c6) X(7, c7) X(8, c8) X(9, c9) X(10, c10) X(11, c11)
  int64_t p = 0;
  if constexpr (std::is_same_v<Key, uint16_t>) {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    // The bf16 pair (p, p + 1) of row r in every lane: p in the low half, p + 1 in the high.
    auto pair = [&](int64_t r) {
      uint32_t bits;
      std::memcpy(&bits, keys + r * ldk + p, sizeof bits);
      return _mm256_set1_epi32(static_cast<int>(bits));
    };
#define HANDOFF_SCORE_PAIR_FMA(r, acc)                                                \
  if constexpr (r < Rows) {                                                           \
    const __m256i two = pair(r);                                                      \
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(two, 16)), b0, acc);  \
    acc = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(two, high)), b1, acc); \
  }
    for (; p + 1 < dims; p += 2) {
      const __m256 b0 = load(q_t + p * ldq), b1 = load(q_t + (p + 1) * ldq);
      HANDOFF_SCORE_ROWS(HANDOFF_SCORE_PAIR_FMA)
    }
#undef HANDOFF_SCORE_PAIR_FMA
  }
  auto key = [&](int64_t r) {  // element (r, p) as f32, broadcast
    if constexpr (std::is_same_v<Key, uint16_t>)
      return _mm256_castsi256_ps(
          _mm256_set1_epi32(static_cast<int>(uint32_t{keys[r * ldk + p]} << 16)));
    else
      return _mm256_broadcast_ss(keys + r * ldk + p);
  };
#define HANDOFF_SCORE_FMA(r, acc) \
  if constexpr (r < Rows) acc = _mm256_fmadd_ps(key(r), b0, acc);
  for (; p < dims; ++p) {  // all of p for f32 keys; an odd last p for bf16
    const __m256 b0 = load(q_t + p * ldq);
    HANDOFF_SCORE_ROWS(HANDOFF_SCORE_FMA)
  }
#undef HANDOFF_SCORE_FMA
#undef HANDOFF_SCORE_ROWS
  // max(dot, 0) returns 0 for a NaN dot, as std::max(0.0f, dot) does.
  const __m256 zero = _mm256_setzero_ps(), wv = load(w);
  auto add_heads = [&](__m256(&r)[8], __m256& score) {
    for (__m256& v : r) v = _mm256_mul_ps(wv, _mm256_max_ps(v, zero));
    transpose8(r);
    for (int64_t h = 0; h < lanes; ++h) score = _mm256_add_ps(score, r[h]);
  };
  __m256 lo[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
  add_heads(lo, score_lo);
  if constexpr (Rows > 8) {
    __m256 hi[8] = {c8, c9, c10, c11, zero, zero, zero, zero};
    add_heads(hi, score_hi);
  }
}

template <typename Key, int Rows>
void score_rows(int64_t heads, int64_t dims, const Key* keys, int64_t ldk, const float* q_t,
                int64_t ldq, const float* w, float* out) {
  __m256 lo = _mm256_setzero_ps(), hi = lo;
  for (int64_t g = 0; g < heads; g += 8) {
    const int64_t lanes = std::min<int64_t>(8, heads - g);
    if (lanes == 8)
      score_group<Key, Rows, false>(lanes, dims, keys, ldk, q_t + g, ldq, w + g, lo, hi);
    else
      score_group<Key, Rows, true>(lanes, dims, keys, ldk, q_t + g, ldq, w + g, lo, hi);
  }
  if constexpr (Rows >= 8)
    _mm256_storeu_ps(out, lo);
  else
    _mm256_maskstore_ps(out, lane_mask(Rows), lo);
  if constexpr (Rows > 8) _mm256_maskstore_ps(out + 8, lane_mask(Rows - 8), hi);
}

constexpr int64_t kScoreRows = 12;

template <typename Key, int Rows = kScoreRows>
void score_row_tile(int64_t rows, int64_t heads, int64_t dims, const Key* keys, int64_t ldk,
                    const float* q_t, int64_t ldq, const float* w, float* out) {
  if constexpr (Rows > 1) {
    if (rows < Rows)
      return score_row_tile<Key, Rows - 1>(rows, heads, dims, keys, ldk, q_t, ldq, w, out);
  }
  score_rows<Key, Rows>(heads, dims, keys, ldk, q_t, ldq, w, out);
}

template <typename Key>
void scores(int64_t n, int64_t heads, int64_t dims, const Key* keys, int64_t ldk, const float* q_t,
            int64_t ldq, const float* w, float* out) {
  for (int64_t i = 0; i < n; i += kScoreRows)
    score_row_tile<Key>(std::min(kScoreRows, n - i), heads, dims, keys + i * ldk, ldk, q_t, ldq, w,
                        out + i);
}
}  // namespace

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  const int64_t full_rows = rows / 8 * 8, full_cols = cols / 8 * 8;
  for (int64_t i = 0; i < full_rows; i += 8)
    for (int64_t j = 0; j < full_cols; j += 8)
      transpose8x8(src + i * lds + j, lds, dst + j * ldd + i, ldd);
  for (int64_t i = 0; i < rows; ++i)  // the ragged right and bottom edges
    for (int64_t j = (i < full_rows ? full_cols : 0); j < cols; ++j)
      dst[j * ldd + i] = src[i * lds + j];
}

void relu_weighted_scores(int64_t n, int64_t heads, int64_t dims, const float* keys, int64_t ldk,
                          const float* q_t, int64_t ldq, const float* w, float* out) {
  scores(n, heads, dims, keys, ldk, q_t, ldq, w, out);
}

void relu_weighted_scores_bf16(int64_t n, int64_t heads, int64_t dims, const uint16_t* keys,
                               int64_t ldk, const float* q_t, int64_t ldq, const float* w,
                               float* out) {
  scores(n, heads, dims, keys, ldk, q_t, ldq, w, out);
}

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate) {
  if (n <= 8) {
    for (int64_t i = 0; i < m; i += kNarrowRows) {
      const int64_t rows = std::min(kNarrowRows, m - i);
      if (n == 8)
        narrow_row_tile<false>(rows, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, accumulate);
      else
        narrow_row_tile<true>(rows, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc, n, accumulate);
    }
    return;
  }
  // Column blocks outside: a block of b (k × 16) stays in L1 while every row tile uses it.
  for (int64_t j = 0; j < n; j += kCols) {
    const int64_t cols = std::min(kCols, n - j);
    for (int64_t i = 0; i < m; i += kRows) {
      const int64_t rows = std::min(kRows, m - i);
      if (cols == kCols)
        row_tile<false>(rows, k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, cols,
                        accumulate);
      else
        row_tile<true>(rows, k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, cols,
                       accumulate);
    }
  }
}

}  // namespace handoff::ops::avx2
