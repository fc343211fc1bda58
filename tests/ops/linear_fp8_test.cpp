// FP8 LinearWeight (e4m3 + 128 × 128 block scales kept as they are) against the naive reference
// y = x · dequant(W)ᵀ in double, on awkward shapes, views that start inside a block, stacked
// parts, every e4m3 code, and each kernel level (portable twin, AVX2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/ops/linear.h"
#include "handoff/tensor/fp8_blocks.h"
#include "handoff/tensor/tensor.h"

namespace handoff::ops {
namespace {

using tensor::DType;
using tensor::Fp8Blocks;
using tensor::Tensor;

// A random [n, k] matrix whose 128 × 128 blocks have very different magnitudes, so a scale
// applied to the wrong block shows, quantised.
Fp8Blocks random_fp8(int64_t n, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor w = Tensor::empty({n, k}, DType::kF32);
  std::vector<float> block_mag;
  for (int64_t i = 0; i < ((n + 127) / 128) * ((k + 127) / 128); ++i)
    block_mag.push_back(std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4) * (1.0f + 0.3f * i));
  const int64_t gc = (k + 127) / 128;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w.data<float>()[r * k + c] = dist(rng) * block_mag[(r / 128) * gc + c / 128];
  return tensor::quantize_fp8_blocks(w);
}

// Checks forward() on `src` against the double reference with a bound scaled by Σ|x·w|; where
// activations are rounded (more than 16 rows) the reference takes x rounded to bf16. The AMX
// tiles (more than 4 rows) take exact x as hi + lo bf16 halves, whose residual is up to
// 2^-16 |x|, so their bound is 2e-5 (still far below bf16 rounding, 2^-9).
void check(const Fp8Blocks& src, int64_t m, std::mt19937& rng, bool row_independent = false,
           ActivationPrecision activations = ActivationPrecision::kExact) {
  const int64_t n = src.rows(), k = src.cols();
  SCOPED_TRACE(testing::Message() << "M=" << m << " N=" << n << " K=" << k << " row0=" << src.row0
                                  << " col0=" << src.col0);
  const LinearWeight lw(LinearSource(src), DType::kF8E4M3, row_independent, activations);
  ASSERT_EQ(lw.rounds_activations(), activations == ActivationPrecision::kBf16);
  ASSERT_EQ(lw.dtype(), DType::kF8E4M3);
  const Tensor wf = src.dequantize();
  const int64_t ldx = k + 5, ldy = n + 7;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * ldx));
  for (float& v : x) v = dist(rng);
  constexpr float kSentinel = 12345.0f;
  std::vector<float> y(static_cast<size_t>(m * ldy), kSentinel);
  lw.forward(x.data(), m, y.data(), ldx, ldy);
  const double rel = kernel_isa() >= Isa::kAmx && m > 4 && !row_independent ? 2e-5 : 2e-6;
  if (lw.rounds_activations() && m > 16)
    for (float& v : x) v = tensor::bf16_to_f32(tensor::f32_to_bf16(v));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldy; ++j) {
      const float got = y[static_cast<size_t>(i * ldy + j)];
      if (j >= n) {
        ASSERT_EQ(got, kSentinel) << "wrote past N at m=" << i << " col=" << j;
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < k; ++c) {
        const double p = double(x[static_cast<size_t>(i * ldx + c)]) * wf.data<float>()[j * k + c];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(got, ref, rel * mag + 1e-30) << "m=" << i << " n=" << j;
    }
}

class OpsLinearFp8 : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_isa()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    cap_kernel_isa(GetParam());
  }
  void TearDown() override { cap_kernel_isa(Isa::kAmx); }
};

// N and K not multiples of 64 / 128 (partial scale blocks), M = 1..7 and large.
TEST_P(OpsLinearFp8, MatchesReferenceOnOddShapes) {
  std::mt19937 rng(11);
  for (int64_t k : {1, 7, 100, 128, 129, 300})
    for (int64_t n : {1, 31, 65, 130}) {
      const Fp8Blocks w = random_fp8(n, k, rng);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 16, 40}) check(w, m, rng);
    }
  // K past the prefill path's 512-column chunks.
  for (int64_t k : {600, 1100}) {
    const Fp8Blocks w = random_fp8(70, k, rng);
    for (int64_t m : {1, 3, 4, 9}) check(w, m, rng);
  }
}

// The same with activations rounded to bf16 beyond 16 rows (row counts that leave partial 4-row
// tiles, K past the prefill path's 512-column chunks).
TEST_P(OpsLinearFp8, RoundedActivationsEqualExactMathOnRoundedInputs) {
  std::mt19937 rng(17);
  for (int64_t k : {1, 7, 100, 129, 300, 1100})
    for (int64_t n : {1, 31, 65, 130}) {
      const Fp8Blocks w = random_fp8(n, k, rng);
      for (int64_t m : {1, 16, 17, 18, 19, 40}) check(w, m, rng, false, ActivationPrecision::kBf16);
    }
}

// Tensor-parallel slices: rows and columns starting inside a block use the whole tensor's
// scales (a column slice also shifts the k grid the kernel walks).
TEST_P(OpsLinearFp8, SlicesStartingInsideABlockKeepTheirScales) {
  std::mt19937 rng(12);
  const Fp8Blocks whole = random_fp8(300, 400, rng);
  for (ActivationPrecision a : {ActivationPrecision::kExact, ActivationPrecision::kBf16}) {
    for (const auto& [d, b, e] : std::vector<std::tuple<int, int, int>>{
             {0, 37, 250}, {0, 128, 256}, {1, 50, 333}, {1, 200, 201}, {1, 128, 400}}) {
      const Fp8Blocks part = whole.slice(d, b, e);
      for (int64_t m : {1, 3, 7, 20}) check(part, m, rng, false, a);
    }
    check(whole.slice(0, 5, 290).slice(1, 77, 399), 4, rng, false, a);
  }
}

// Transposed views (MLA's W_UK[h]ᵀ: a row slice of kv_b_proj that may start inside a block,
// applied transposed): the same numbers, each under its own block's scale, and forwarded as an
// FP8 weight of its own.
TEST_P(OpsLinearFp8, TransposedSlicesKeepTheirScales) {
  std::mt19937 rng(13);
  const Fp8Blocks whole = random_fp8(300, 400, rng);
  for (const Fp8Blocks& part : {whole, whole.slice(0, 192, 256), whole.slice(0, 37, 101),
                                whole.slice(0, 5, 290).slice(1, 77, 399)}) {
    const Fp8Blocks t = part.transposed();
    ASSERT_EQ(t.rows(), part.cols());
    ASSERT_EQ(t.cols(), part.rows());
    const Tensor a = part.dequantize(), b = t.dequantize();
    for (int64_t i = 0; i < part.rows(); ++i)
      for (int64_t j = 0; j < part.cols(); ++j)
        ASSERT_EQ(b.data<float>()[j * part.rows() + i], a.data<float>()[i * part.cols() + j])
            << "row0=" << part.row0 << " col0=" << part.col0 << " i=" << i << " j=" << j;
    for (int64_t m : {1, 3, 20}) check(t, m, rng);
  }
}

// m random rows forwarded at once equal the same rows forwarded one at a time, bit for bit.
void expect_rows_equal_single_calls(const LinearWeight& lw, int64_t m, std::mt19937& rng) {
  const int64_t n = lw.out_features(), k = lw.in_features();
  std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n)),
      y1(static_cast<size_t>(n));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  lw.forward(x.data(), m, y.data());
  for (int64_t i = 0; i < m; ++i) {
    lw.forward(x.data() + i * k, 1, y1.data());
    EXPECT_EQ(0, std::memcmp(y1.data(), y.data() + i * n, static_cast<size_t>(n) * sizeof(float)))
        << "row " << i;
  }
}

TEST_P(OpsLinearFp8, RowIndependentRowsEqualSingleRowCalls) {
  std::mt19937 rng(13);
  const Fp8Blocks w = random_fp8(70, 260, rng);
  check(w, 9, rng, /*row_independent=*/true);
  expect_rows_equal_single_calls(LinearWeight(LinearSource(w), DType::kF8E4M3, true), 9, rng);
}

// Batch invariance: the direct path (up to 4 rows, and a partial block's rows a prefill tile leaves
// over) and the FMA prefill tiles sum alike, so a row's result does not depend on how many rows
// came with it. The AMX tiles sum in their own order (k pairs of bf16 halves): there only
// row-independent weights give this.
TEST_P(OpsLinearFp8, RowsDoNotDependOnTheBatch) {
  if (GetParam() >= Isa::kAmx) GTEST_SKIP() << "AMX tiles sum prefill rows in their own order";
  std::mt19937 rng(16);
  const Fp8Blocks w = random_fp8(70, 700, rng);
  // 1, 2, 4 and 3 rows beyond the 5-row tiles: on the widened chunk for the whole first block,
  // on the direct path for the partial second one.
  for (int64_t m : {6, 7, 9, 33})
    expect_rows_equal_single_calls(LinearWeight(LinearSource(w), DType::kF8E4M3), m, rng);
}

// Every finite e4m3 code (both signs, subnormals, 448) through the in-register conversion (and,
// at 128 rows, the prefill path's widening to bf16): an identity x picks out each weight times
// its scale exactly.
TEST_P(OpsLinearFp8, EveryCodeDecodesExactly) {
  for (ActivationPrecision a : {ActivationPrecision::kExact, ActivationPrecision::kBf16}) {
    Fp8Blocks w;
    w.values = Tensor::empty({2, 128}, DType::kF8E4M3);
    for (int c = 0; c < 256; ++c) w.values.data<uint8_t>()[c] = static_cast<uint8_t>(c);
    w.values.data<uint8_t>()[0x7f] = w.values.data<uint8_t>()[0xff] = 0;  // the NaN codes
    w.scales = Tensor::empty({1, 1}, DType::kF32);
    w.scales.data<float>()[0] = 0.375f;  // not a power of two
    const LinearWeight lw(LinearSource(w), DType::kF8E4M3, false, a);
    for (int64_t m : {1, 4, 128}) {
      std::vector<float> x(static_cast<size_t>(m * 128), 0.0f), y(static_cast<size_t>(m * 2));
      for (int64_t step = 0; step < 128; step += m) {
        for (int64_t i = 0; i < m; ++i) {
          std::fill(x.begin() + i * 128, x.begin() + (i + 1) * 128, 0.0f);
          x[static_cast<size_t>(i * 128 + step + i)] = 1.0f;
        }
        lw.forward(x.data(), m, y.data());
        for (int64_t i = 0; i < m; ++i)
          for (int r = 0; r < 2; ++r) {
            const uint8_t code = w.values.data<uint8_t>()[r * 128 + step + i];
            EXPECT_EQ(y[static_cast<size_t>(i * 2 + r)], tensor::f8e4m3_to_f32(code) * 0.375f)
                << "code " << int(code) << " m=" << m;
          }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpsLinearFp8,
                         testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

// Fused parts whose boundary is not on a block (gate 37 rows + up 70 rows): each part keeps its
// own scales, and a dense part mixed with FP8 ones is packed dequantised.
TEST(OpsLinearFp8Parts, StackedPartsEqualTheirReferences) {
  std::mt19937 rng(14);
  const Fp8Blocks a = random_fp8(37, 200, rng), b = random_fp8(70, 200, rng);
  const LinearWeight stacked(std::vector<LinearSource>{a, b}, DType::kF8E4M3);
  const LinearWeight la(LinearSource(a), DType::kF8E4M3), lb(LinearSource(b), DType::kF8E4M3);
  for (int64_t m : {1, 5, 33}) {
    std::vector<float> x(static_cast<size_t>(m * 200));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : x) v = dist(rng);
    std::vector<float> y(static_cast<size_t>(m * 107)), ya(static_cast<size_t>(m * 37)),
        yb(static_cast<size_t>(m * 70));
    stacked.forward(x.data(), m, y.data());
    la.forward(x.data(), m, ya.data());
    lb.forward(x.data(), m, yb.data());
    // Bit for bit: every path sums a row's k block in one f32 chain in k order, then adds
    // partial · scale (the scalings by powers of two round alike).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < 107; ++j) {
        const float got = y[static_cast<size_t>(i * 107 + j)];
        const float want =
            j < 37 ? ya[static_cast<size_t>(i * 37 + j)] : yb[static_cast<size_t>(i * 70 + j - 37)];
        EXPECT_EQ(got, want) << "m=" << m << " row " << i << " col " << j;
      }
  }
  // A dense-dtype pack of FP8 parts dequantises them exactly (e4m3 · scale is exact in f32 here).
  const LinearWeight dense(std::vector<LinearSource>{a, b}, DType::kF32);
  EXPECT_EQ(dense.dtype(), DType::kF32);
  EXPECT_THROW(LinearWeight(std::vector<LinearSource>{a, Tensor::zeros({3, 200}, DType::kF32)},
                            DType::kF8E4M3),
               Error);
  EXPECT_THROW(LinearWeight(std::vector<LinearSource>{a, b.slice(1, 1, 200)}, DType::kF32), Error);
}

// The AVX-512 paths (in-register conversion up to 4 rows, widened bf16 blocks beyond) give the
// AVX2 paths' sums bit for bit, so a row's result does not depend on the CPU's kernel level.
// Rounded activations beyond 16 rows are the exception where they run on vdpbf16ps
// (bf16_dot_products(): AMD), which adds each k pair's products in the other order.
TEST(OpsLinearFp8Levels, Avx512EqualsAvx2BitForBit) {
  if (cpu_max_isa() < Isa::kAvx512) GTEST_SKIP() << "CPU lacks avx512";
  std::mt19937 rng(18);
  const Fp8Blocks w = random_fp8(130, 700, rng);
  for (ActivationPrecision a : {ActivationPrecision::kExact, ActivationPrecision::kBf16}) {
    const LinearWeight lw(LinearSource(w), DType::kF8E4M3, false, a);
    for (int64_t m : {1, 3, 5, 6, 33}) {
      std::vector<float> x(static_cast<size_t>(m * 700)), y2(static_cast<size_t>(m * 130)),
          y5(y2.size());
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (float& v : x) v = dist(rng);
      cap_kernel_isa(Isa::kAvx2);
      lw.forward(x.data(), m, y2.data());
      cap_kernel_isa(Isa::kAvx512);
      lw.forward(x.data(), m, y5.data());
      if (a == ActivationPrecision::kBf16 && m > 16 && bf16_dot_products()) continue;
      EXPECT_EQ(0, std::memcmp(y2.data(), y5.data(), y2.size() * sizeof(float))) << "m=" << m;
    }
  }
  cap_kernel_isa(Isa::kAmx);
}

TEST(OpsLinearFp8Parts, HoldsOneBytePerWeightPlusRowScales) {
  std::mt19937 rng(15);
  const Fp8Blocks w = random_fp8(100, 300, rng);
  const LinearWeight lw(LinearSource(w), DType::kF8E4M3);
  EXPECT_EQ(lw.weight_bytes(), size_t{100 * 300 + 100 * 3 * 4});
  EXPECT_THROW(LinearSource(Tensor::zeros({2, 3}, DType::kF8E4M3)), Error);
}

// quantize_fp8_blocks: scale = amax / 448 per block, the block's largest value lands on ±448,
// an all-zero block gets scale 1, and values round to the nearest e4m3 (ties to even).
TEST(Fp8Quantize, PublishedBlockFormat) {
  Tensor w = Tensor::zeros({130, 260}, DType::kF32);
  auto at = [&](int64_t r, int64_t c) -> float& { return w.data<float>()[r * 260 + c]; };
  at(3, 5) = -7.0f;                   // block (0, 0) amax 7
  at(10, 6) = 1.0f;                   // 1 / (7 / 448) = 64: exact
  at(11, 7) = 7.0f * 17.0f / 448.0f;  // 17 -> between 16 and 18: a tie, to even mantissa (16)
  at(129, 259) = 3.0f;                // block (1, 2), a partial block
  const Fp8Blocks q = tensor::quantize_fp8_blocks(w);
  ASSERT_EQ(q.scales.shape(), (tensor::Shape{2, 3}));
  EXPECT_EQ(q.scales.data<float>()[0], 7.0f / 448.0f);
  EXPECT_EQ(q.scales.data<float>()[1], 1.0f);  // all zero
  EXPECT_EQ(q.scales.data<float>()[5], 3.0f / 448.0f);
  EXPECT_EQ(q.values.data<uint8_t>()[3 * 260 + 5], 0xfe);  // -448
  EXPECT_EQ(tensor::f8e4m3_to_f32(q.values.data<uint8_t>()[10 * 260 + 6]), 64.0f);
  EXPECT_EQ(tensor::f8e4m3_to_f32(q.values.data<uint8_t>()[11 * 260 + 7]), 16.0f);
  EXPECT_EQ(q.values.data<uint8_t>()[129 * 260 + 259], 0x7e);  // 448
  EXPECT_EQ(q.values.data<uint8_t>()[0], 0);
  EXPECT_EQ(tensor::f32_to_f8e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(q.dequantize().data<float>()[3 * 260 + 5], -7.0f);
}

}  // namespace
}  // namespace handoff::ops
