// `handoff plan` memory output: the JSON "memory" object, the human table, and a budget that
// does not hold the weights (exit 2 naming --mem-per-rank and the bytes needed).
#include <gtest/gtest.h>

#include "cli_support.h"

namespace handoff::testing {
namespace {

const std::string kTiny = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse/config.json";
const std::string kGlm5 = std::string(HANDOFF_TEST_DATA) + "/glm5/config.json";

TEST(PlanMemoryCli, JsonHasPerRankMemoryAndTokens) {
  const auto r = run_handoff("plan --config " + kTiny +
                             " --tp 2 --pp 2 --weight-dtype fp8 --kv-cache-dtype bf16 "
                             "--indexer-cache-dtype fp8 --mem-per-rank 1MiB --mem-reserve 100K "
                             "--json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const auto& m = j["memory"];
  EXPECT_EQ(m["weight_dtype"], "fp8");
  EXPECT_EQ(m["fp8_weight_block"], nlohmann::json({128, 128}));
  EXPECT_EQ(m["mem_per_rank"], 1 << 20);
  EXPECT_EQ(m["reserve_per_rank"], 100000);
  // Latent: 32 e4m3 + 1 f32 scale + 8 bf16 rope; indexer 16 e4m3 + 1 f32 scale.
  EXPECT_EQ(m["cache_bytes_per_token_per_layer"]["latent"], (32 + 8) * 2);
  EXPECT_EQ(m["cache_bytes_per_token_per_layer"]["indexer"], 16 + 4);
  ASSERT_EQ(m["ranks"].size(), 4u);
  int64_t fewest = INT64_MAX;
  for (const auto& rank : m["ranks"]) {
    const int64_t tokens = rank["cache_tokens"].get<int64_t>();
    EXPECT_EQ(tokens, ((1 << 20) - 100000 - rank["weight_bytes"].get<int64_t>()) /
                          rank["cache_bytes_per_token"].get<int64_t>());
    fewest = std::min(fewest, tokens);
  }
  EXPECT_EQ(m["max_tokens"], fewest);
  EXPECT_TRUE(m["ranks"][0]["weights"].contains("embedding"));
  EXPECT_TRUE(m["ranks"][3]["weights"].contains("lm_head"));
}

TEST(PlanMemoryCli, HumanOutputWithoutABudget) {
  const auto r = run_handoff("plan --config " + kGlm5 + " --tp 16 --pp 4 --weight-dtype fp8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("memory: weights fp8"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("give --mem-per-rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0-15"), std::string::npos) << r.output;  // one row per alike ranks
}

TEST(PlanMemoryCli, BudgetBelowTheWeightsIsAClearError) {
  const auto r = run_handoff("plan --config " + kGlm5 +
                             " --tp 16 --pp 4 --weight-dtype fp8 --mem-per-rank 10G");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--mem-per-rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs at least"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("-1"), std::string::npos) << "a negative count: " << r.output;
}

}  // namespace
}  // namespace handoff::testing
