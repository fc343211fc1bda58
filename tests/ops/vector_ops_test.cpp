// Row-wise kernels against their naive twins on lengths that are not multiples of the vector
// width, for the AVX-512, AVX2 and portable bodies.
#include "handoff/ops/vector_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "handoff/error.h"
#include "handoff/ops/cpu_features.h"
#include "handoff/ops/reference/reference.h"

namespace handoff::ops {
namespace {

constexpr int64_t kLengths[] = {1, 7, 15, 16, 17, 33, 100, 257, 1000};

std::vector<float> random_vec(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  double abs = 1e-7) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + abs) << "at " << i;
}

// Each kernel level this CPU has, capped in turn; levels above the CPU's are skipped.
class OpsVector : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu_max_isa()) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
    cap_kernel_isa(GetParam());
  }
  void TearDown() override { cap_kernel_isa(Isa::kAmx); }
  std::mt19937 rng_{42};
};

TEST_P(OpsVector, Dot) {
  for (int64_t n : kLengths) {
    auto a = random_vec(n, rng_), b = random_vec(n, rng_);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i) mag += std::fabs(a[i] * b[i]);
    EXPECT_NEAR(dot(a.data(), b.data(), n), reference::dot(a.data(), b.data(), n), 1e-6 * mag)
        << "n=" << n;
  }
}

TEST_P(OpsVector, Axpy) {
  for (int64_t n : kLengths) {
    auto x = random_vec(n, rng_), y = random_vec(n + 1, rng_);
    auto want = y;
    y[n] = want[n] = 77.0f;  // past the end: must stay untouched
    axpy(0.37f, x.data(), y.data(), n);
    reference::axpy(0.37f, x.data(), want.data(), n);
    expect_close(y, want, 1e-6, 1e-6);
  }
}

TEST_P(OpsVector, RmsNorm) {
  for (int64_t dim : kLengths) {
    const int64_t rows = 3;
    auto x = random_vec(rows * dim, rng_, 3.0f), w = random_vec(dim, rng_);
    std::vector<float> out(x.size()), want(x.size());
    rms_norm(x.data(), w.data(), 1e-6f, rows, dim, out.data());
    reference::rms_norm(x.data(), w.data(), 1e-6f, rows, dim, want.data());
    expect_close(out, want, 1e-5);
    rms_norm(x.data(), w.data(), 1e-6f, rows, dim, x.data());  // in place
    expect_close(x, want, 1e-5);
  }
}

TEST_P(OpsVector, AddRmsNorm) {
  for (int64_t dim : kLengths) {
    const int64_t rows = 2;
    auto res = random_vec(rows * dim, rng_), x = random_vec(rows * dim, rng_);
    auto w = random_vec(dim, rng_);
    auto res_want = res;
    std::vector<float> out(x.size()), want(x.size());
    add_rms_norm(res.data(), x.data(), w.data(), 1e-5f, rows, dim, out.data());
    reference::add_rms_norm(res_want.data(), x.data(), w.data(), 1e-5f, rows, dim, want.data());
    expect_close(res, res_want, 0, 0);
    expect_close(out, want, 1e-5);
  }
}

TEST_P(OpsVector, LayerNorm) {
  for (int64_t dim : kLengths) {
    if (dim < 2) continue;
    const int64_t rows = 2;
    auto x = random_vec(rows * dim, rng_, 2.0f), w = random_vec(dim, rng_),
         b = random_vec(dim, rng_);
    for (float& v : x) v += 5.0f;  // an offset mean exercises the centring
    std::vector<float> out(x.size()), want(x.size());
    layer_norm(x.data(), w.data(), b.data(), 1e-5f, rows, dim, out.data());
    reference::layer_norm(x.data(), w.data(), b.data(), 1e-5f, rows, dim, want.data());
    expect_close(out, want, 1e-4, 1e-5);
  }
}

TEST_P(OpsVector, Rope) {
  for (bool interleaved : {true, false}) {
    for (int64_t rot : {2, 6, 34, 64}) {
      const int64_t heads = 3, stride = rot + 5;
      auto x = random_vec(heads * stride, rng_);
      std::vector<float> cos(rot / 2), sin(rot / 2);
      for (int64_t i = 0; i < rot / 2; ++i) {
        cos[i] = std::cos(0.3f * (i + 1));
        sin[i] = std::sin(0.3f * (i + 1));
      }
      auto want = x;
      rope(x.data(), heads, stride, rot, cos.data(), sin.data(), interleaved);
      reference::rope(want.data(), heads, stride, rot, cos.data(), sin.data(), interleaved);
      expect_close(x, want, 1e-6, 1e-6);
    }
  }
}

TEST_P(OpsVector, RopeSemantics) {
  // One pair rotated by 90°: (a, b) -> (-b, a), in each pairing.
  float inter[4] = {1, 2, 3, 4};
  const float c[2] = {0, 1}, s[2] = {1, 0};
  rope(inter, 1, 4, 4, c, s, true);
  EXPECT_FLOAT_EQ(inter[0], -2);
  EXPECT_FLOAT_EQ(inter[1], 1);
  EXPECT_FLOAT_EQ(inter[2], 3);
  EXPECT_FLOAT_EQ(inter[3], 4);
  float half[4] = {1, 2, 3, 4};
  rope(half, 1, 4, 4, c, s, false);
  EXPECT_FLOAT_EQ(half[0], -3);
  EXPECT_FLOAT_EQ(half[2], 1);
  EXPECT_FLOAT_EQ(half[1], 2);
  EXPECT_FLOAT_EQ(half[3], 4);
}

TEST_P(OpsVector, Softmax) {
  for (int64_t n : kLengths) {
    auto x = random_vec(n, rng_, 5.0f);
    auto want = x;
    softmax(x.data(), n);
    reference::softmax(want.data(), n);
    expect_close(x, want, 2e-6, 1e-12);
  }
  std::vector<float> big = {1000.0f, -1000.0f, 999.0f};
  softmax(big.data(), 3);
  EXPECT_NEAR(big[0], 1.0f / (1.0f + std::exp(-1.0f)), 1e-6);
  EXPECT_EQ(big[1], 0.0f);
}

TEST_P(OpsVector, SiluMul) {
  for (int64_t n : kLengths) {
    auto g = random_vec(n, rng_, 4.0f), u = random_vec(n, rng_);
    std::vector<float> out(n), want(n);
    silu_mul(g.data(), u.data(), out.data(), n);
    reference::silu_mul(g.data(), u.data(), want.data(), n);
    expect_close(out, want, 2e-6, 1e-12);
  }
  std::vector<float> g = {-200.0f, 200.0f, 0.0f}, u = {1, 1, 1}, out(3);
  silu_mul(g.data(), u.data(), out.data(), 3);
  EXPECT_NEAR(out[0], 0.0f, 1e-30);
  EXPECT_FLOAT_EQ(out[1], 200.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST_P(OpsVector, TopK) {
  for (int64_t n : kLengths) {
    auto x = random_vec(n, rng_);
    for (int64_t k : {int64_t{1}, n / 2, n}) {
      if (k == 0) continue;
      std::vector<int32_t> got(k), want(k);
      topk(x.data(), n, k, got.data());
      reference::topk(x.data(), n, k, want.data());
      EXPECT_EQ(got, want) << "n=" << n << " k=" << k;
    }
  }
}

TEST_P(OpsVector, TopKTiesGoToLowerIndex) {
  const float x[] = {1, 3, 2, 3, 1, 3};
  int32_t idx[4];
  topk(x, 6, 4, idx);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 3);
  EXPECT_EQ(idx[2], 5);
  EXPECT_EQ(idx[3], 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float y[] = {nan, -5, 2};
  topk(y, 3, 3, idx);
  EXPECT_EQ(idx[0], 2);
  EXPECT_EQ(idx[1], 1);
  EXPECT_EQ(idx[2], 0);
  EXPECT_THROW(topk(y, 3, 4, idx), Error);
}

TEST_P(OpsVector, ExpSum) {
  for (int64_t n : kLengths) {
    auto x = random_vec(n, rng_, 5.0f);
    auto want = x;
    double want_sum = 0;
    for (float& v : want) {
      v = static_cast<float>(std::exp(static_cast<double>(v) - 3.0));
      want_sum += v;
    }
    const float sum = exp_sum(x.data(), n, 3.0f);
    expect_close(x, want, 2e-6, 1e-12);
    EXPECT_NEAR(sum, want_sum, 2e-6 * want_sum) << "n=" << n;
  }
}

TEST_P(OpsVector, ScaleMax) {
  for (int64_t n : kLengths) {
    auto x = random_vec(n, rng_, 5.0f);
    x.push_back(42.0f);  // past n: neither scaled nor counted
    auto want = x;
    float want_max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      want[static_cast<size_t>(i)] *= 0.125f;
      want_max = std::max(want_max, want[static_cast<size_t>(i)]);
    }
    EXPECT_EQ(scale_max(x.data(), n, 0.125f), want_max) << "n=" << n;
    EXPECT_EQ(x, want) << "n=" << n;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> odd = {nan,   -3.0f, nan,   -inf,  -1.0f, nan,    -2.0f,  -5.0f,  nan,
                            -4.0f, -7.0f, -6.0f, -9.0f, -8.0f, -10.0f, -11.0f, -12.0f, nan};
  EXPECT_EQ(scale_max(odd.data(), static_cast<int64_t>(odd.size()), 2.0f), -2.0f);
  std::vector<float> all_nan(19, nan);
  EXPECT_EQ(scale_max(all_nan.data(), 19, 2.0f), -inf);
}

// Against the naive loop: the first index of the largest value, NaNs passed over; ties, a
// maximum in the tail past the last whole vector, ±inf and NaN anywhere.
TEST_P(OpsVector, Argmax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto naive_argmax = [](const std::vector<float>& x) {
    int64_t best = -1;
    for (size_t i = 0; i < x.size(); ++i)
      if (!std::isnan(x[i]) && (best < 0 || x[i] > x[static_cast<size_t>(best)]))
        best = static_cast<int64_t>(i);
    return best < 0 ? int64_t{0} : best;
  };
  for (int64_t n : {1, 7, 15, 16, 17, 33, 100, 257, 1000, 32000}) {
    auto x = random_vec(n, rng_);
    const auto size = static_cast<int64_t>(x.size());
    EXPECT_EQ(argmax(x.data(), size), naive_argmax(x)) << "n=" << n;
    x[static_cast<size_t>(n - 1)] = 100.0f;  // the last value, in the tail of a partial vector
    EXPECT_EQ(argmax(x.data(), size), n - 1) << "n=" << n;
    x[static_cast<size_t>(n / 2)] = 100.0f;  // a tie: the lower index wins
    EXPECT_EQ(argmax(x.data(), size), n / 2) << "n=" << n;
    for (float bad : {nan, inf, -inf}) {
      auto y = x;
      y[static_cast<size_t>(n - 1)] = bad;
      EXPECT_EQ(argmax(y.data(), size), naive_argmax(y)) << "n=" << n << " bad=" << bad;
    }
  }
  std::vector<float> odd = {nan,   -inf, nan,   -3.0f, -inf,  -3.0f,  nan,    -7.0f,  -4.0f,
                            -5.0f, nan,  -6.0f, -8.0f, -9.0f, -10.0f, -11.0f, -12.0f, nan};
  EXPECT_EQ(argmax(odd.data(), static_cast<int64_t>(odd.size())), 3);
  std::vector<float> all_nan(19, nan);
  EXPECT_EQ(argmax(all_nan.data(), 19), 0);
  std::vector<float> neg_inf(19, -inf);
  neg_inf[0] = nan;
  EXPECT_EQ(argmax(neg_inf.data(), 19), 1);
}

// The O(n) select must return exactly topk's set, ties and all. Scores drawn from a handful of
// values (as ReLU-weighted indexer scores are, with many exact zeros) make ties the rule, and
// NaN, ±0 and ±inf are mixed in.
TEST_P(OpsVector, TopKAscendingIsTopKSetInIndexOrder) {
  std::uniform_int_distribution<int> pick(0, 9);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float palette[] = {0.0f, -0.0f, 1.0f, 1.0f, 2.5f, -3.0f, nan, inf, -inf, 1e-40f};
  for (int64_t n : {1, 2, 7, 100, 257, 4096, 10000, 40000}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      if (trial == 0) {
        x = random_vec(n, rng_);
      } else if (trial == 5) {
        // The largest values sit exactly where a 1024-point strided sample looks, so a bound
        // taken from the sample lets too few keys through: the full select must take over.
        for (int64_t j = 0; j < 1024; ++j) x[static_cast<size_t>(j * n / 1024)] = 1.0f + j;
      } else if (trial == 4) {
        // Values a few ulps apart: the select must decide on the lowest bits, not the top ones.
        for (float& v : x) v = std::nextafter(1.0f, 2.0f) + pick(rng_) * 1.2e-7f;
      } else {
        for (float& v : x) v = palette[pick(rng_) % (trial == 1 ? 3 : 10)];
      }
      for (int64_t k : {int64_t{1}, std::max<int64_t>(1, n / 3), std::min<int64_t>(n, 2048), n}) {
        std::vector<int32_t> got(k), want(k);
        topk_ascending(x.data(), n, k, got.data());
        topk(x.data(), n, k, want.data());  // the sort-based one, which defines the NaN rule
        std::sort(want.begin(), want.end());
        ASSERT_EQ(got, want) << "n=" << n << " k=" << k << " trial=" << trial;
      }
    }
  }
  float y[] = {1, 2};
  int32_t idx[2];
  EXPECT_THROW(topk_ascending(y, 2, 3, idx), Error);
}

// Every bf16 bit pattern (NaNs, infinities, subnormals, -0 included) widens to the f32 whose top
// half it is, at every length's tail and at odd element offsets.
TEST_P(OpsVector, WidenBf16IsExactForEveryPattern) {
  std::vector<uint16_t> all(65536 + 7);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i * 40503u);
  for (int64_t offset : {0, 1, 3}) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{17}, int64_t{65536}}) {
      std::vector<float> got(static_cast<size_t>(n) + 1, 42.0f);
      widen_bf16(all.data() + offset, got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &got[static_cast<size_t>(i)], sizeof bits);
        ASSERT_EQ(bits, static_cast<uint32_t>(all[static_cast<size_t>(offset + i)]) << 16)
            << "n=" << n << " i=" << i;
      }
      ASSERT_EQ(got[static_cast<size_t>(n)], 42.0f) << "wrote past n=" << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, OpsVector,
                         testing::Values(Isa::kPortable, Isa::kAvx2, Isa::kAvx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace handoff::ops
