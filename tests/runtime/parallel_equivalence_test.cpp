// Every layout of the test matrix against one rank and against DeepSeek's reference: same
// greedy tokens, logits within 1e-4 (f32, teacher-forced on every golden case and prompt).
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "../engine/golden_support.h"
#include "parallel_support.h"

namespace handoff::testing {
namespace {

class ParallelEquivalence : public ::testing::TestWithParam<MatrixEntry> {};

// The one-rank run of every case and prompt, computed once.
const engine::GenerationResult& baseline(const std::string& name, size_t prompt) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, size_t>, engine::GenerationResult> cache;
  std::lock_guard lock(mutex);
  auto key = std::make_pair(name, prompt);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const auto& gp = golden(name)["prompts"][prompt];
    it = cache
             .emplace(key, run_parallel_teacher_forced(
                               golden_dir(name), {}, gp["tokens"].get<std::vector<int32_t>>(),
                               gp["greedy_tokens"].get<std::vector<int32_t>>()))
             .first;
  }
  return it->second;
}

TEST_P(ParallelEquivalence, SameTokensAndLogitsAsOneRankAndTheReference) {
  const auto& entry = GetParam();
  for (const auto& name : golden_cases()) {
    const auto& g = golden(name);
    for (size_t p = 0; p < g["prompts"].size(); ++p) {
      SCOPED_TRACE(name + " prompt " + std::to_string(p));
      const auto& gp = g["prompts"][p];
      const auto r = run_parallel_teacher_forced(golden_dir(name), entry.options,
                                                 gp["tokens"].get<std::vector<int32_t>>(),
                                                 gp["greedy_tokens"].get<std::vector<int32_t>>());
      const auto& base = baseline(name, p);
      EXPECT_EQ(r.generated, base.generated);
      EXPECT_EQ(r.generated, gp["greedy_tokens"].get<std::vector<int32_t>>());
      EXPECT_LE(max_abs_diff(r.prefill_logits, base.prefill_logits), 1e-4);
      EXPECT_LE(max_abs_diff(r.decode_logits, base.decode_logits), 1e-4);
      EXPECT_LE(max_abs_diff(r.prefill_logits, gp["prefill_logits"]), 1e-4);
      EXPECT_LE(max_abs_diff(r.decode_logits, gp["decode_logits"]), 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, ParallelEquivalence, ::testing::ValuesIn(parallel_matrix()),
                         [](const auto& info) { return info.param.name; });

// Every row that attends densely in MLA's per-head form (heads split over TP ranks, rows over SP
// ranks, layers over stages), on the layouts that split each of them: the reference's logits
// and tokens as above.
TEST(ParallelEquivalencePerHead, SplitLayoutsMatchTheReference) {
  int layouts = 0;
  for (const MatrixEntry& entry : parallel_matrix()) {
    if (entry.name != "tp2_pp1_spon" && entry.name != "tp4_pp1_spoff" &&
        entry.name != "tp2_pp2_spon_shard_guard")
      continue;
    ++layouts;
    for (const auto& name : golden_cases()) {
      const auto& g = golden(name);
      for (size_t p = 0; p < g["prompts"].size(); ++p) {
        SCOPED_TRACE(entry.name + " " + name + " prompt " + std::to_string(p));
        const auto& gp = g["prompts"][p];
        const auto r = run_parallel_teacher_forced(
            golden_dir(name), entry.options, gp["tokens"].get<std::vector<int32_t>>(),
            gp["greedy_tokens"].get<std::vector<int32_t>>(), 1);
        EXPECT_EQ(r.generated, gp["greedy_tokens"].get<std::vector<int32_t>>());
        EXPECT_LE(max_abs_diff(r.prefill_logits, gp["prefill_logits"]), 1e-4);
        EXPECT_LE(max_abs_diff(r.decode_logits, gp["decode_logits"]), 1e-4);
      }
    }
  }
  EXPECT_EQ(layouts, 3);
}

}  // namespace
}  // namespace handoff::testing
