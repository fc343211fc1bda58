// deepseek_v3 = the same model without the DSA indexer. Stripping the indexer from a golden
// case must not change any output whose context fits in index_topk (there DSA equals dense).
#include <gtest/gtest.h>

#include <filesystem>

#include "golden_support.h"

namespace handoff::testing {
namespace {

TEST(DeepseekV3, IndexerFreeCheckpointMatchesGoldenWhileContextFitsTopk) {
  int64_t topk = 0;
  size_t stored = 0, kept = 0;
  const auto dir = write_golden_variant(
      "dsv32_tiny_sparse", "deepseek_v3",
      [&](nlohmann::json& config) {
        topk = config["index_topk"];
        for (const char* key :
             {"index_topk", "index_n_heads", "index_head_dim", "indexer_rope_interleave"})
          config.erase(key);
        config["model_type"] = "deepseek_v3";
        config["architectures"] = {"DeepseekV3ForCausalLM"};
      },
      [&](const std::string& name, const tensor::Tensor& t) -> std::optional<tensor::Tensor> {
        ++stored;
        if (name.find(".indexer.") != std::string::npos) return std::nullopt;
        ++kept;
        return t;
      });
  ASSERT_LT(kept, stored);

  model::LoadOptions options;
  options.dtype = tensor::DType::kF32;
  auto model = model::Model::load(dir.string(), options);
  EXPECT_FALSE(model->config().has_indexer);
  const auto& gp = golden("dsv32_tiny_sparse")["prompts"][0];
  const auto prompt_len = static_cast<int64_t>(gp["tokens"].size());
  ASSERT_LE(prompt_len, topk);
  const auto r = run_teacher_forced(*model, gp);
  EXPECT_LE(max_abs_diff(r.prefill_logits, gp["prefill_logits"]), 1e-4);
  // Decode step j runs at position prompt_len + j: dense and sparse agree while it is < topk.
  const auto fitting = static_cast<size_t>(topk - prompt_len);
  std::vector<std::vector<float>> ours(r.decode_logits.begin(), r.decode_logits.begin() + fitting);
  nlohmann::json ref = nlohmann::json::array();
  for (size_t j = 0; j < fitting; ++j) ref.push_back(gp["decode_logits"][j]);
  EXPECT_LE(max_abs_diff(ours, ref), 1e-4);
  // Past index_topk the indexer matters: the dense model must now differ from the golden.
  std::vector<std::vector<float>> later(r.decode_logits.begin() + fitting, r.decode_logits.end());
  nlohmann::json ref_later = nlohmann::json::array();
  for (size_t j = fitting; j < gp["decode_logits"].size(); ++j)
    ref_later.push_back(gp["decode_logits"][j]);
  EXPECT_GT(max_abs_diff(later, ref_later), 1e-3);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace handoff::testing
