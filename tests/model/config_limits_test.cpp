// Config fields outside sane ranges: each is an InputError naming config.json and the field,
// raised by the parser before anything is planned or loaded. Every case here was accepted
// before the limits existed (and num_hidden_layers 2^62 hung the planner).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "handoff/model/config.h"
#include "handoff/parallel/plan.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using testing::expect_input_error;
using testing::golden_dir;

constexpr int64_t k2p62 = int64_t{1} << 62;
const char kSource[] = "/x/config.json";

nlohmann::json golden_json(const std::string& name) {
  std::ifstream in(golden_dir(name) + "/config.json");
  return nlohmann::json::parse(in);
}

void expect_bad(const nlohmann::json& j, std::initializer_list<std::string> parts) {
  expect_input_error([&] { parse_config(j, kSource); }, parts);
}

TEST(ConfigLimitsTest, GoldenConfigsAreWithinTheLimits) {
  for (const char* name : {"dsv32_tiny_sparse", "glm5_tiny_sparse", "dsv32_fp8_blocks"})
    EXPECT_NO_THROW(parse_config(golden_json(name), kSource)) << name;
}

TEST(ConfigLimitsTest, HugeSizesAreRefusedBeforePlanning) {
  // Each of these overflows a size product (or loops for ages) further on.
  for (const char* field :
       {"num_hidden_layers", "num_attention_heads", "hidden_size", "vocab_size", "kv_lora_rank",
        "q_lora_rank", "qk_nope_head_dim", "v_head_dim", "intermediate_size",
        "moe_intermediate_size", "n_routed_experts", "n_shared_experts", "index_n_heads",
        "index_head_dim", "index_topk", "max_position_embeddings", "moe_layer_freq",
        "num_nextn_predict_layers"}) {
    auto j = golden_json("dsv32_tiny_sparse");
    j[field] = k2p62;
    expect_bad(j, {kSource, std::string("'") + field + "'", "4611686018427387904"});
  }
  auto j = golden_json("dsv32_tiny_sparse");
  j["qk_rope_head_dim"] = k2p62;  // even, so only the bound can catch it
  expect_bad(j, {kSource, "'qk_rope_head_dim'"});
}

TEST(ConfigLimitsTest, TwoToTheSixtySecondLayersFailFast) {
  auto j = golden_json("dsv32_tiny_sparse");
  j["num_hidden_layers"] = k2p62;
  j["first_k_dense_replace"] = 1;
  const auto start = std::chrono::steady_clock::now();
  expect_input_error(
      [&] { parallel::make_plan(parse_config(j, kSource), parallel::ParallelOptions{}); },
      {kSource, "num_hidden_layers"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(ConfigLimitsTest, RoutingFactorsMustBePositive) {
  for (double bad : {-1.0, 0.0, 1e300}) {
    auto j = golden_json("dsv32_tiny_sparse");
    j["routed_scaling_factor"] = bad;
    expect_bad(j, {kSource, "'routed_scaling_factor'"});
  }
  auto j = golden_json("dsv32_tiny_sparse");
  j["num_experts_per_tok"] = 9;  // 8 routed experts
  j["topk_group"] = 2;
  expect_bad(j, {kSource, "'num_experts_per_tok'"});
  j = golden_json("dsv32_tiny_sparse");
  j["rms_norm_eps"] = 2.0;
  expect_bad(j, {kSource, "'rms_norm_eps'"});
  j = golden_json("dsv32_tiny_sparse");
  j["rms_norm_eps"] = 0.0;
  expect_bad(j, {kSource, "'rms_norm_eps'"});
}

TEST(ConfigLimitsTest, RopeThetaMustBeAboveOne) {
  for (double bad : {1e-45, 0.5, 1.0, -5.0, 1e300}) {
    auto j = golden_json("dsv32_tiny_sparse");
    j["rope_theta"] = bad;
    expect_bad(j, {kSource, "'rope_theta'"});
    // GLM nests it in rope_parameters; the error names that field.
    auto g = golden_json("glm5_tiny_sparse");
    g["rope_parameters"]["rope_theta"] = bad;
    expect_bad(g, {kSource, "'rope_parameters.rope_theta'"});
  }
}

TEST(ConfigLimitsTest, YarnFactorsMustBeFiniteAndPositive) {
  struct Case {
    const char* field;
    nlohmann::json value;
  };
  const Case cases[] = {
      {"factor", 1e-300},
      {"factor", 0.5},
      {"factor", 1e300},
      {"mscale_all_dim", 9223372036854775808ull},  // 2^63
      {"mscale_all_dim", -1.0},
      {"mscale", 0.0},
      {"mscale", 1e200},
      {"beta_fast", 0.0},
      {"beta_fast", 1e300},
      {"beta_slow", -1.0},
      {"original_max_position_embeddings", k2p62},
      {"original_max_position_embeddings", 0},
  };
  for (const Case& c : cases) {
    auto j = golden_json("dsv32_tiny_sparse");
    ASSERT_TRUE(j["rope_scaling"].is_object());
    j["rope_scaling"][c.field] = c.value;
    expect_bad(j, {kSource, std::string("'rope_scaling.") + c.field + "'"});
  }
  // The defaults and a real release's values stay accepted (mscale_all_dim 0: no correction).
  auto j = golden_json("dsv32_tiny_sparse");
  j["rope_scaling"]["mscale_all_dim"] = 0;
  j["rope_scaling"]["factor"] = 40;
  EXPECT_NO_THROW(parse_config(j, kSource));
}

TEST(ConfigLimitsTest, QuantisationBlockIsBounded) {
  auto j = golden_json("dsv32_fp8_blocks");
  j["quantization_config"]["weight_block_size"] = {k2p62, 128};
  expect_bad(j, {kSource, "quantization_config"});
}

}  // namespace
}  // namespace handoff::model
