// The weights the reference multiplies in fp32 (router, indexer weights_proj): held as stored
// when that is bf16, and multiplied on exact activations whatever --activations says.
#include "handoff/model/weight_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/tensor/dtype.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using tensor::DType;

// y = w · x in double over the stored values (the reference's fp32 product, summed exactly).
std::vector<double> exact_product(const tensor::Tensor& w, const std::vector<float>& x,
                                  int64_t rows) {
  const int64_t n = w.shape()[0], k = w.shape()[1];
  std::vector<double> y(static_cast<size_t>(rows * n), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        y[static_cast<size_t>(r * n + i)] +=
            static_cast<double>(w.data<float>()[i * k + j]) * x[static_cast<size_t>(r * k + j)];
  return y;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

struct Case {
  const char* golden;
  DType stored;   // of the router and weights_proj in that checkpoint
  DType compute;  // the run's --dtype
  DType held;     // what linear_fp32_math must hold
};

TEST(WeightLoader, Fp32MathWeightsAreHeldAsStoredAndTakeExactActivations) {
  for (const Case& c : {Case{"dsv32_small_bf16", DType::kBF16, DType::kBF16, DType::kBF16},
                        Case{"dsv32_small_bf16", DType::kBF16, DType::kF32, DType::kF32},
                        Case{"dsv32_tiny_sparse", DType::kF32, DType::kBF16, DType::kF32}}) {
    SCOPED_TRACE(std::string(c.golden) + " at " + std::string(tensor::dtype_name(c.compute)));
    const std::string dir = testing::golden_dir(c.golden);
    const ModelConfig config = load_config(dir + "/config.json");
    const Checkpoint ck = Checkpoint::open(dir, config);
    WeightLoaderOptions options;
    // A bf16 run's other weights round their activations; these must not.
    options.activations = ops::ActivationPrecision::kBf16;
    const WeightLoader weights(ck, c.compute, options);
    const int64_t d = config.hidden_size;
    struct Weight {
      std::string name;
      int64_t rows;
    };
    for (const Weight& w :
         {Weight{"model.layers.1.mlp.gate.weight", config.n_routed_experts},
          Weight{"model.layers.1.self_attn.indexer.weights_proj.weight", config.index_n_heads}}) {
      SCOPED_TRACE(w.name);
      ASSERT_EQ(ck.stored_dtype(w.name), c.stored);
      const ops::LinearWeight lw = weights.linear_fp32_math(w.name, {w.rows, d});
      EXPECT_EQ(lw.dtype(), c.held);
      EXPECT_EQ(weights.fp32_math_dtype(w.name), c.held);
      const tensor::Tensor stored = ck.load(w.name, {w.rows, d}, DType::kF32);
      std::mt19937 rng(11);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      // Decode rows, and prefill rows (where a bf16 weight's other users round x).
      for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{40}}) {
        std::vector<float> x(static_cast<size_t>(m * d)), rounded(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] = dist(rng);
          rounded[i] = tensor::bf16_to_f32(tensor::f32_to_bf16(x[i]));
        }
        std::vector<float> y(static_cast<size_t>(m * w.rows));
        lw.forward(x.data(), m, y.data());
        const std::vector<double> want = exact_product(stored, x, m);
        // f32 sums of ~d products: a few ulps of the sum's magnitude.
        EXPECT_LT(max_abs_diff(y, want), 2e-5) << m << " rows";
        // What the check tells apart: the same product on bf16-rounded activations.
        std::vector<float> as_float(want.size());
        const std::vector<double> off = exact_product(stored, rounded, m);
        for (size_t i = 0; i < off.size(); ++i) as_float[i] = static_cast<float>(off[i]);
        EXPECT_GT(max_abs_diff(as_float, want), 1e-4) << m << " rows";
      }
    }
  }
}

}  // namespace
}  // namespace handoff::model
