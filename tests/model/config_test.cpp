// Config parsing of the golden configs, derived constants (MODEL_SPEC §1.2, §8) and round trip.
#include "handoff/model/config.h"

#include <gtest/gtest.h>

#include <cmath>

namespace handoff::model {
namespace {

std::string golden(const std::string& name) {
  return std::string(HANDOFF_TEST_DATA) + "/golden/" + name + "/config.json";
}

TEST(ConfigTest, DeepseekV32TinySparse) {
  const ModelConfig c = load_config(golden("dsv32_tiny_sparse"));
  EXPECT_EQ(c.family, Family::kDeepseekV32);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 4);
  EXPECT_EQ(c.qk_head_dim(), 24);
  EXPECT_TRUE(c.has_indexer);
  EXPECT_EQ(c.index_n_heads, 4);
  EXPECT_EQ(c.index_head_dim, 16);
  EXPECT_EQ(c.index_topk, 8);
  EXPECT_TRUE(c.rope_interleave);
  EXPECT_FALSE(c.indexer_rope_interleave);
  EXPECT_TRUE(c.rope.yarn);
  EXPECT_DOUBLE_EQ(c.rope.factor, 40.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.n_group, 2);
  EXPECT_EQ(c.topk_group, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{1});
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_EQ(c.weight_block_rows, 0);
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(m, 1.3688879, 1e-7);
  EXPECT_NEAR(c.softmax_scale(), std::pow(24.0, -0.5) * m * m, 1e-12);
  EXPECT_NEAR(c.indexer_scale(), 0.5 * 0.25, 1e-12);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(3));
  EXPECT_EQ(c.rope_inv_freq().size(), 4u);
}

TEST(ConfigTest, Glm5TinySparse) {
  const ModelConfig c = load_config(golden("glm5_tiny_sparse"));
  EXPECT_EQ(c.family, Family::kGlmMoeDsa);
  EXPECT_FALSE(c.rope.yarn);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_TRUE(c.indexer_rope_interleave);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.n_group, 1);
  EXPECT_NEAR(c.softmax_scale(), std::pow(24.0, -0.5), 1e-12);
  const auto f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 4u);
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_FLOAT_EQ(f[i], static_cast<float>(std::pow(1e6, -2.0 * i / 8.0)));
}

TEST(ConfigTest, DeepseekV32SmallBf16AndFp8) {
  const ModelConfig c = load_config(golden("dsv32_small_bf16"));
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.qk_head_dim(), 48);
  EXPECT_EQ(c.n_group, 4);
  EXPECT_EQ(c.topk_group, 2);
  const ModelConfig f = load_config(golden("dsv32_fp8_blocks"));
  EXPECT_EQ(f.q_lora_rank, 192);
  EXPECT_EQ(f.kv_lora_rank, 128);
  EXPECT_EQ(f.weight_block_rows, 128);
  EXPECT_EQ(f.weight_block_cols, 128);
  EXPECT_NEAR(f.indexer_scale(), 1.0 / std::sqrt(4.0 * 32.0), 1e-12);
}

// The full-size DeepSeek-V3.2 YaRN table and scales of MODEL_SPEC §1.2 / §8.
TEST(ConfigTest, FullSizeYarnTable) {
  ModelConfig c = load_config(golden("dsv32_tiny_sparse"));
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  const auto f = c.rope_inv_freq();
  ASSERT_EQ(f.size(), 32u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[1], 0.749894209, 1e-8);
  EXPECT_NEAR(f[31], 3.3338036e-06, 1e-12);
  // Pairs i <= low (10) keep θ_i; pairs i >= high (23) are divided by the factor.
  EXPECT_FLOAT_EQ(f[10], static_cast<float>(std::pow(1e4, -20.0 / 64)));
  EXPECT_FLOAT_EQ(f[23], static_cast<float>(std::pow(1e4, -46.0 / 64) / 40));
  EXPECT_NEAR(c.softmax_scale(), 0.1352337789, 1e-9);
  EXPECT_NEAR(c.indexer_scale(), 0.0110485435, 1e-9);
}

TEST(ConfigTest, GlmFullSizeScales) {
  ModelConfig c = load_config(golden("glm5_tiny_sparse"));
  c.qk_nope_head_dim = 192;
  c.qk_rope_head_dim = 64;
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 0.0625);
  EXPECT_DOUBLE_EQ(c.indexer_scale(), 0.015625);
  const auto f = c.rope_inv_freq();
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(f[i], static_cast<float>(std::pow(1e6, -i / 32.0)));
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.rope.yarn, b.rope.yarn);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.mscale_all_dim, b.rope.mscale_all_dim);
  EXPECT_EQ(a.has_indexer, b.has_indexer);
  EXPECT_EQ(a.indexer_rope_interleave, b.indexer_rope_interleave);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.weight_block_rows, b.weight_block_rows);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.softmax_scale(), b.softmax_scale());
  EXPECT_EQ(a.rope_inv_freq(), b.rope_inv_freq());
}

TEST(ConfigTest, RoundTripThroughToJson) {
  for (const char* name :
       {"dsv32_tiny_sparse", "glm5_tiny_sparse", "dsv32_small_bf16", "dsv32_fp8_blocks"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = load_config(golden(name));
    expect_same(c, parse_config(c.to_json(), "roundtrip"));
  }
}

TEST(ConfigTest, RoundTripVariants) {
  ModelConfig c = load_config(golden("glm5_tiny_sparse"));
  c.rope.yarn = true;  // GLM with YaRN goes through rope_parameters
  c.rope.factor = 4;
  c.rope.mscale_all_dim = 0.707;
  c.eos_token_ids = {1, 2, 3};
  c.bos_token_id.reset();
  expect_same(c, parse_config(c.to_json(), "roundtrip"));
  ModelConfig v3 = load_config(golden("dsv32_tiny_sparse"));
  v3.family = Family::kDeepseekV3;
  v3.model_type = "deepseek_v3";
  v3.has_indexer = false;
  v3.index_n_heads = v3.index_head_dim = v3.index_topk = 0;
  v3.indexer_rope_interleave = false;
  expect_same(v3, parse_config(v3.to_json(), "roundtrip"));
}

TEST(ConfigTest, EosListAndRopeTypeAlias) {
  auto j = load_config(golden("dsv32_tiny_sparse")).to_json();
  j["eos_token_id"] = {1, 5, 7};
  j["rope_scaling"].erase("type");
  j["rope_scaling"]["rope_type"] = "yarn";
  const ModelConfig c = parse_config(j, "x");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 5, 7}));
  EXPECT_TRUE(c.rope.yarn);
}

TEST(ConfigTest, IndexerRopeInterleaveDefaultsByFamily) {
  auto j = load_config(golden("glm5_tiny_sparse")).to_json();
  j.erase("indexer_rope_interleave");
  j.erase("rope_interleave");
  EXPECT_TRUE(parse_config(j, "x").indexer_rope_interleave);
  EXPECT_TRUE(parse_config(j, "x").rope_interleave);
  auto d = load_config(golden("dsv32_tiny_sparse")).to_json();
  d.erase("indexer_rope_interleave");
  EXPECT_FALSE(parse_config(d, "x").indexer_rope_interleave);
}

}  // namespace
}  // namespace handoff::model
