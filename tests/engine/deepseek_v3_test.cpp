// deepseek_v3 = the same model without the DSA indexer. Stripping the indexer from a golden
// case must not change any output whose context fits in index_topk (there DSA equals dense).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "golden_support.h"
#include "handoff/model/safetensors.h"

namespace handoff::testing {
namespace {

TEST(DeepseekV3, IndexerFreeCheckpointMatchesGoldenWhileContextFitsTopk) {
  const std::string src = golden_dir("dsv32_tiny_sparse");
  const auto dir = std::filesystem::temp_directory_path() / "handoff_deepseek_v3_test";
  std::filesystem::create_directories(dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(src + "/config.json"));
  const int64_t topk = config["index_topk"];
  for (const char* key :
       {"index_topk", "index_n_heads", "index_head_dim", "indexer_rope_interleave"})
    config.erase(key);
  config["model_type"] = "deepseek_v3";
  config["architectures"] = {"DeepseekV3ForCausalLM"};
  std::ofstream(dir / "config.json") << config.dump(2);
  const auto file = model::SafetensorsFile::open(src + "/model.safetensors");
  std::vector<std::pair<std::string, tensor::Tensor>> kept;
  for (const auto& [name, entry] : file->entries())
    if (name.find(".indexer.") == std::string::npos) kept.emplace_back(name, file->get(name));
  ASSERT_LT(kept.size(), file->entries().size());
  model::write_safetensors((dir / "model.safetensors").string(), kept);

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
