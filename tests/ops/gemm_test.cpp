// The small f32 GEMM against a double-precision triple loop on shapes around its register tile
// (6 rows × 16 columns), for the AVX2 and portable bodies; and the properties attention relies
// on: a row's result is independent of the other rows, and zero rows of `a` add nothing.
#include "handoff/ops/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
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
  void TearDown() override { cap_kernel_isa(Isa::kAvx512); }
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

TEST_P(OpsGemm, TransposeSwapsIndices) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{13, 21}, {16, 24}, {8, 3}, {64, 288}}) {
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

INSTANTIATE_TEST_SUITE_P(Kernels, OpsGemm, testing::Values(Isa::kPortable, Isa::kAvx2),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace handoff::ops
