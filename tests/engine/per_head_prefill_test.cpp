// Prompt chunks in MLA's per-head form (MlaAttention::attend_per_head) against the absorbed form
// on prompts long enough to cross its query blocks (64 rows), key tiles (64) and expanded key
// chunks (256), whole and chunked. golden_test.cpp checks the form against the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "golden_support.h"

namespace handoff::testing {
namespace {

double worst_diff(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t r = 0; r < std::min(a.size(), b.size()); ++r)
    for (size_t i = 0; i < a[r].size(); ++i)
      worst = std::max<double>(worst, std::fabs(a[r][i] - b[r][i]));
  return worst;
}

TEST(PerHeadPrefill, EqualsTheAbsorbedFormOnLongPrompts) {
  // dsv32_small_bf16 with index_topk past the prompt: DSA attends densely, so every prompt row
  // may go per head.
  const auto dir = write_golden_variant(
      "dsv32_small_bf16", "per_head", [](nlohmann::json& config) { config["index_topk"] = 2048; },
      [](const std::string&, const tensor::Tensor& t) -> std::optional<tensor::Tensor> {
        return t;
      });
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, 255);
  nlohmann::json prompt;
  std::vector<int32_t> tokens(600), forced(4);
  for (auto& t : tokens) t = token(rng);
  for (auto& t : forced) t = token(rng);
  prompt["tokens"] = tokens;
  prompt["greedy_tokens"] = forced;

  for (const tensor::DType dtype : {tensor::DType::kF32, tensor::DType::kBF16}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    model::LoadOptions options;
    options.dtype = dtype;
    options.per_head_prefill_min_tokens = 0;
    auto absorbed = model::Model::load(dir.string(), options);
    options.per_head_prefill_min_tokens = 128;
    auto per_head = model::Model::load(dir.string(), options);
    const double tolerance = dtype == tensor::DType::kF32 ? 1e-4 : 2e-3;
    for (const int64_t chunk : {0, 200}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk));
      const auto a = run_teacher_forced(*absorbed, prompt, chunk);
      const auto b = run_teacher_forced(*per_head, prompt, chunk);
      const double prefill = worst_diff(a.prefill_logits, b.prefill_logits);
      EXPECT_LE(prefill, tolerance);
      EXPECT_GT(prefill, 0.0) << "the per-head form did not run";
      EXPECT_LE(worst_diff(a.decode_logits, b.decode_logits), tolerance);
      EXPECT_EQ(a.indexer_topk_prefill, b.indexer_topk_prefill);
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace handoff::testing
