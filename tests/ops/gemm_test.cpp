// The small f32 GEMM against a double-precision triple loop on shapes around its register tiles
// (AVX2: 6 rows × 16 columns; AVX-512: 16 × 16 and 8 × 32), for each body, and AVX-512 against
// AVX2 bit for bit; and the properties attention relies
// on: a row's result is independent of the other rows, and zero rows of `a` add nothing; and the
// indexer's fused score.
#include "handoff/ops/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "handoff/ops/cpu_features.h"

namespace handoff::ops {
namespace {

class OpsGemm : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_isa()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    cap_kernel_isa(GetParam());
  }
  void TearDown() override { cap_kernel_isa(Isa::kAmx); }
  std::vector<float> random(size_t n) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& f : v) f = dist(rng_);
    return v;
  }
  std::mt19937 rng_{7};
};

TEST_P(OpsGemm, MatchesNaiveOnOddShapes) {
  for (int64_t m : {1, 5, 6, 7, 12, 13, 25}) {
    for (int64_t n : {1, 3, 7, 8, 9, 15, 16, 17, 40}) {
      for (int64_t k : {1, 3, 64, 97}) {
        for (bool accumulate : {false, true}) {
          const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
          auto a = random(static_cast<size_t>(m * lda));
          auto b = random(static_cast<size_t>(k * ldb));
          auto c = random(static_cast<size_t>(m * ldc));
          const auto c_in = c;
          gemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < ldc; ++j) {
              const size_t at = static_cast<size_t>(i * ldc + j);
              if (j >= n) {  // padding between rows is not touched
                ASSERT_EQ(c[at], c_in[at]);
                continue;
              }
              double want = accumulate ? c_in[at] : 0.0, mag = std::fabs(want);
              for (int64_t p = 0; p < k; ++p) {
                const double t = double(a[static_cast<size_t>(i * lda + p)]) *
                                 b[static_cast<size_t>(p * ldb + j)];
                want += t;
                mag += std::fabs(t);
              }
              ASSERT_NEAR(c[at], want, 1e-6 * mag + 1e-30)
                  << "m=" << m << " n=" << n << " k=" << k << " at " << i << "," << j;
            }
          }
        }
      }
    }
  }
}

TEST_P(OpsGemm, RowsAreIndependentAndZeroRowsAddNothing) {
  const int64_t m = 11, n = 37, k = 70;
  auto a = random(static_cast<size_t>(m * k));
  auto b = random(static_cast<size_t>(k * n));
  std::vector<float> all(static_cast<size_t>(m * n));
  gemm(m, n, k, a.data(), k, b.data(), n, all.data(), n, false);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> one(static_cast<size_t>(n));
    gemm(1, n, k, a.data() + i * k, k, b.data(), n, one.data(), n, false);
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(one[static_cast<size_t>(j)], all[i * n + j]);
  }
  // Accumulating a product whose `a` is zero leaves c bit-identical.
  std::vector<float> zeros(static_cast<size_t>(m * k), 0.0f);
  auto before = all;
  gemm(m, n, k, zeros.data(), k, b.data(), n, all.data(), n, true);
  EXPECT_EQ(all, before);
}

// The indexer's fused score equals, bit for bit, the product it replaces (gemm of keys × q_t)
// followed by the per-key sum from 0 over heads in order of w[h] · max(0, dot); and a double
// check keeps both honest. Shapes straddle the 12-key and 8-head tiles; some dots are NaN (a
// NaN key), which the ReLU turns into 0 like std::max(0.0f, dot).
TEST_P(OpsGemm, ReluWeightedScoresEqualTheProductThenTheHeadSum) {
  for (int64_t n : {1, 5, 8, 11, 12, 13, 25, 64}) {
    for (int64_t heads : {1, 3, 8, 9, 16, 20}) {
      for (int64_t dims : {1, 7, 64, 97}) {
        const int64_t ldk = dims + 3, ldq = heads + 2;
        auto keys = random(static_cast<size_t>(n * ldk));
        if (n > 4) keys[static_cast<size_t>(4 * ldk)] = std::nanf("");
        const auto q_t = random(static_cast<size_t>(dims * ldq));
        const auto w = random(static_cast<size_t>(heads));
        std::vector<float> out(static_cast<size_t>(n) + 3, 7.0f);
        relu_weighted_scores(n, heads, dims, keys.data(), ldk, q_t.data(), ldq, w.data(),
                             out.data());
        std::vector<float> dots(static_cast<size_t>(n * heads));
        gemm(n, heads, dims, keys.data(), ldk, q_t.data(), ldq, dots.data(), heads, false);
        for (int64_t i = 0; i < n; ++i) {
          float want = 0.0f;
          double exact = 0.0, mag = 0.0;
          for (int64_t h = 0; h < heads; ++h) {
            want += w[static_cast<size_t>(h)] *
                    std::max(0.0f, dots[static_cast<size_t>(i * heads + h)]);
            double dot = 0.0, dot_mag = 0.0;
            for (int64_t p = 0; p < dims; ++p) {
              const double t = double(keys[static_cast<size_t>(i * ldk + p)]) *
                               q_t[static_cast<size_t>(p * ldq + h)];
              dot += t;
              dot_mag += std::fabs(t);
            }
            if (std::isnan(dot) || dot < 0.0) continue;
            exact += w[static_cast<size_t>(h)] * dot;
            mag += std::fabs(w[static_cast<size_t>(h)]) * dot_mag;
          }
          const float got = out[static_cast<size_t>(i)];
          ASSERT_EQ(got, want) << "n=" << n << " heads=" << heads << " dims=" << dims << " key "
                               << i;
          // Near-zero dots may fall on either side of the ReLU in f32 and double.
          ASSERT_NEAR(got, exact, 1e-5 * mag + 1e-30) << "key " << i;
        }
        for (size_t i = static_cast<size_t>(n); i < out.size(); ++i) ASSERT_EQ(out[i], 7.0f);
      }
    }
  }
}

// From bf16 keys (the cache's rows as stored) the scores are those of the widened keys, bit for
// bit; odd dims run the kernel's single-element tail after its pairs.
TEST_P(OpsGemm, Bf16KeyScoresEqualTheWidenedKeys) {
  for (int64_t n : {1, 7, 12, 13, 40}) {
    for (int64_t heads : {1, 8, 9}) {
      for (int64_t dims : {1, 2, 7, 64, 65}) {
        const int64_t ldk = dims + 1, ldq = heads + 2;
        const auto values = random(static_cast<size_t>(n * ldk));
        std::vector<uint16_t> stored(values.size());
        std::vector<float> widened(values.size());
        for (size_t i = 0; i < values.size(); ++i) {
          stored[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(values[i]) >> 16);
          widened[i] = std::bit_cast<float>(uint32_t{stored[i]} << 16);
        }
        const auto q_t = random(static_cast<size_t>(dims * ldq));
        const auto w = random(static_cast<size_t>(heads));
        std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n) + 2, 7.0f);
        relu_weighted_scores(n, heads, dims, widened.data(), ldk, q_t.data(), ldq, w.data(),
                             want.data());
        relu_weighted_scores_bf16(n, heads, dims, stored.data(), ldk, q_t.data(), ldq, w.data(),
                                  got.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)])
              << "n=" << n << " heads=" << heads << " dims=" << dims << " key " << i;
        EXPECT_EQ(got[static_cast<size_t>(n)], 7.0f);
      }
    }
  }
}

TEST_P(OpsGemm, TransposeSwapsIndices) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{13, 21},
                            {16, 24},
                            {8, 3},
                            {64, 288},
                            {16, 288},
                            {33, 47},
                            {5, 40}}) {
    std::vector<float> src(static_cast<size_t>(rows * (cols + 1)));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
    std::vector<float> dst(static_cast<size_t>(cols * (rows + 2)), -1.0f);
    transpose(rows, cols, src.data(), cols + 1, dst.data(), rows + 2);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        ASSERT_EQ(dst[static_cast<size_t>(j * (rows + 2) + i)],
                  src[static_cast<size_t>(i * (cols + 1) + j)]);
  }
}

// The AVX-512 body sums every element as the AVX2 one does (from c or 0, one FMA per p in
// order), so the two agree bit for bit, whatever their tiles: on attention's shapes (64 keys ×
// 16 heads over a 288-wide row; 16 heads × 256 latent columns over 64 keys, accumulating) and
// on shapes around both bodies' tiles.
TEST(OpsGemmIsas, Avx512EqualsAvx2BitForBit) {
  if (cpu_max_isa() < Isa::kAvx512) GTEST_SKIP() << "CPU lacks AVX-512";
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  struct Shape {
    int64_t m, n, k, lda, ldb;
  };
  std::vector<Shape> shapes = {{64, 16, 288, 288, 16}, {16, 256, 64, 64, 288}};
  for (int64_t m : {1, 7, 8, 9, 16, 17, 25})
    for (int64_t n : {9, 15, 16, 17, 31, 32, 33, 70}) shapes.push_back({m, n, 37, 40, n + 3});
  for (const Shape& s : shapes) {
    for (bool accumulate : {false, true}) {
      std::vector<float> a(static_cast<size_t>(s.m * s.lda)), b(static_cast<size_t>(s.k * s.ldb));
      std::vector<float> c0(static_cast<size_t>(s.m * (s.n + 1)));
      for (auto* v : {&a, &b, &c0})
        for (float& f : *v) f = dist(rng);
      auto run = [&](Isa isa) {
        cap_kernel_isa(isa);
        auto c = c0;
        gemm(s.m, s.n, s.k, a.data(), s.lda, b.data(), s.ldb, c.data(), s.n + 1, accumulate);
        cap_kernel_isa(Isa::kAmx);
        return c;
      };
      ASSERT_EQ(run(Isa::kAvx512), run(Isa::kAvx2))
          << "m=" << s.m << " n=" << s.n << " k=" << s.k << " accumulate=" << accumulate;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpsGemm,
                         testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace handoff::ops
