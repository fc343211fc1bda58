// AMX kernels: bf16 and FP8 prefill on the bf16 tile unit. bf16 weights are read as packed;
// for FP8 a panel of 64-row blocks (up to ~1 MiB) is widened to bf16 once per call (exact for
// e4m3: avx2::dequantize_block_bf16, whose [K/2][64][2] layout is the pair-interleaved B operand
// TDPBF16PS reads); x is converted once per call into tiles of 16 rows × 32 k, each 1 KiB
// contiguous (rows a power of two apart would share a few L1 sets): exact mode as hi = bf16(x)
// and lo = bf16(x - hi), both multiplied into the same f32 tile (residual up to 2^-16 |x|),
// rounded mode as hi only. FP8 sums each k block in f32 tiles, then acc (+)= sum · scale per row
// in f32, as every FP8 path does; y is written once per pass (one or two 16-row groups) × 16
// columns. Measured in docs/performance.md.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "handoff/ops/linear_kernels.h"

namespace handoff::ops::detail::amx {

namespace {

constexpr int kTileRows = 16;  // rows of an A or C tile
constexpr int kTileK = 32;     // bf16 per A tile row (64 bytes)
constexpr int64_t kTileElems = kTileRows * kTileK;
constexpr int64_t kPanelBytes = int64_t{1} << 20;  // widened weights per panel, in L2

// Tiles: C[g][j] is tile 2g + j for 16-row group g of x (one or two per pass) and 16-row lane j of
// the weight block's lane pair; A[g] is tile 4 + g, B[j] tile 6 + j. All 16 rows × 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = kTileRows;
  }
  _tile_loadconfig(&cfg);
}

// The C tiles of kGroups 16-row groups: their rows of x (below m) and columns of the block
// (below `valid`) into y.
template <int kGroups>
void store_rows(const float (&c)[4][kTileRows][kLane], int64_t jp, int64_t valid, int64_t g0,
                int64_t m, float* y, int64_t ldy) {
  for (int t = 0; t < 2 * kGroups; ++t) {
    const int64_t col = (2 * jp + (t & 1)) * kLane;
    const int64_t live = std::min<int64_t>(kLane, valid - col);
    if (live <= 0) continue;
    const __mmask16 mask = live >= 16 ? __mmask16(0xffff) : __mmask16((1u << live) - 1);
    const int64_t row0 = (g0 + t / 2) * kTileRows;
    const int64_t rows = std::min<int64_t>(kTileRows, m - row0);
    for (int64_t r = 0; r < rows; ++r)
      _mm512_mask_storeu_ps(y + (row0 + r) * ldy + col, mask, _mm512_load_ps(c[t][r]));
  }
}

// The C tiles of rows [g0·16, (g0 + kGroups)·16) of x (one or two 16-row groups: a decode
// batch of up to 16 rows is one, not padded to two) against lanes 2jp, 2jp + 1 of `block` (bf16,
// [K/2][64][2]), summed over k steps [ks0, ks1), into c.
template <int kParts, int kGroups>
void sum_tiles(const uint16_t* block, const uint16_t* xb, int64_t part_stride, int64_t steps,
               int64_t g0, int64_t jp, int64_t ks0, int64_t ks1, float (&c)[4][kTileRows][kLane]) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kGroups == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t ks = ks0; ks < ks1; ++ks) {
    // k pair p of lane j: element p·128 + 32·j (a pair row is 64 rows × 2 = 128 bf16).
    const uint16_t* b = block + ks * kTileK * kRowBlock + jp * 4 * kLane;
    _tile_loadd(6, b, 4 * kRowBlock);
    _tile_loadd(7, b + 2 * kLane, 4 * kRowBlock);
    for (int p = 0; p < kParts; ++p) {
      const uint16_t* a = xb + p * part_stride + (g0 * steps + ks) * kTileElems;
      _tile_loadd(4, a, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      if constexpr (kGroups == 2) {
        _tile_loadd(5, a + steps * kTileElems, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_stored(0, c[0], kLane * sizeof(float));
  _tile_stored(1, c[1], kLane * sizeof(float));
  if constexpr (kGroups == 2) {
    _tile_stored(2, c[2], kLane * sizeof(float));
    _tile_stored(3, c[3], kLane * sizeof(float));
  }
}

// Rows [g0·16, (g0 + kGroups)·16) of x against lanes 2jp, 2jp + 1 of one block (`valid` rows of 64)
// over all of K; y points at the block's column 0. bf16 (`scales` null): the tiles sum all of K.
// FP8 (`scales` the block's first k block's row scales): each k block is summed in the tiles,
// then acc (+)= sum · scale in f32.
template <int kParts, int kGroups>
void pass(const uint16_t* block, const uint16_t* xb, int64_t part_stride, int64_t steps, int64_t g0,
          int64_t jp, int64_t k_block, const float* scales, int64_t valid, int64_t m, float* y,
          int64_t ldy) {
  alignas(64) float c[4][kTileRows][kLane];
  if (scales == nullptr) {
    sum_tiles<kParts, kGroups>(block, xb, part_stride, steps, g0, jp, 0, steps, c);
    store_rows<kGroups>(c, jp, valid, g0, m, y, ldy);
    return;
  }
  alignas(64) float acc[4][kTileRows][kLane];
  const int64_t steps_per_kb = k_block / kTileK;
  for (int64_t kb = 0; kb * steps_per_kb < steps; ++kb) {
    sum_tiles<kParts, kGroups>(block, xb, part_stride, steps, g0, jp, kb * steps_per_kb,
                               (kb + 1) * steps_per_kb, c);
    const float* s = scales + kb * kRowBlock + jp * 2 * kLane;
    for (int t = 0; t < 2 * kGroups; ++t) {
      const __m512 sc = _mm512_loadu_ps(s + (t & 1) * kLane);
      for (int r = 0; r < kTileRows; ++r) {
        const __m512 v = _mm512_load_ps(c[t][r]);
        const __m512 prev = kb > 0 ? _mm512_load_ps(acc[t][r]) : _mm512_setzero_ps();
        _mm512_store_ps(acc[t][r], _mm512_fmadd_ps(v, sc, prev));
      }
    }
  }
  store_rows<kGroups>(acc, jp, valid, g0, m, y, ldy);
}

}  // namespace

int64_t padded_rows(int64_t m) { return (m + kTileRows - 1) / kTileRows * kTileRows; }

// xb: [part][16-row group][k step of 32][16][32].
void split_bf16(const float* x, int64_t m, int64_t k_pad, int parts, uint16_t* xb) {
  const int64_t m_pad = padded_rows(m), steps = k_pad / kTileK;
  const int64_t part_stride = m_pad * k_pad;
  for (int64_t i = 0; i < m_pad; ++i) {
    uint16_t* row = xb + (i / kTileRows) * steps * kTileElems + (i % kTileRows) * kTileK;
    for (int64_t ks = 0; ks < steps; ++ks) {
      uint16_t* hi = row + ks * kTileElems;
      uint16_t* lo = hi + part_stride;
      if (i >= m) {
        std::fill(hi, hi + kTileK, uint16_t{0});
        if (parts == 2) std::fill(lo, lo + kTileK, uint16_t{0});
        continue;
      }
      for (int64_t c = 0; c < kTileK; c += 16) {
        const __m512 v = _mm512_loadu_ps(x + i * k_pad + ks * kTileK + c);
        const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + c), h);
        if (parts == 2) {
          const __m512 hv = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
          const __m256i l = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_sub_ps(v, hv)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + c), l);
        }
      }
    }
  }
}

void linear(const PackedWeight& w, const uint16_t* xb, int parts, int64_t m, float* y, int64_t ldy,
            int64_t b0, int64_t b1) {
  const bool fp8 = w.dtype == tensor::DType::kF8E4M3;
  const int64_t kp = w.k_pad, steps = kp / kTileK, nkb = fp8 ? kp / w.k_block : 0;
  const int64_t groups = padded_rows(m) / kTileRows, part_stride = groups * steps * kTileElems;
  const int64_t block_elems = kp * kRowBlock;
  // A panel's blocks stay in L2 across the row groups, a row group's x across the panel's
  // blocks. FP8 panels are widened into this thread's buffer first.
  const int64_t panel =
      std::max<int64_t>(1, kPanelBytes / (block_elems * static_cast<int64_t>(sizeof(uint16_t))));
  thread_local std::vector<uint16_t> widened;  // only grows: no allocation in steady state
  if (fp8) widened.resize(static_cast<size_t>(std::min(panel, b1 - b0) * block_elems));
  configure_tiles();
  for (int64_t p0 = b0; p0 < b1; p0 += panel) {
    const int64_t p1 = std::min(b1, p0 + panel);
    const uint16_t* base = static_cast<const uint16_t*>(w.data) + p0 * block_elems;
    if (fp8) {
      for (int64_t b = p0; b < p1; ++b)
        avx2::dequantize_block_bf16(w, b, 0, kp, widened.data() + (b - p0) * block_elems);
      base = widened.data();
    }
    for (int64_t g0 = 0; g0 < groups; g0 += 2)
      for (int64_t b = p0; b < p1; ++b) {
        const int64_t row0 = b * kRowBlock, valid = std::min(kRowBlock, w.n - row0);
        const uint16_t* block = base + (b - p0) * block_elems;
        const float* scales = fp8 ? w.scales + b * nkb * kRowBlock : nullptr;
        const bool two = g0 + 1 < groups;
        for (int64_t jp = 0; jp < 2 && 2 * jp * kLane < valid; ++jp) {
          auto run = [&](auto kernel) {
            kernel(block, xb, part_stride, steps, g0, jp, w.k_block, scales, valid, m, y + row0,
                   ldy);
          };
          if (parts == 2) {
            two ? run(pass<2, 2>) : run(pass<2, 1>);
          } else {
            two ? run(pass<1, 2>) : run(pass<1, 1>);
          }
        }
      }
  }
  _tile_release();
}

}  // namespace handoff::ops::detail::amx
