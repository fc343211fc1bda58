// Weight bytes. The roofline's denominator, Model::active_weight_bytes_per_token: a decode step
// attending at most index_topk keys selects them all, so it reads none of the indexer's query
// weights. And what MLA holds: W_UK[h] a second time only where the per-head form can run.
#include <gtest/gtest.h>

#include <string>

#include "handoff/model/checkpoint.h"
#include "handoff/model/config.h"
#include "handoff/model/mla_attention.h"
#include "handoff/model/model.h"
#include "handoff/model/weight_loader.h"
#include "test_util.h"

namespace handoff::model {
namespace {

using tensor::DType;

TEST(ActiveWeightBytes, IndexerQueryWeightsCountOnlyBeyondIndexTopk) {
  struct Case {
    const char* golden;
    DType dtype;
    bool quantize;
  };
  for (const Case& c :
       {Case{"dsv32_small_bf16", DType::kBF16, false}, Case{"dsv32_small_bf16", DType::kF32, false},
        Case{"dsv32_small_bf16", DType::kBF16, true},
        Case{"dsv32_fp8_blocks", DType::kBF16, false}}) {
    SCOPED_TRACE(std::string(c.golden) + " at " + std::string(tensor::dtype_name(c.dtype)) +
                 (c.quantize ? " --quantize fp8" : ""));
    const std::string dir = testing::golden_dir(c.golden);
    LoadOptions options;
    options.dtype = c.dtype;
    options.quantize_fp8 = c.quantize;
    const auto model = Model::load(dir, options);
    const ModelConfig& config = model->config();
    ASSERT_TRUE(config.has_indexer);
    const int64_t topk = config.index_topk;

    // The two weights as the loader holds them, each on its own.
    const Checkpoint ck = Checkpoint::open(dir, config, c.quantize);
    const WeightLoader weights(ck, c.dtype);
    const std::string p = "model.layers.0.self_attn.indexer.";
    const int64_t q_rows = config.index_n_heads * config.index_head_dim;
    const size_t wq_b =
        weights.linear(p + "wq_b.weight", {q_rows, config.q_lora_rank}).weight_bytes();
    const size_t weights_proj =
        weights
            .linear_fp32_math(p + "weights_proj.weight", {config.index_n_heads, config.hidden_size})
            .weight_bytes();
    EXPECT_EQ(weights.holds_fp8(), model->fp8_weights());

    const size_t first = model->active_weight_bytes_per_token(1);
    const size_t at_topk = model->active_weight_bytes_per_token(topk);
    const size_t beyond = model->active_weight_bytes_per_token(topk + 1);
    EXPECT_EQ(first, at_topk);
    EXPECT_EQ(beyond, model->active_weight_bytes_per_token(100 * topk));
    EXPECT_EQ(beyond - at_topk,
              static_cast<size_t>(config.num_hidden_layers) * (wq_b + weights_proj));
  }
}

// W_UK[h] is held a second time only where the per-head form can take rows: with a threshold
// above the golden's index_topk (16) no run of densely attending rows reaches it.
TEST(ActiveWeightBytes, WUkHeldAgainOnlyWhereThePerHeadFormCanRun) {
  const std::string dir = testing::golden_dir("dsv32_small_bf16");
  const ModelConfig config = load_config(dir + "/config.json");
  ASSERT_TRUE(config.has_indexer);
  const Checkpoint ck = Checkpoint::open(dir, config, false);
  auto attention_bytes = [&](int64_t min_tokens) {
    WeightLoaderOptions options;
    options.per_head_prefill_min_tokens = min_tokens;
    const WeightLoader weights(ck, DType::kBF16, options);
    LayerScratch scratch;
    const MlaAttention attention(config, weights, 0, {0, config.num_attention_heads}, scratch);
    return weights.linear_bytes();
  };
  const size_t off = attention_bytes(0);
  const auto uk = static_cast<size_t>(config.num_attention_heads * config.qk_nope_head_dim *
                                      config.kv_lora_rank * 2);
  EXPECT_EQ(attention_bytes(config.index_topk), off + uk);
  EXPECT_EQ(attention_bytes(config.index_topk + 1), off);
  EXPECT_EQ(attention_bytes(128), off);
}

}  // namespace
}  // namespace handoff::model
