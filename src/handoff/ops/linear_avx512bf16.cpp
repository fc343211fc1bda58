// Prefill kernels on CPUs with the bf16 dot product, over the bf16 layout [K/2][64][2] of
// linear_kernels.h, for bf16 weights (activations rounded to bf16, or exact ones as hi + lo bf16
// halves, each half one more vdpbf16ps into the same sums) and for FP8 weights with rounded
// activations (ops::ActivationPrecision::kBf16): FP8 blocks (one
// 64-byte line of 64 rows per k) are first converted, once per 512 columns, into that layout in
// an L2-resident chunk. Tiles of up to 4 rows of x × 64 rows run with vdpbf16ps: x arrives as
// bf16 pairs, one 32-bit word per two columns, so a broadcast word pairs
// with a 64-byte load of 16 rows × 2 columns and one instruction does 32 multiply-adds. bf16 ×
// bf16 products are exact in f32; each k block (128 columns) is summed in registers, then
// y (+)= partial (FP8: · scale) in f32. For bf16 weights these tiles beat oneDNN's bf16 matmul on
// prefill shapes (docs/performance.md).
//
// The conversion: the lines of k and k + 1 become four vectors of 16 consecutive rows ×
// (k, k + 1) with byte permutes. One two-source permute places each row's two e4m3 bytes twice in
// its 32-bit lane (the layout's row order undone), two 128-entry table lookups (vpermi2b; the
// index's sign bit is ignored) write the bf16's low byte into the even bytes and its high byte
// into the odd ones, and a bit select copies the sign. Every e4m3 value, subnormals included, is
// a normal bf16, so nothing is rescaled and vdpbf16ps's flushing of bf16 subnormals never
// applies.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <vector>

#include "handoff/ops/linear_kernels.h"
#include "handoff/tensor/dtype.h"

namespace handoff::ops::detail::avx512bf16 {

namespace {

// Columns per widened chunk (whole k blocks): 64 rows × 512 × 2 bytes = 64 KiB, in L2.
constexpr int64_t kWidenCols = 512;

inline __m512 dot(__m512 acc, __m512i w, __m512i x) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(w), reinterpret_cast<__m512bh>(x));
}

__mmask16 lane_mask(int64_t valid) {
  return valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
}

// y (+)= acc (· scale, when given) for MR rows of the 16-row lane starting at row0.
template <int MR>
inline void store_lane(const __m512 (&acc)[MR], const float* scale, float* y, int64_t ldy,
                       int64_t row0, int64_t valid, bool accumulate) {
  const __mmask16 mask = lane_mask(valid);
  const __m512 s = scale ? _mm512_maskz_loadu_ps(mask, scale) : _mm512_set1_ps(1.0f);
  for (int i = 0; i < MR; ++i) {
    float* out = y + i * ldy + row0;
    const __m512 prev = accumulate ? _mm512_maskz_loadu_ps(mask, out) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out, mask, _mm512_fmadd_ps(acc[i], s, prev));
  }
}

// The first NB lanes of a one-block bf16 weight w × MR rows of x over k pairs [p0, p1):
// y (+)= sum (· the rows' scales, when given). With `xlo` (exact activations: x = hi + lo, both
// bf16) each row's two halves go into the same sums.
template <int NB, int MR>
void tile(const PackedWeight& w, const uint32_t* x, const uint32_t* xlo, int64_t ldx, float* y,
          int64_t ldy, int64_t p0, int64_t p1, bool accumulate, const float* scale) {
  __m512 acc[NB][MR];
  for (int j = 0; j < NB; ++j)
    for (int i = 0; i < MR; ++i) acc[j][i] = _mm512_setzero_ps();
  const auto* base = static_cast<const uint16_t*>(w.data);
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t* q = base + p * 2 * kRowBlock;
    __m512i wv[NB];
    for (int j = 0; j < NB; ++j) wv[j] = _mm512_loadu_si512(q + j * 32);
    for (int i = 0; i < MR; ++i) {
      const __m512i xv = _mm512_set1_epi32(static_cast<int>(x[i * ldx + p]));
      for (int j = 0; j < NB; ++j) acc[j][i] = dot(acc[j][i], wv[j], xv);
      if (xlo == nullptr) continue;
      const __m512i lv = _mm512_set1_epi32(static_cast<int>(xlo[i * ldx + p]));
      for (int j = 0; j < NB; ++j) acc[j][i] = dot(acc[j][i], wv[j], lv);
    }
  }
  for (int j = 0; j < NB; ++j)
    store_lane<MR>(acc[j], scale ? scale + j * kLane : nullptr, y, ldy, j * kLane, w.n - j * kLane,
                   accumulate);
}

// MR (1..4) rows of x at a time, as tile<NB, MR>.
template <int NB>
void tile_any(int64_t mr, const PackedWeight& w, const uint32_t* x, const uint32_t* xlo,
              int64_t ldx, float* y, int64_t ldy, int64_t p0, int64_t p1, bool accumulate,
              const float* scale) {
  switch (mr) {
    case 1:
      return tile<NB, 1>(w, x, xlo, ldx, y, ldy, p0, p1, accumulate, scale);
    case 2:
      return tile<NB, 2>(w, x, xlo, ldx, y, ldy, p0, p1, accumulate, scale);
    case 3:
      return tile<NB, 3>(w, x, xlo, ldx, y, ldy, p0, p1, accumulate, scale);
    default:
      return tile<NB, 4>(w, x, xlo, ldx, y, ldy, p0, p1, accumulate, scale);
  }
}

// ---- FP8 ----

// The constants of the conversion: the bf16 bytes of every e4m3 magnitude (index = the byte
// without its sign; low bytes, then high bytes, as the 64-byte halves of two lookup tables), and
// per 16-row lane e of a block the byte indices into (line k, line k + 1) that put row 16e + s's
// two bytes twice into 32-bit lane s: [k, k, k + 1, k + 1].
struct Fp8Tables {
  __m512i lo0, lo1, hi0, hi1;
  __m512i gather[4];
};

const Fp8Tables& fp8_tables() {
  static const Fp8Tables tables = [] {
    alignas(64) std::array<uint8_t, 128> lo{}, hi{};
    for (int v = 0; v < 128; ++v) {
      const uint16_t h = tensor::f32_to_bf16(tensor::f8e4m3_to_f32(static_cast<uint8_t>(v)));
      lo[static_cast<size_t>(v)] = static_cast<uint8_t>(h & 0xff);
      hi[static_cast<size_t>(v)] = static_cast<uint8_t>(h >> 8);
    }
    Fp8Tables t{_mm512_load_si512(lo.data()),
                _mm512_load_si512(lo.data() + 64),
                _mm512_load_si512(hi.data()),
                _mm512_load_si512(hi.data() + 64),
                {}};
    for (int e = 0; e < 4; ++e) {
      alignas(64) std::array<uint8_t, 64> idx{};
      for (int s = 0; s < 16; ++s) {
        const auto at = static_cast<uint8_t>(fp8_row_offset(16 * e + s));
        const auto next = static_cast<uint8_t>(64 + at);
        idx[static_cast<size_t>(4 * s)] = idx[static_cast<size_t>(4 * s + 1)] = at;
        idx[static_cast<size_t>(4 * s + 2)] = idx[static_cast<size_t>(4 * s + 3)] = next;
      }
      t.gather[e] = _mm512_load_si512(idx.data());
    }
    return t;
  }();
  return tables;
}

// Lane e (rows 16e..16e + 15) of a block's lines of k and k + 1 (a, c) in bf16, as the bf16
// layout holds it: 32-bit lane s = row 16e + s's (k, k + 1).
struct Fp8ToBf16 {
  const Fp8Tables& t = fp8_tables();
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80008000u));
  static constexpr __mmask64 kEven = 0x5555555555555555ull, kOdd = ~kEven;
  __m512i operator()(__m512i a, __m512i c, int64_t e) const {
    const __m512i raw = _mm512_permutex2var_epi8(a, t.gather[e], c);
    const __m512i lo = _mm512_mask2_permutex2var_epi8(t.lo0, raw, kEven, t.lo1);
    const __m512i v = _mm512_mask2_permutex2var_epi8(t.hi0, lo, kOdd, t.hi1);
    return _mm512_ternarylogic_epi32(v, raw, sign, 0xF8);  // v | (raw & sign)
  }
};

// Columns [c0, c1) (whole k pairs) of FP8 block b, unscaled, into the bf16 layout [K/2][64][2]:
// exact, e4m3 being a subset of bf16.
void widen_block(const PackedWeight& w, int64_t b, int64_t c0, int64_t c1, uint16_t* out) {
  const Fp8ToBf16 convert;
  const auto* base = static_cast<const uint8_t*>(w.data) + b * w.k_pad * kRowBlock;
  for (int64_t k = c0; k < c1; k += 2) {
    const __m512i a = _mm512_loadu_si512(base + k * kRowBlock);
    const __m512i c = _mm512_loadu_si512(base + (k + 1) * kRowBlock);
    uint16_t* o = out + (k - c0) * kRowBlock;
    for (int64_t e = 0; e < 4; ++e) _mm512_storeu_si512(o + e * 32, convert(a, c, e));
  }
}

// Both kernels: per 64-row block, chunks of kWidenCols columns (FP8: widened into bf16 first),
// and within a chunk steps of one k block (FP8: the scale block; bf16: 128 columns, 16 KiB of the
// block) with the row tiles inside, so a step stays in L1 while the row tiles pass over it.
template <bool kFp8>
void run(const PackedWeight& w, const uint32_t* x, const uint32_t* xlo, int64_t m, float* y,
         int64_t ldy, int64_t b0, int64_t b1) {
  const int64_t ldx = w.k_pad / 2;
  const int64_t step = kFp8 ? w.k_block : 128;
  const int64_t nkb = kFp8 ? w.k_pad / w.k_block : 0;
  const int64_t chunk_cols = step * std::max<int64_t>(1, kWidenCols / step);
  thread_local std::vector<uint16_t> chunk;  // FP8; only grows: no allocation in steady state
  if (kFp8) chunk.resize(static_cast<size_t>(chunk_cols * kRowBlock));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t lanes = live_lanes(w, b);
    for (int64_t c0 = 0; c0 < w.k_pad; c0 += chunk_cols) {
      const int64_t c1 = std::min(w.k_pad, c0 + chunk_cols);
      // The chunk as a weight of one block: block b's rows over columns [c0, c1).
      const void* data = static_cast<const uint16_t*>(w.data) + (b * w.k_pad + c0) * kRowBlock;
      if (kFp8) {
        widen_block(w, b, c0, c1, chunk.data());
        data = chunk.data();
      }
      const PackedWeight part{tensor::DType::kBF16, std::min(kRowBlock, w.n - b * kRowBlock),
                              c1 - c0, 1, data};
      for (int64_t s0 = c0; s0 < c1; s0 += step) {
        const float* scale = kFp8 ? w.scales + (b * nkb + s0 / step) * kRowBlock : nullptr;
        const int64_t p0 = (s0 - c0) / 2, p1 = p0 + std::min(step, c1 - s0) / 2;
        for (int64_t i = 0; i < m; i += 4) {
          const int64_t at = i * ldx + c0 / 2;
          const uint32_t* xi = x + at;
          const uint32_t* li = xlo ? xlo + at : nullptr;
          float* yi = y + i * ldy + b * kRowBlock;
          switch (lanes) {
            case 1:
              tile_any<1>(m - i, part, xi, li, ldx, yi, ldy, p0, p1, s0 > 0, scale);
              break;
            case 2:
              tile_any<2>(m - i, part, xi, li, ldx, yi, ldy, p0, p1, s0 > 0, scale);
              break;
            case 3:
              tile_any<3>(m - i, part, xi, li, ldx, yi, ldy, p0, p1, s0 > 0, scale);
              break;
            default:
              tile_any<4>(m - i, part, xi, li, ldx, yi, ldy, p0, p1, s0 > 0, scale);
              break;
          }
        }
      }
    }
  }
}

}  // namespace

void linear_bf16(const PackedWeight& w, const uint32_t* x, const uint32_t* xlo, int64_t m, float* y,
                 int64_t ldy, int64_t b0, int64_t b1) {
  run<false>(w, x, xlo, m, y, ldy, b0, b1);
}

void linear_fp8(const PackedWeight& w, const uint32_t* x, int64_t m, float* y, int64_t ldy,
                int64_t b0, int64_t b1) {
  run<true>(w, x, nullptr, m, y, ldy, b0, b1);
}

}  // namespace handoff::ops::detail::avx512bf16
