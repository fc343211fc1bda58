// Bad config.json inputs: each must be an InputError naming the file and the field.
#include <gtest/gtest.h>

#include <fstream>

#include "handoff/model/config.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using testing::expect_input_error;
using testing::golden_dir;

nlohmann::json golden_json(const std::string& name) {
  std::ifstream in(golden_dir(name) + "/config.json");
  return nlohmann::json::parse(in);
}

void expect_bad(const nlohmann::json& j, std::initializer_list<std::string> parts) {
  expect_input_error([&] { parse_config(j, "/x/config.json"); }, parts);
}

TEST(ConfigErrorsTest, UnknownModelType) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["model_type"] = "llama";
  expect_bad(j, {"/x/config.json", "model_type", "llama"});
}

TEST(ConfigErrorsTest, MissingField) {
  auto j = golden_json("dsv32_tiny_sparse");
  j.erase("hidden_size");
  expect_bad(j, {"/x/config.json", "missing required field 'hidden_size'"});
  auto g = golden_json("glm5_tiny_sparse");
  g.erase("index_topk");
  expect_bad(g, {"/x/config.json", "index_topk"});
}

TEST(ConfigErrorsTest, WrongJsonType) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["num_hidden_layers"] = "4";
  expect_bad(j, {"/x/config.json", "num_hidden_layers", "integer"});
  auto k = golden_json("dsv32_tiny_sparse");
  k["rope_scaling"]["factor"] = "forty";
  expect_bad(k, {"rope_scaling.factor", "number"});
  auto e = golden_json("dsv32_tiny_sparse");
  e["eos_token_id"] = "1";
  expect_bad(e, {"eos_token_id"});
}

TEST(ConfigErrorsTest, InconsistentDimensions) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["n_group"] = 3;  // 8 experts in 3 groups
  expect_bad(j, {"/x/config.json", "n_group", "not divisible"});
  j = golden_json("dsv32_tiny_sparse");
  j["topk_group"] = 3;
  expect_bad(j, {"topk_group", "exceeds n_group"});
  j = golden_json("dsv32_tiny_sparse");
  j["num_experts_per_tok"] = 5;  // topk_group 1 of 2 groups holds 4 experts
  expect_bad(j, {"num_experts_per_tok"});
  j = golden_json("dsv32_tiny_sparse");
  j["index_head_dim"] = 4;
  expect_bad(j, {"index_head_dim", "qk_rope_head_dim"});
  j = golden_json("dsv32_tiny_sparse");
  j["qk_rope_head_dim"] = 7;
  expect_bad(j, {"qk_rope_head_dim", "even"});
  j = golden_json("dsv32_tiny_sparse");
  j["first_k_dense_replace"] = 5;
  expect_bad(j, {"first_k_dense_replace", "num_hidden_layers"});
  j = golden_json("dsv32_tiny_sparse");
  j["hidden_size"] = 0;
  expect_bad(j, {"hidden_size", "positive"});
  j = golden_json("dsv32_tiny_sparse");
  j["eos_token_id"] = 256;
  expect_bad(j, {"eos_token_id", "vocabulary"});
}

TEST(ConfigErrorsTest, IndexShareFieldsRejected) {
  for (const char* f :
       {"index_topk_freq", "index_skip_topk_offset", "index_topk_pattern", "indexer_types"}) {
    auto j = golden_json("glm5_tiny_sparse");
    j[f] = 4;
    expect_bad(j, {"/x/config.json", f, "IndexShare"});
  }
}

TEST(ConfigErrorsTest, DeepseekV3WithIndexerFields) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["model_type"] = "deepseek_v3";
  expect_bad(j, {"/x/config.json", "index_n_heads", "deepseek_v3"});
}

TEST(ConfigErrorsTest, UnsupportedRopeScaling) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["rope_scaling"]["type"] = "linear";
  expect_bad(j, {"rope_scaling.type", "linear"});
}

TEST(ConfigErrorsTest, BadBlockSize) {
  auto j = golden_json("dsv32_fp8_blocks");
  j["quantization_config"]["weight_block_size"] = {128};
  expect_bad(j, {"quantization_config", "weight_block_size"});
}

TEST(ConfigErrorsTest, InvalidJsonFile) {
  testing::TempDir dir;
  const std::string path = dir.file("config.json");
  std::ofstream(path) << "{\"model_type\": ";
  expect_input_error([&] { load_config(path); }, {path, "invalid JSON"});
  expect_input_error([&] { load_config(dir.file("absent.json")); }, {"absent.json"});
}

}  // namespace
}  // namespace handoff::model
