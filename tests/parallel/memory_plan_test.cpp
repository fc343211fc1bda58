// Per-rank memory of a plan: weight bytes under a layout (checked against sums written out here
// from the config, not through the planner's own helpers), FP8 block scales on shapes that do
// not divide by 128, cache bytes per token per dtype, and tokens that fit in a budget.
#include "handoff/parallel/memory_plan.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "handoff/error.h"
#include "handoff/model/config.h"
#include "handoff/model/safetensors.h"

namespace handoff::parallel {
namespace {

nlohmann::json golden_json(const std::string& name) {
  std::ifstream in(std::string(HANDOFF_TEST_DATA) + "/golden/" + name + "/config.json");
  return nlohmann::json::parse(in);
}

model::ModelConfig config_of(const nlohmann::json& j) { return model::parse_config(j, "test"); }

// dsv32_tiny_sparse: hidden 64, 4 layers (layer 0 dense, intermediate 128), 4 heads, q/kv LoRA
// 32/32, nope/rope 16/8, v 16, 8 experts of 32 + 1 shared, indexer 4 x 16, vocab 256; index_topk
// as the published models' (2048), so that prompt rows can take the per-head form (its own
// index_topk leaves too few rows for it; WUkHeldAgainOnlyWhereThePerHeadFormCanRun).
nlohmann::json tiny_json() {
  nlohmann::json j = golden_json("dsv32_tiny_sparse");
  j["index_topk"] = 2048;
  return j;
}
model::ModelConfig tiny() { return config_of(tiny_json()); }

// Every dimension off the 128 grid, and tp = 2 slices that end inside a block.
model::ModelConfig odd() {
  nlohmann::json j = tiny_json();
  j["hidden_size"] = 200;
  j["num_hidden_layers"] = 2;
  j["first_k_dense_replace"] = 1;
  j["num_attention_heads"] = 2;
  j["q_lora_rank"] = 150;
  j["kv_lora_rank"] = 130;
  j["qk_nope_head_dim"] = 20;
  j["qk_rope_head_dim"] = 8;
  j["v_head_dim"] = 24;
  j["intermediate_size"] = 300;
  j["moe_intermediate_size"] = 70;
  j["n_routed_experts"] = 4;
  j["n_group"] = 1;
  j["topk_group"] = 1;
  j["index_n_heads"] = 2;
  j["index_head_dim"] = 36;
  j["vocab_size"] = 1000;
  return config_of(j);
}

ParallelOptions layout(int tp, int pp) {
  ParallelOptions o;
  o.tp = tp;
  o.pp = pp;
  return o;
}

MemoryPlan memory(const model::ModelConfig& c, int tp, int pp, MemoryOptions o = {}) {
  return plan_memory(c, make_plan(c, layout(tp, pp)), o);
}

int64_t part(const RankMemory& r, const std::string& name) {
  for (const WeightPart& p : r.parts)
    if (p.name == name) return p.bytes;
  return 0;
}

int64_t sum_over_ranks(const MemoryPlan& mp) {
  int64_t total = 0;
  for (const RankMemory& r : mp.ranks) total += r.weight_bytes;
  return total;
}

TEST(MemoryPlan, Bf16RanksSumToTheSingleRankTotalPlusReplicatedCopies) {
  const model::ModelConfig c = tiny();
  const int64_t d = c.hidden_size, bf = 2, f32 = 4;
  // Written out from the config (MODEL_SPEC §6 shapes; norms and biases in f32, the router and
  // weights_proj in bf16 as the published checkpoints store them).
  const int64_t norms = 2 * d * f32;
  const int64_t attn_replicated =
      (c.q_lora_rank * d + (c.kv_lora_rank + 8) * d) * bf + (c.q_lora_rank + c.kv_lora_rank) * f32;
  const int64_t indexer = (4 * 16 * c.q_lora_rank + 16 * d + 4 * d) * bf + 2 * 16 * f32;
  const int64_t router = 8 * d * bf + 8 * f32;
  const int64_t heads = 4 * (16 + 8) * 32 * bf     // q_b
                        + d * 4 * 16 * bf          // o_proj
                        + 4 * (16 + 16) * 32 * bf  // kv_b -> W_UK / W_UV
                        + 4 * 16 * 32 * bf;        // W_UK again, for the per-head form
  const int64_t dense = 3 * 128 * d * bf;
  const int64_t experts = 8 * 3 * 32 * d * bf;
  const int64_t shared = 3 * 32 * d * bf;
  const int64_t vocab = 256 * d * bf;
  const int64_t replicated_layer = norms + attn_replicated + indexer;
  const int64_t single = 2 * vocab + d * f32 + 4 * (replicated_layer + heads) + dense +
                         3 * (router + experts + shared);
  EXPECT_EQ(single, 623456);  // the same sum, by hand
  const int64_t replicated_all = 4 * replicated_layer + 3 * router + d * f32;

  const MemoryPlan one = memory(c, 1, 1);
  ASSERT_EQ(one.ranks.size(), 1u);
  EXPECT_EQ(one.ranks[0].weight_bytes, single);
  EXPECT_EQ(one.ranks[0].scale_bytes, 0);
  EXPECT_EQ(part(one.ranks[0], "routed_experts"), 3 * experts);

  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{2, 1}, {4, 1}, {2, 2}, {4, 2}}) {
    const MemoryPlan mp = memory(c, tp, pp);
    ASSERT_EQ(mp.ranks.size(), static_cast<size_t>(tp * pp));
    EXPECT_EQ(sum_over_ranks(mp), single + (tp - 1) * replicated_all) << tp << "x" << pp;
    EXPECT_EQ(mp.weight_bytes_all_ranks, sum_over_ranks(mp));
  }
  // tp 2 pp 2: stage 0 holds layers 0-1 (dense, MoE) and the embedding, stage 1 layers 2-3
  // and the head; each rank half the heads, dense columns, experts and vocab rows.
  const MemoryPlan mp = memory(c, 2, 2);
  const RankMemory& r1 = mp.ranks[1];
  EXPECT_EQ(r1.stage, 0);
  EXPECT_EQ(r1.tp_rank, 1);
  EXPECT_EQ(r1.weight_bytes, vocab / 2 + 2 * (replicated_layer + heads / 2) + dense / 2 + router +
                                 experts / 2 + shared / 2);
  const RankMemory& r3 = mp.ranks[3];
  EXPECT_EQ(r3.weight_bytes, vocab / 2 + d * f32 + 2 * (replicated_layer + heads / 2) +
                                 2 * (router + experts / 2 + shared / 2));
  EXPECT_EQ(part(r3, "embedding"), 0);
  EXPECT_EQ(part(r3, "lm_head"), vocab / 2);
}

TEST(MemoryPlan, WUkHeldAgainOnlyWhereThePerHeadFormCanRun) {
  // The per-head form needs 128 leading rows of a sequence that attend to every earlier key;
  // on a DSA model only positions below index_topk do, so the golden's own index_topk (under
  // 128) leaves it no rows, and W_UK[h] (4 layers x 4 heads x [16, 32] in bf16) is not held.
  const nlohmann::json own = golden_json("dsv32_tiny_sparse");
  ASSERT_LT(own["index_topk"].get<int64_t>(), 128);
  const int64_t uk = 4 * 4 * 16 * 32 * 2;
  EXPECT_EQ(memory(config_of(own), 1, 1).ranks[0].weight_bytes,
            memory(tiny(), 1, 1).ranks[0].weight_bytes - uk);
  nlohmann::json at_threshold = own;
  at_threshold["index_topk"] = 128;
  EXPECT_EQ(memory(config_of(at_threshold), 1, 1).ranks[0].weight_bytes,
            memory(tiny(), 1, 1).ranks[0].weight_bytes);
  // f32 runs batch-invariant, without the form, whatever index_topk is.
  MemoryOptions f32;
  f32.weights = WeightDtype::kF32;
  EXPECT_EQ(memory(config_of(own), 1, 1, f32).ranks[0].weight_bytes,
            memory(tiny(), 1, 1, f32).ranks[0].weight_bytes);
}

TEST(MemoryPlan, VocabRowsSplitCeilWithAShortLastRank) {
  nlohmann::json j = golden_json("dsv32_tiny_sparse");
  j["vocab_size"] = 250;  // ceil(250 / 4) = 63 rows: 63, 63, 63, 61
  const MemoryPlan mp = memory(config_of(j), 4, 1);
  EXPECT_EQ(part(mp.ranks[0], "embedding"), 63 * 64 * 2);
  EXPECT_EQ(part(mp.ranks[3], "embedding"), 61 * 64 * 2);
  EXPECT_EQ(part(mp.ranks[3], "lm_head"), 61 * 64 * 2);
}

// One FP8 matrix: a byte per weight plus an f32 scale per 128 x 128 block, edges rounded up.
int64_t fp8(int64_t rows, int64_t cols) {
  return rows * cols + ((rows + 127) / 128) * ((cols + 127) / 128) * 4;
}

TEST(MemoryPlan, Fp8CountsBlockScalesRoundedUpOnOddShapes) {
  const model::ModelConfig c = odd();
  MemoryOptions bf16;
  MemoryOptions f8;
  f8.weights = WeightDtype::kFp8;
  const RankMemory b = memory(c, 1, 1, bf16).ranks[0];
  const RankMemory q = memory(c, 1, 1, f8).ranks[0];
  // Dense MLP (layer 0): gate/up [300, 200] -> 3 x 2 blocks, down [200, 300] -> 2 x 3.
  EXPECT_EQ(part(b, "dense_mlp"), 3 * 300 * 200 * 2);
  EXPECT_EQ(part(q, "dense_mlp"), 3 * (300 * 200 + 6 * 4));
  EXPECT_EQ(part(q, "dense_mlp"), 2 * fp8(300, 200) + fp8(200, 300));
  // Experts [70, 200] / [200, 70]: 1 x 2 and 2 x 1 blocks each, 4 experts + 1 shared.
  EXPECT_EQ(part(q, "routed_experts"), 4 * (2 * fp8(70, 200) + fp8(200, 70)));
  EXPECT_EQ(part(q, "shared_experts"), 2 * fp8(70, 200) + fp8(200, 70));
  // q_a [150, 200], kv_a [138, 200] in FP8; their norms stay f32.
  EXPECT_EQ(part(q, "attention_replicated"), 2 * (fp8(150, 200) + fp8(138, 200) + (150 + 130) * 4));
  // q_b [2·28, 150], o_proj [200, 2·24] and kv_b [2·44, 130] in FP8; kv_b's per-head W_UK^T
  // [130, 20] would pad its 20 columns to a 128-column block, so they are held in bf16; W_UK[h]
  // [20, 130] itself, held again for the per-head form, stays FP8.
  EXPECT_EQ(part(q, "attention_heads"),
            2 * (fp8(56, 150) + fp8(200, 48) + fp8(88, 130) + 2 * 20 * 130 + 2 * fp8(20, 130)));
  // wq_b [72, 150], wk [36, 200] FP8; weights_proj [2, 200] bf16, k_norm f32.
  EXPECT_EQ(part(q, "indexer"), 2 * (fp8(72, 150) + fp8(36, 200) + 2 * 200 * 2 + 72 * 4));
  // Embedding, lm_head and the router stay bf16 (its bias f32), as published.
  EXPECT_EQ(part(q, "embedding"), 1000 * 200 * 2);
  EXPECT_EQ(part(q, "lm_head"), 1000 * 200 * 2);
  EXPECT_EQ(part(q, "router"), part(b, "router"));
  EXPECT_EQ(part(q, "router"), 4 * 200 * 2 + 4 * 4);
  EXPECT_EQ(q.scale_bytes, 4 * (3 * 6                     // dense
                                + 4 * 3 * 2 + 3 * 2       // experts + shared
                                + 2 * (2 * 2 + 2 * 2)     // q_a, kv_a
                                + 2 * (1 * 2 + 2 * 1)     // q_b, o_proj
                                + 2 * (1 * 2)             // kv_b
                                + 2 * 2 * (1 * 2)         // W_UK[h] for the per-head form
                                + 2 * (1 * 2 + 1 * 2)));  // wq_b, wk
}

TEST(MemoryPlan, Fp8SlicesThatEndInsideABlockKeepThatBlocksScale) {
  const model::ModelConfig c = odd();
  MemoryOptions f8;
  f8.weights = WeightDtype::kFp8;
  const MemoryPlan mp = memory(c, 2, 1, f8);
  // Dense columns [0, 150) and [150, 300): each touches two of the three row blocks of
  // gate/up and two of the three column blocks of down (block 1 is shared by both ranks).
  for (const RankMemory& r : mp.ranks)
    EXPECT_EQ(part(r, "dense_mlp"), 3 * (150 * 200 + 2 * 2 * 4)) << r.rank;
  // The shared expert's 70 columns split 35 / 35, both inside block 0.
  for (const RankMemory& r : mp.ranks)
    EXPECT_EQ(part(r, "shared_experts"), 3 * (35 * 200 + 1 * 2 * 4)) << r.rank;
  // Two routed experts per rank, whole.
  EXPECT_EQ(part(mp.ranks[1], "routed_experts"), 2 * (2 * fp8(70, 200) + fp8(200, 70)));
}

TEST(MemoryPlan, ScalesMatchTheFp8GoldenCheckpoint) {
  // The planner's FP8 scale count against the real scale tensors of an FP8 checkpoint: every
  // weight_scale_inv.
  const std::string dir = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_fp8_blocks";
  const model::ModelConfig c = model::load_config(dir + "/config.json");
  const auto file = model::SafetensorsFile::open(dir + "/model.safetensors");
  int64_t scales = 0, fp8_weights = 0;
  for (const auto& [name, e] : file->entries()) {
    const auto bytes = static_cast<int64_t>(e.end - e.begin);
    if (name.ends_with("weight_scale_inv")) scales += bytes;
    if (e.dtype == tensor::DType::kF8E4M3) fp8_weights += bytes;
  }
  ASSERT_GT(scales, 0);
  MemoryOptions f8;
  f8.weights = WeightDtype::kFp8;
  const RankMemory q = memory(c, 1, 1, f8).ranks[0];
  // Its index_topk (16) leaves the per-head form no rows, so no W_UK[h] is held beyond them.
  ASSERT_LT(c.index_topk, 128);
  EXPECT_EQ(q.scale_bytes, scales);
  // Everything else: embedding and lm_head bf16, W_UK^T in bf16 (qk_nope 32 pads to a
  // 128-column block: a second byte per weight), router and weights_proj in bf16 as published
  // (this golden stores them f32, which the engine then holds), and the f32 norms, router bias
  // and k_norm.
  const int64_t d = c.hidden_size;
  int64_t f32_parts = d, bf16_parts = 2 * c.vocab_size * d;  // final norm; embedding, lm_head
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    f32_parts += 2 * d + c.q_lora_rank + c.kv_lora_rank + 2 * c.index_head_dim;
    bf16_parts += c.index_n_heads * d;
    if (c.is_moe_layer(l)) {
      f32_parts += c.n_routed_experts;
      bf16_parts += c.n_routed_experts * d;
    }
  }
  EXPECT_EQ(q.weight_bytes,
            scales + fp8_weights + 2 * bf16_parts + 4 * f32_parts +
                c.num_hidden_layers * c.num_attention_heads * c.qk_nope_head_dim * c.kv_lora_rank);
}

TEST(MemoryPlan, CacheBytesPerTokenForEveryDtype) {
  const model::ModelConfig glm5 =
      model::load_config(std::string(HANDOFF_TEST_DATA) + "/glm5/config.json");
  using D = CacheDtype;
  // 512 + 64 latent values, 128 indexer values per layer (MODEL_SPEC §1.2, §2.5).
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kF32, D::kF32).latent, 576 * 4);
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kF32, D::kF32).indexer, 128 * 4);
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kBF16, D::kBF16).per_layer(), 1152 + 256);
  // fp8: 512 e4m3 + 4 f32 scales + 64 bf16 rope = 656; indexer 128 e4m3 + 1 f32 scale = 132.
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kFp8, D::kFp8).latent, 656);
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kFp8, D::kFp8).indexer, 132);
  EXPECT_EQ(cache_bytes_per_token_per_layer(glm5, D::kFp8, D::kBF16).per_layer(), 656 + 256);
  // Off the 128 grid: kv 130 -> 2 scale blocks, index 36 -> 1.
  const model::ModelConfig c = odd();
  EXPECT_EQ(cache_bytes_per_token_per_layer(c, D::kFp8, D::kFp8).latent, 130 + 2 * 4 + 8 * 2);
  EXPECT_EQ(cache_bytes_per_token_per_layer(c, D::kFp8, D::kFp8).indexer, 36 + 4);
  // Per rank: the stage's layers, every tp rank alike (the latent is not split by heads).
  MemoryOptions all_fp8;
  all_fp8.weights = WeightDtype::kFp8;
  all_fp8.kv_cache = D::kFp8;
  all_fp8.indexer_cache = D::kFp8;
  const MemoryPlan mp = memory(glm5, 16, 4, all_fp8);
  for (const RankMemory& r : mp.ranks) {
    const int64_t layers = r.stage < 2 ? 20 : 19;  // 78 layers: 20, 20, 19, 19
    EXPECT_EQ(r.layers, layers);
    EXPECT_EQ(r.cache_bytes_per_token, layers * 788) << r.rank;
  }
  // Without an indexer (deepseek_v3) only the latent counts.
  nlohmann::json j = golden_json("dsv32_tiny_sparse");
  j["model_type"] = "deepseek_v3";
  j["architectures"] = {"DeepseekV3ForCausalLM"};
  for (const char* field : {"index_n_heads", "index_head_dim", "index_topk"}) j.erase(field);
  const model::ModelConfig v3 = config_of(j);
  EXPECT_EQ(cache_bytes_per_token_per_layer(v3, D::kBF16, D::kFp8).per_layer(), (32 + 8) * 2);
}

TEST(MemoryPlan, TokensThatFitAreTheMinimumOverStages) {
  const model::ModelConfig c = tiny();
  // Stages of 1 and 3 layers: stage 1 holds three times the cache per token.
  ParallelOptions o = layout(2, 2);
  o.pp_layers = {1, 3};
  const Plan plan = make_plan(c, o);
  MemoryOptions m;
  const MemoryPlan bare = plan_memory(c, plan, m);
  const int64_t per_layer = (32 + 8 + 16) * 4;
  EXPECT_EQ(bare.ranks[0].cache_bytes_per_token, per_layer);
  EXPECT_EQ(bare.ranks[2].cache_bytes_per_token, 3 * per_layer);
  EXPECT_FALSE(bare.max_tokens);
  int64_t heaviest = 0;
  for (const RankMemory& r : bare.ranks) heaviest = std::max(heaviest, r.weight_bytes);
  EXPECT_EQ(bare.min_mem_per_rank, heaviest);

  m.reserve = 1000;
  m.mem_per_rank = heaviest + m.reserve + 100 * 3 * per_layer + 5;
  const MemoryPlan mp = plan_memory(c, plan, m);
  for (const RankMemory& r : mp.ranks) {
    ASSERT_TRUE(r.cache_tokens);
    EXPECT_EQ(*r.cache_tokens,
              (*m.mem_per_rank - r.weight_bytes - m.reserve) / r.cache_bytes_per_token);
  }
  ASSERT_TRUE(mp.max_tokens);
  EXPECT_GE(*mp.max_tokens, 100);
  EXPECT_EQ(mp.ranks[static_cast<size_t>(mp.limiting_rank)].stage, 1);
  for (const RankMemory& r : mp.ranks) EXPECT_GE(*r.cache_tokens, *mp.max_tokens);

  // Exactly the weights and reserve: zero tokens, not an error; one byte less: an error.
  m.mem_per_rank = heaviest + m.reserve;
  EXPECT_EQ(*plan_memory(c, plan, m).max_tokens, 0);
  m.mem_per_rank = heaviest + m.reserve - 1;
  try {
    plan_memory(c, plan, m);
    ADD_FAILURE() << "a budget below the weights was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--mem-per-rank"), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(heaviest + 1000)), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace handoff::parallel
