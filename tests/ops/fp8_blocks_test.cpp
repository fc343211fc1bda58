// The FP8 indexer path's building blocks against first principles: the Hadamard rotation
// against the Sylvester matrix, e4m3 rounding against the 256 codes, and the block quantizer
// against the rule in tests/data/golden/README.md ("The FP8 indexer path").
#include "handoff/ops/fp8_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "handoff/error.h"
#include "handoff/tensor/dtype.h"

namespace handoff::ops {
namespace {

std::vector<float> random_row(int64_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// Sylvester's construction: H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]].
int sylvester(int64_t i, int64_t j) { return __builtin_popcountll(i & j) % 2 ? -1 : 1; }

TEST(HadamardRotate, EqualsTheScaledSylvesterMatrix) {
  for (int64_t n : {1, 2, 4, 16, 64, 128}) {
    const int64_t rows = 3;
    auto x = random_row(rows * n, static_cast<unsigned>(n), 1.0f);
    auto y = x;
    hadamard_rotate(y.data(), rows, n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t i = 0; i < n; ++i) want += x[r * n + i] * sylvester(i, j);
        want /= std::sqrt(static_cast<double>(n));
        EXPECT_NEAR(y[r * n + j], want, 1e-5) << "n " << n << " row " << r << " col " << j;
      }
  }
}

TEST(HadamardRotate, IsItsOwnInverseAndRefusesOtherLengths) {
  auto x = random_row(64, 7, 2.0f);
  auto y = x;
  hadamard_rotate(y.data(), 1, 64);
  EXPECT_NE(y, x);
  hadamard_rotate(y.data(), 1, 64);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
  std::vector<float> odd(24);
  EXPECT_THROW(hadamard_rotate(odd.data(), 1, 24), Error);
}

TEST(E4m3, EveryCodeRoundTripsAndTiesGoToEven) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    const float v = tensor::f8e4m3_to_f32(static_cast<uint8_t>(c));
    const uint8_t back = tensor::f32_to_f8e4m3(v);
    if (c == 0x80) {
      EXPECT_EQ(back, 0x80);  // -0 keeps its sign
      continue;
    }
    EXPECT_EQ(back, c) << v;
  }
  // Halfway cases: 1 + 1/16 lies between 1 (mantissa 0) and 1.125 (mantissa 1): to 1.
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(1.0625f)), 1.0f);
  // 1.1875 lies between 1.125 (mantissa 1) and 1.25 (mantissa 2): to 1.25.
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(1.1875f)), 1.25f);
  // Subnormals are multiples of 2^-9; half of the smallest rounds to zero, a bit more to it.
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(std::ldexp(1.0f, -10))), 0.0f);
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(std::ldexp(1.1f, -10))),
            std::ldexp(1.0f, -9));
  // Past the largest finite value: clamped to ±448, never NaN.
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(500.0f)), 448.0f);
  EXPECT_EQ(tensor::f8e4m3_to_f32(tensor::f32_to_f8e4m3(-1e9f)), -448.0f);
}

// The row dequantizer decodes by bit arithmetic, not the scalar converter: every finite code
// must read the same, subnormals included.
TEST(Fp8BlockQuant, DequantizationReadsEveryFiniteCodeAsTheConverterDoes) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f) codes.push_back(static_cast<uint8_t>(c));
  const int64_t n = static_cast<int64_t>(codes.size());
  std::vector<float> scales(static_cast<size_t>(fp8_blocks_per_row(n)), 0.25f), out(codes.size());
  dequantize_fp8_row(codes.data(), scales.data(), n, out.data());
  for (size_t i = 0; i < codes.size(); ++i)
    EXPECT_EQ(out[i], tensor::f8e4m3_to_f32(codes[i]) * 0.25f) << static_cast<int>(codes[i]);
}

TEST(Fp8BlockQuant, ScalesArePowersOfTwoThatFitTheBlockInto448) {
  EXPECT_EQ(fp8_pow2_scale(448.0f), 1.0f);  // exactly 448: 2^ceil(0)
  EXPECT_EQ(fp8_pow2_scale(449.0f), 2.0f);
  EXPECT_EQ(fp8_pow2_scale(224.0f), 0.5f);
  EXPECT_EQ(fp8_pow2_scale(0.0f), std::ldexp(1.0f, -22));  // amax clamped to 1e-4
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-13.0f, 20.0f);  // above the 1e-4 clamp
  for (int i = 0; i < 1000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const float s = fp8_pow2_scale(amax);
    int e;
    EXPECT_EQ(std::frexp(s, &e), 0.5f) << s;  // a power of two
    EXPECT_LE(amax / s, 448.0f);
    EXPECT_GT(amax / s, 224.0f);
  }
}

TEST(Fp8BlockQuant, RowsQuantizePerBlockOf128AndDequantizeExactly) {
  for (int64_t n : {16, 64, 128, 300}) {
    SCOPED_TRACE(n);
    auto x = random_row(n, static_cast<unsigned>(n), 3.0f);
    x[static_cast<size_t>(n / 2)] = 40.0f;  // an outlier sets its own block's scale only
    const int64_t width = n < 128 ? n : 128;
    const int64_t blocks = (n + width - 1) / width;
    ASSERT_EQ(fp8_blocks_per_row(n), blocks);
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    std::vector<float> scales(static_cast<size_t>(blocks)), out(static_cast<size_t>(n));
    quantize_fp8_row(x.data(), n, codes.data(), scales.data());
    dequantize_fp8_row(codes.data(), scales.data(), n, out.data());
    for (int64_t b = 0; b < blocks; ++b) {
      float amax = 0;
      for (int64_t i = b * width; i < std::min(n, (b + 1) * width); ++i)
        amax = std::max(amax, std::fabs(x[i]));
      const float want_scale = std::exp2(std::ceil(std::log2(static_cast<double>(amax) / 448.0)));
      EXPECT_EQ(scales[b], want_scale) << "block " << b;
      for (int64_t i = b * width; i < std::min(n, (b + 1) * width); ++i) {
        EXPECT_EQ(codes[i], tensor::f32_to_f8e4m3(x[i] / want_scale)) << i;
        EXPECT_EQ(out[i], tensor::f8e4m3_to_f32(codes[i]) * want_scale) << i;
        // e4m3 keeps 3 mantissa bits: relative error ≤ 2^-4 above the subnormal range.
        if (std::fabs(x[i]) / want_scale >= std::ldexp(1.0f, -6)) {
          EXPECT_LE(std::fabs(out[i] - x[i]), std::fabs(x[i]) / 16 + 1e-12) << i;
        }
      }
    }
    auto rounded = x;
    round_fp8_row(rounded.data(), n);
    EXPECT_EQ(rounded, out);
  }
}

}  // namespace
}  // namespace handoff::ops
