#include "handoff/ops/fp8_blocks.h"

#include <array>
#include <cmath>
#include <cstring>

#include "handoff/error.h"
#include "handoff/tensor/dtype.h"

namespace handoff::ops {

namespace {

// e4m3 → f32 without a table, so the loop vectorizes: the 7 magnitude bits shifted into an f32's
// exponent and mantissa fields read as 2^(e-127)·(1+m/8) (or m·2^-129 when e = 0), and 2^120
// rebiases both to e4m3's 2^(e-7)·(1+m/8) and m·2^-9 exactly. The NaN codes (never written
// by quantize_fp8_row for a finite input) read as ±480.
inline float e4m3_value(uint8_t code) {
  const uint32_t bits =
      (static_cast<uint32_t>(code & 0x80u) << 24) | (static_cast<uint32_t>(code & 0x7fu) << 20);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f * 0x1p120f;
}

}  // namespace

float fp8_pow2_scale(float amax) {
  const float ratio = std::fmax(amax, 1e-4f) / 448.0f;
  int exp;
  const float mantissa = std::frexp(ratio, &exp);  // ratio = mantissa · 2^exp, mantissa in [0.5, 1)
  return std::ldexp(1.0f, mantissa == 0.5f ? exp - 1 : exp);
}

void quantize_fp8_row(const float* x, int64_t n, uint8_t* codes, float* scales) {
  const int64_t width = fp8_block_width(n);
  for (int64_t b0 = 0, b = 0; b0 < n; b0 += width, ++b) {
    const int64_t b1 = std::min(n, b0 + width);
    float amax = 0.0f;
    for (int64_t i = b0; i < b1; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float scale = fp8_pow2_scale(amax);
    scales[b] = scale;
    const float inverse = 1.0f / scale;  // exact: a power of two
    for (int64_t i = b0; i < b1; ++i) codes[i] = tensor::f32_to_f8e4m3(x[i] * inverse);
  }
}

void dequantize_fp8_row(const uint8_t* codes, const float* scales, int64_t n, float* out) {
  const int64_t width = fp8_block_width(n);
  for (int64_t b0 = 0, b = 0; b0 < n; b0 += width, ++b) {
    const int64_t b1 = std::min(n, b0 + width);
    for (int64_t i = b0; i < b1; ++i) out[i] = e4m3_value(codes[i]) * scales[b];
  }
}

void round_fp8_row(float* x, int64_t n) {
  // A row is a head (≤ a few blocks): small stack buffers, no allocation per call.
  constexpr int64_t kMax = 1024;
  if (n > kMax) fail("round_fp8_row: a row of {} values is longer than {}", n, kMax);
  std::array<uint8_t, kMax> codes;
  std::array<float, kMax / kFp8BlockValues + 1> scales;
  quantize_fp8_row(x, n, codes.data(), scales.data());
  dequantize_fp8_row(codes.data(), scales.data(), n, x);
}

void hadamard_rotate(float* x, int64_t rows, int64_t n) {
  if (n <= 0 || (n & (n - 1)) != 0) fail("hadamard_rotate: length {} is not a power of two", n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    // Butterflies of growing span give Sylvester order: H_2n = [[H_n, H_n], [H_n, -H_n]].
    for (int64_t span = 1; span < n; span *= 2)
      for (int64_t i = 0; i < n; i += 2 * span)
        for (int64_t j = i; j < i + span; ++j) {
          const float a = v[j], b = v[j + span];
          v[j] = a + b;
          v[j + span] = a - b;
        }
    for (int64_t i = 0; i < n; ++i) v[i] *= scale;
  }
}

}  // namespace handoff::ops
