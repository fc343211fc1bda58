// `handoff generate` end to end: its --dump equals the golden field by field, and bad input is
// a clear error with a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "cli_support.h"
#include "handoff/model/model.h"

namespace handoff::testing {
namespace {

const std::string kCase = std::string(HANDOFF_TEST_DATA) + "/golden/glm5_tiny_sparse";

// Runs generate on every prompt of the case and compares its dump with `golden_file`; returns
// the command's output.
std::string expect_dump_matches(const std::string& flags, const std::string& golden_file,
                                const std::string& tag) {
  const auto tmp = std::filesystem::temp_directory_path() / ("handoff_generate_cli_test_" + tag);
  std::filesystem::create_directories(tmp);
  const std::string dump = (tmp / "dump.json").string();
  const auto r =
      run_handoff("generate --model " + kCase + " --prompts-json " + kCase +
                  "/prompts.json --max-new-tokens 8 --dtype f32 --dump " + dump + " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos);
  const auto ours = nlohmann::json::parse(std::ifstream(dump));
  const auto golden = nlohmann::json::parse(std::ifstream(kCase + "/" + golden_file));
  EXPECT_EQ(ours["format"], golden["format"]);
  EXPECT_EQ(ours["prompts"].size(), golden["prompts"].size());
  for (size_t p = 0; p < std::min(ours["prompts"].size(), golden["prompts"].size()); ++p) {
    const auto& o = ours["prompts"][p];
    const auto& g = golden["prompts"][p];
    for (const char* exact : {"tokens", "n_decode", "greedy_tokens", "next_token_after_decode",
                              "indexer_topk_prefill", "indexer_topk_decode", "moe_experts_prefill"})
      EXPECT_EQ(o[exact], g[exact]) << exact << " of prompt " << p;
    for (const char* close : {"prefill_logits", "prefill_last_logits", "decode_logits"})
      EXPECT_LE(json_max_diff(o[close], g[close]), 1e-4) << close << " of prompt " << p;
  }
  std::filesystem::remove_all(tmp);
  return r.output;
}

TEST(GenerateCli, DumpMatchesGoldenFieldByField) {
  expect_dump_matches("", "golden.json", "exact");
}

// --indexer-cache-dtype fp8 is the reference's FP8 indexer: its golden, not the exact one.
TEST(GenerateCli, Fp8IndexerCacheDumpMatchesTheReferenceFp8Golden) {
  const std::string out =
      expect_dump_matches("--indexer-cache-dtype fp8", "golden_fp8sim.json", "fp8");
  EXPECT_NE(out.find("indexer key f8_e4m3"), std::string::npos) << out;
}

// The printed roofline denominator is the mean over the decode steps of the bytes each reads:
// with index_topk 8 and a 4-token prompt, steps attending 5-8 keys skip the indexer's query
// weights and those attending 9 or more read them.
TEST(GenerateCli, ActiveBytesAreTheMeanOverTheDecodeSteps) {
  const auto r = run_handoff("generate --model " + kCase +
                             " --prompt-ids 1,2,3,4 --max-new-tokens 8 --dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch generated, bytes;
  ASSERT_TRUE(std::regex_search(r.output, generated, std::regex("generated: ([0-9,]+)")))
      << r.output;
  ASSERT_TRUE(
      std::regex_search(r.output, bytes, std::regex("active weight bytes per token: ([0-9]+)")))
      << r.output;
  const std::string ids = generated[1];
  const auto tokens = static_cast<int64_t>(std::count(ids.begin(), ids.end(), ',') + 1);
  model::LoadOptions options;
  options.dtype = tensor::DType::kBF16;
  const auto model = model::Model::load(kCase, options);
  ASSERT_EQ(model->config().index_topk, 8);
  ASSERT_GT(tokens, 5) << "the run must reach steps beyond index_topk keys";
  double sum = 0;
  for (int64_t j = 1; j < tokens; ++j)  // token j comes from the step attending 4 + j keys
    sum += static_cast<double>(model->active_weight_bytes_per_token(4 + j));
  EXPECT_EQ(std::stoull(bytes[1]),
            static_cast<uint64_t>(sum / static_cast<double>(tokens - 1) + 0.5));
  EXPECT_LT(model->active_weight_bytes_per_token(8), model->active_weight_bytes_per_token(9));
}

TEST(GenerateCli, BadInputIsAClearError) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"generate --model " + kCase + " --prompt-ids 1,x,3", "'x' is not a token id"},
      {"generate --model " + kCase + " --prompt-ids 1,999", "outside the vocabulary"},
      {"generate --model " + kCase, "exactly one of --prompt, --prompt-ids or --prompts-json"},
      {"generate --model " + kCase + " --prompt-ids 1 --top-p 0", "top_p"},
      {"generate --model " + kCase + " --prompt-ids 1 --prompts-json /nonexistent.json",
       "exactly one"},
      {"generate --model " + kCase + " --prompts-json /nonexistent.json", "/nonexistent.json"},
      {"generate --model /nonexistent-model --prompt-ids 1", "/nonexistent-model"},
      {"generate --model " + kCase + " --prompt-ids 1 --kv-cache-dtype fp8",
       "--kv-cache-dtype fp8: the latent cache is stored f32 or bf16"},
      {"generate --model " + kCase + " --prompt-ids 1 --indexer-cache-dtype fp4",
       "--indexer-cache-dtype must be f32, bf16 or fp8"},
  };
  for (const auto& c : cases) {
    const auto r = run_handoff(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace handoff::testing
