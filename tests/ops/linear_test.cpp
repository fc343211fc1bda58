// LinearWeight against the naive reference on awkward shapes, both weight dtypes, strided x/y,
// the small-M kernels (AVX-512, AVX2 and portable) and the oneDNN large-M path.
#include "handoff/ops/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/ops/reference/reference.h"
#include "handoff/tensor/fp8_blocks.h"
#include "handoff/tensor/tensor.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::ops {
namespace {

using tensor::DType;
using tensor::Tensor;

// A [N, K] weight in `dtype` that is a row-strided view (rows K + 3 apart).
Tensor random_weight(int64_t n, int64_t k, DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor full = Tensor::empty({n, k + 3}, DType::kF32);
  for (int64_t i = 0; i < full.numel(); ++i) full.data<float>()[i] = dist(rng);
  Tensor converted = full.to(dtype);
  return converted.slice(1, 1, k + 1);
}

struct Case {
  int64_t m, n, k;
  DType dtype;
};

// Checks y against the reference with a bound scaled by Σ|x·w| (the conditioning of each dot
// product): `rel` is the allowed error per unit of that sum. Where activations are rounded (more
// than 16 rows) the reference takes x rounded to bf16. On AMX, bf16 weights beyond 4 rows take
// exact x as hi + lo bf16 halves (residual up to 2^-16 |x|), so the bound is at least 2e-5.
void check(const Case& c, double rel, std::mt19937& rng,
           ActivationPrecision activations = ActivationPrecision::kExact) {
  if (c.dtype == DType::kBF16 && kernel_isa() >= Isa::kAmx && c.m > 4) rel = std::max(rel, 2e-5);
  SCOPED_TRACE(testing::Message() << "M=" << c.m << " N=" << c.n << " K=" << c.k
                                  << " dtype=" << tensor::dtype_name(c.dtype));
  const Tensor w = random_weight(c.n, c.k, c.dtype, rng);
  ASSERT_FALSE(w.is_contiguous());
  const LinearWeight lw(w, c.dtype, false, activations);
  ASSERT_EQ(lw.rounds_activations(),
            activations == ActivationPrecision::kBf16 && c.dtype != DType::kF32);
  ASSERT_EQ(lw.out_features(), c.n);
  ASSERT_EQ(lw.in_features(), c.k);
  const int64_t ldx = c.k + 5, ldy = c.n + 7;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(c.m * ldx));
  for (float& v : x) v = dist(rng);
  constexpr float kSentinel = 12345.0f;
  std::vector<float> y(static_cast<size_t>(c.m * ldy), kSentinel);
  std::vector<float> ref(static_cast<size_t>(c.m * ldy), kSentinel);
  lw.forward(x.data(), c.m, y.data(), ldx, ldy);
  if (lw.rounds_activations() && c.m > 16)
    for (float& v : x) v = tensor::bf16_to_f32(tensor::f32_to_bf16(v));
  reference::linear(x.data(), c.m, c.k, w, ref.data(), ldx, ldy);

  // |x|·|w| per output, for the error bound.
  std::vector<float> absx(x.size());
  for (size_t i = 0; i < x.size(); ++i) absx[i] = std::fabs(x[i]);
  Tensor absw = w.to(DType::kF32);
  for (int64_t i = 0; i < absw.numel(); ++i)
    absw.data<float>()[i] = std::fabs(absw.data<float>()[i]);
  std::vector<float> mag(ref.size());
  reference::linear(absx.data(), c.m, c.k, absw, mag.data(), ldx, ldy);

  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < ldy; ++j) {
      const size_t at = static_cast<size_t>(i * ldy + j);
      if (j >= c.n) {
        ASSERT_EQ(y[at], kSentinel) << "wrote past N at m=" << i << " col=" << j;
        continue;
      }
      ASSERT_NEAR(y[at], ref[at], rel * mag[at] + 1e-6) << "m=" << i << " n=" << j;
    }
  }
}

// Each kernel level this CPU has, capped in turn; levels above the CPU's are skipped.
class OpsLinear : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_isa()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    cap_kernel_isa(GetParam());
  }
  void TearDown() override { cap_kernel_isa(Isa::kAmx); }
};

TEST_P(OpsLinear, SmallMMatchesReference) {
  std::mt19937 rng(1234);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int64_t k : {1, 7, 17, 33, 100, 257})
      for (int64_t n : {1, 3, 31, 65})
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16}) check({m, n, k, dtype}, 1e-5, rng);
}

// K past the kernels' K chunk (1024), so partial sums of several chunks accumulate in y.
TEST_P(OpsLinear, LongKAccumulatesAcrossChunks) {
  std::mt19937 rng(4321);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int64_t m : {1, 2, 5, 7, 16}) check({m, 70, 2100, dtype}, 1e-5, rng);
}

TEST_P(OpsLinear, WideRowsSplitAcrossThreads) {
  std::mt19937 rng(99);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (int64_t m : {1, 4, 13}) check({m, 1000, 300, dtype}, 1e-5, rng);
}

// Prefill-sized M with exact activations on each level's large-M path (oneDNN where it has a fast
// matmul: f32 weights, and bf16 ones on hi + lo halves at the portable level; the AMX tiles on
// hi + lo halves for bf16 at the amx level; the FMA kernels elsewhere); the bf16 bound allows the
// split's ~2^-16 residual.
TEST_P(OpsLinear, LargeMExactMatchesReference) {
  std::mt19937 rng(1357);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{65, 257}, {130, 2100}, {31, 7}})
      for (int64_t m : {17, 40}) check({m, n, k, dtype}, dtype == DType::kBF16 ? 5e-5 : 1e-5, rng);
}

// Rounded activations: exact up to 16 rows, rounded beyond (on x before the FMA kernels, or
// oneDNN's one bf16 GEMM at the portable level); K past the kernels' K chunk.
TEST_P(OpsLinear, RoundedActivationsEqualExactMathOnRoundedInputs) {
  std::mt19937 rng(2468);
  for (int64_t k : {1, 7, 33, 100, 257, 2100})
    for (int64_t n : {1, 31, 65, 130})
      for (int64_t m : {1, 4, 16, 17, 40})
        check({m, n, k, DType::kBF16}, 1e-5, rng, ActivationPrecision::kBf16);
  // f32 weights take x as it is.
  check({3, 31, 100, DType::kF32}, 1e-5, rng, ActivationPrecision::kBf16);
}

// x = 1 + 2^-12 is no bf16 value: exact activations give 64 · x, rounded ones (more than 16
// rows) 64 · 1.
TEST_P(OpsLinear, RoundedActivationsAreRounded) {
  Tensor ones = Tensor::empty({3, 64}, DType::kF32);
  std::fill(ones.data<float>(), ones.data<float>() + ones.numel(), 1.0f);
  const Tensor w = ones.to(DType::kBF16);
  for (int64_t m : {1, 16, 17, 40}) {
    std::vector<float> x(static_cast<size_t>(m * 64), 1.0f + 0x1p-12f);
    std::vector<float> y(static_cast<size_t>(m * 3));
    for (ActivationPrecision a : {ActivationPrecision::kExact, ActivationPrecision::kBf16}) {
      LinearWeight(w, DType::kBF16, false, a).forward(x.data(), m, y.data());
      const bool rounded = a == ActivationPrecision::kBf16 && m > 16;
      const float expect = rounded ? 64.0f : 64.0f * (1.0f + 0x1p-12f);
      for (float v : y) ASSERT_EQ(v, expect) << "m=" << m;
    }
  }
}

// Where rounded activations go through vdpbf16ps (AMD with AVX512_BF16): each output is the
// twin below bit for bit. Per K chunk of 1024 (so K = 2100 spans three) a sum from zero over
// the k pairs, k + 1's product added before k's, each as one FMA; y is the first chunk's sum,
// then y + each later one. Rows 17 and 23 cover the 6-row tiles and their tails, N = 70 a block
// with unused lanes.
TEST(OpsLinearBf16Dot, SumsEachPairAsTwoFmasOddFirst) {
  if (!bf16_dot_products()) GTEST_SKIP() << "rounded activations take the FMA kernels here";
  std::mt19937 rng(97);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int64_t n = 70, k = 2100, kp = 2112, chunk = 1024;
  const Tensor w = random_weight(n, k, DType::kBF16, rng).contiguous();
  const LinearWeight lw(w, DType::kBF16, false, ActivationPrecision::kBf16);
  const Tensor w32 = w.to(DType::kF32);
  auto weight = [&](int64_t r, int64_t c) { return c < k ? w32.data<float>()[r * k + c] : 0.0f; };
  for (int64_t m : {17, 23}) {
    std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
    for (float& v : x) v = dist(rng);
    lw.forward(x.data(), m, y.data());
    auto rounded = [&](int64_t i, int64_t c) {
      return c < k ? tensor::bf16_to_f32(tensor::f32_to_bf16(x[static_cast<size_t>(i * k + c)]))
                   : 0.0f;
    };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        float expect = 0.0f;
        for (int64_t c0 = 0; c0 < kp; c0 += chunk) {
          float sum = 0.0f;
          for (int64_t c = c0; c < std::min(kp, c0 + chunk); c += 2) {
            sum = std::fma(weight(r, c + 1), rounded(i, c + 1), sum);
            sum = std::fma(weight(r, c), rounded(i, c), sum);
          }
          expect = c0 == 0 ? sum : expect + sum;
        }
        ASSERT_EQ(y[static_cast<size_t>(i * n + r)], expect)
            << "m=" << m << " row " << i << " col " << r;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpsLinear,
                         testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512, Isa::kAmx),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(OpsLinearLargeM, F32MatchesReference) {
  std::mt19937 rng(7);
  for (int64_t k : {1, 17, 100, 257})
    for (int64_t n : {1, 31, 65}) check({40, n, k, DType::kF32}, 1e-5, rng);
  check({130, 200, 96, DType::kF32}, 1e-5, rng);
}

TEST(OpsLinearLargeM, BF16KeepsActivationsF32Exact) {
  // The large-M bf16 path keeps activations f32 (the FMA kernels) or, where oneDNN runs it,
  // splits them into two bf16 halves (residual ~2^-16), so it matches the f32-activation
  // reference far below bf16 rounding (2^-9 = 2e-3).
  std::mt19937 rng(8);
  for (int64_t k : {1, 17, 100, 257})
    for (int64_t n : {1, 31, 65}) check({40, n, k, DType::kBF16}, 5e-5, rng);
}

TEST(OpsLinear, AcceptsAnySourceDtype) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor w32 = Tensor::empty({5, 9}, DType::kF32);
  for (int64_t i = 0; i < w32.numel(); ++i) w32.data<float>()[i] = dist(rng);
  const Tensor w16 = w32.to(DType::kF16);
  const LinearWeight lw(w16, DType::kF32);
  std::vector<float> x(9), y(5), ref(5);
  for (float& v : x) v = dist(rng);
  lw.forward(x.data(), 1, y.data());
  reference::linear(x.data(), 1, 9, w16, ref.data(), 9, 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])));
}

TEST(OpsLinear, ConcurrentForwardOnOneWeight) {
  std::mt19937 rng(5);
  const Tensor w = random_weight(70, 50, DType::kBF16, rng).contiguous();
  const LinearWeight lw(w, DType::kBF16);
  std::vector<float> x(static_cast<size_t>(40 * 50));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  std::vector<float> expect_small(3 * 70), expect_large(40 * 70);
  lw.forward(x.data(), 3, expect_small.data());
  lw.forward(x.data(), 40, expect_large.data());
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<float> ys(3 * 70), yl(40 * 70);
      bool good = true;
      for (int it = 0; it < 20; ++it) {
        lw.forward(x.data(), 3, ys.data());
        lw.forward(x.data(), 40, yl.data());
        good = good && ys == expect_small && yl == expect_large;
      }
      ok[t] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

// Packing row-stacked parts equals packing their concatenation, bit for bit, on both paths.
TEST(OpsLinear, StackedPartsEqualTheirConcatenation) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const Tensor a = random_weight(37, 45, dtype, rng), b = random_weight(70, 45, dtype, rng);
    Tensor whole = Tensor::empty({107, 45}, DType::kF32);
    const Tensor a32 = a.to(DType::kF32), b32 = b.to(DType::kF32);
    std::memcpy(whole.data<float>(), a32.data<float>(), a32.nbytes());
    std::memcpy(whole.data<float>() + a32.numel(), b32.data<float>(), b32.nbytes());
    const LinearWeight stacked({a, b}, dtype), concatenated(whole, dtype);
    ASSERT_EQ(stacked.out_features(), 107);
    for (int64_t m : {1, 3, 40}) {
      std::vector<float> x(static_cast<size_t>(m * 45));
      std::normal_distribution<float> dist(0.0f, 1.0f);
      for (float& v : x) v = dist(rng);
      std::vector<float> y1(static_cast<size_t>(m * 107)), y2(y1.size());
      stacked.forward(x.data(), m, y1.data());
      concatenated.forward(x.data(), m, y2.data());
      EXPECT_EQ(y1, y2) << "m=" << m << " dtype=" << tensor::dtype_name(dtype);
    }
  }
  EXPECT_THROW(LinearWeight(std::vector<LinearSource>{Tensor::zeros({2, 3}, DType::kF32),
                                                      Tensor::zeros({2, 4}, DType::kF32)},
                            DType::kF32),
               Error);
}

// forward_group runs many products in one region over all their blocks: each result equals
// forward()'s bit for bit, whatever the mix of dtypes (FP8 included), strides, row counts
// (a large-M product runs on its own first), row independence or position in the group, and
// nothing outside each y's rows is written.
TEST(OpsLinear, GroupedProductsEqualSingleForwards) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  struct Spec {
    int64_t n, k, m;
    DType dtype;
    bool row_independent;
  };
  const std::vector<Spec> specs = {
      {64, 1024, 1, DType::kBF16, false},   {8, 1024, 1, DType::kF32, false},
      {672, 1024, 1, DType::kBF16, false},  {37, 45, 3, DType::kBF16, false},
      {130, 256, 2, DType::kF8E4M3, false}, {70, 45, 5, DType::kF32, true},
      {100, 64, 40, DType::kBF16, false},   {90, 80, 33, DType::kF32, false}};
  std::vector<LinearWeight> weights;
  std::vector<std::vector<float>> xs, want, got;
  std::vector<LinearProduct> products;
  for (const Spec& s : specs) {
    Tensor w = Tensor::empty({s.n, s.k}, DType::kF32);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
    if (s.dtype == DType::kF8E4M3)
      weights.emplace_back(tensor::quantize_fp8_blocks(w), s.dtype, s.row_independent);
    else
      weights.emplace_back(w, s.dtype, s.row_independent);
    const int64_t ldx = s.k + 3, ldy = s.n + 2;
    xs.emplace_back(static_cast<size_t>(s.m * ldx));
    for (float& v : xs.back()) v = dist(rng);
    want.emplace_back(static_cast<size_t>(s.m * ldy), -7.0f);
    weights.back().forward(xs.back().data(), s.m, want.back().data(), ldx, ldy);
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    got.emplace_back(want[i].size(), -7.0f);
    products.push_back(
        {&weights[i], xs[i].data(), specs[i].m, got[i].data(), specs[i].k + 3, specs[i].n + 2});
  }
  for (int threads : {1, 2, 3}) {
    std::thread([&] {
      tensor::set_num_threads(threads);
      for (auto& g : got) std::fill(g.begin(), g.end(), -7.0f);
      LinearWeight::forward_group(products);
    }).join();
    for (size_t i = 0; i < specs.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << "product " << i << ", " << threads << " threads";
  }
  LinearWeight::forward_group({});  // an empty group does nothing
}

// Any split of a product's 64-row blocks gives forward()'s numbers, for every dtype.
TEST(OpsLinear, BlockRangesEqualTheWholeForward) {
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    SCOPED_TRACE(std::string(tensor::dtype_name(dtype)));
    const int64_t n = 200, k = 256, m = 3;  // 4 blocks, the last one partial
    Tensor w = Tensor::empty({n, k}, DType::kF32);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
    const LinearWeight lw = dtype == DType::kF8E4M3
                                ? LinearWeight(tensor::quantize_fp8_blocks(w), dtype)
                                : LinearWeight(w, dtype);
    ASSERT_EQ(lw.row_blocks(), 4);
    std::vector<float> x(static_cast<size_t>(m * k));
    for (float& v : x) v = dist(rng);
    std::vector<float> want(static_cast<size_t>(m * n)), got(want.size(), -7.0f);
    lw.forward(x.data(), m, want.data());
    lw.forward_blocks(x.data(), m, got.data(), 0, 1);
    lw.forward_blocks(x.data(), m, got.data(), 1, 1);  // empty
    lw.forward_blocks(x.data(), m, got.data(), 1, 4);
    EXPECT_EQ(got, want);
    EXPECT_THROW(lw.forward_blocks(x.data(), m, got.data(), 3, 5), Error);
    EXPECT_THROW(lw.forward_blocks(x.data(), m, got.data(), 2, 1), Error);
  }
  // Row independence, at a prefill-sized M: each row alone, as forward() computes it.
  Tensor w = Tensor::empty({100, 48}, DType::kF32);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = dist(rng);
  const LinearWeight independent(w, DType::kBF16, /*row_independent=*/true);
  const int64_t m = 40;
  std::vector<float> x(static_cast<size_t>(m * 48)), want(static_cast<size_t>(m * 100)),
      got(want.size(), -7.0f);
  for (float& v : x) v = dist(rng);
  independent.forward(x.data(), m, want.data());
  independent.forward_blocks(x.data(), m, got.data(), 1, 2);
  independent.forward_blocks(x.data(), m, got.data(), 0, 1);
  EXPECT_EQ(got, want);
}

TEST(OpsLinear, RejectsBadInput) {
  const Tensor w3 = Tensor::zeros({2, 3, 4}, DType::kF32);
  EXPECT_THROW(LinearWeight(w3, DType::kF32), Error);
  const Tensor w = Tensor::zeros({2, 3}, DType::kF32);
  EXPECT_THROW(LinearWeight(w, DType::kF16), Error);
  const LinearWeight lw(w, DType::kF32);
  std::vector<float> x(6), y(4);
  EXPECT_THROW(lw.forward(x.data(), 1, y.data(), 2, 2), Error);
}

}  // namespace
}  // namespace handoff::ops
