// Prompt chunks in MLA's per-head form (MlaAttention::attend_per_head) against the absorbed form
// on prompts long enough to cross its query blocks (64 rows), key tiles (64) and expanded key
// chunks (256), whole and chunked. golden_test.cpp checks the form against the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "golden_support.h"
#include "handoff/cache/block_manager.h"
#include "handoff/cache/paged_cache.h"

namespace handoff::testing {
namespace {

// dsv32_small_bf16 with index_topk past every prompt here: DSA attends densely, so every prompt
// row may go per head.
std::filesystem::path dense_variant() {
  return write_golden_variant(
      "dsv32_small_bf16", "per_head", [](nlohmann::json& config) { config["index_topk"] = 2048; },
      [](const std::string&, const tensor::Tensor& t) -> std::optional<tensor::Tensor> {
        return t;
      });
}

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> token(0, 255);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = token(rng);
  return out;
}

TEST(PerHeadPrefill, EqualsTheAbsorbedFormOnLongPrompts) {
  const auto dir = dense_variant();
  std::mt19937 rng(7);
  nlohmann::json prompt;
  prompt["tokens"] = random_tokens(rng, 600);
  prompt["greedy_tokens"] = random_tokens(rng, 4);

  for (const tensor::DType dtype : {tensor::DType::kF32, tensor::DType::kBF16}) {
    SCOPED_TRACE(tensor::dtype_name(dtype));
    model::LoadOptions options;
    options.dtype = dtype;
    options.per_head_prefill_min_tokens = 0;
    auto absorbed = model::Model::load(dir.string(), options);
    options.per_head_prefill_min_tokens = 128;
    auto per_head = model::Model::load(dir.string(), options);
    const double tolerance = dtype == tensor::DType::kF32 ? 1e-4 : 2e-3;
    for (const int64_t chunk : {0, 200}) {
      SCOPED_TRACE("chunk " + std::to_string(chunk));
      const auto a = run_teacher_forced(*absorbed, prompt, chunk);
      const auto b = run_teacher_forced(*per_head, prompt, chunk);
      const double prefill = max_abs_diff(a.prefill_logits, b.prefill_logits);
      EXPECT_LE(prefill, tolerance);
      EXPECT_GT(prefill, 0.0) << "the per-head form did not run";
      EXPECT_LE(max_abs_diff(a.decode_logits, b.decode_logits), tolerance);
      EXPECT_EQ(a.indexer_topk_prefill, b.indexer_topk_prefill);
    }
  }
  std::filesystem::remove_all(dir);
}

// One step of several sequences: decode rows (absorbed) beside a prompt chunk (per head), in
// the orders a served step takes, decode rows before the chunk or on both sides of it (then
// the absorbed products also run over the chunk's rows, which the per-head form overwrites).
// Every row's logits equal those of its sequence's step alone.
TEST(PerHeadPrefill, MixedStepsEqualEachSequenceAlone) {
  const auto dir = dense_variant();
  model::LoadOptions options;
  options.dtype = tensor::DType::kF32;
  auto model = model::Model::load(dir.string(), options);
  const int64_t block = 16;
  cache::BlockManager manager(64, block);
  cache::PagedCache cache(model->cache_shape(64, block));
  std::mt19937 rng(11);
  const auto context_a = random_tokens(rng, 150), context_c = random_tokens(rng, 40);
  const auto prompt_b = random_tokens(rng, 200), next_a = random_tokens(rng, 1),
             next_c = random_tokens(rng, 1);
  cache::BlockTable a, b, c;
  manager.reserve(a, 151);
  manager.reserve(b, 200);
  manager.reserve(c, 41);
  model->forward({{context_a, 0, &a}}, cache);
  model->forward({{context_c, 0, &c}}, cache);
  const model::SequenceChunk step_a{next_a, 150, &a}, step_b{prompt_b, 0, &b, true},
      step_c{next_c, 40, &c};
  auto rows = [](const tensor::Tensor& logits, int64_t first, int64_t n) {
    std::vector<std::vector<float>> out;
    const int64_t vocab = logits.shape()[1];
    for (int64_t r = first; r < first + n; ++r)
      out.emplace_back(logits.data<float>() + r * vocab, logits.data<float>() + (r + 1) * vocab);
    return out;
  };
  const auto alone_a = rows(model->forward({step_a}, cache), 0, 1);
  const auto alone_b = rows(model->forward({step_b}, cache), 0, 200);
  const auto alone_c = rows(model->forward({step_c}, cache), 0, 1);

  const auto around = model->forward({step_a, step_b, step_c}, cache);
  EXPECT_LE(max_abs_diff(rows(around, 0, 1), alone_a), 1e-4);
  EXPECT_LE(max_abs_diff(rows(around, 1, 200), alone_b), 1e-4);
  EXPECT_LE(max_abs_diff(rows(around, 201, 1), alone_c), 1e-4);

  const auto before = model->forward({step_a, step_c, step_b}, cache);
  EXPECT_LE(max_abs_diff(rows(before, 0, 1), alone_a), 1e-4);
  EXPECT_LE(max_abs_diff(rows(before, 1, 1), alone_c), 1e-4);
  EXPECT_LE(max_abs_diff(rows(before, 2, 200), alone_b), 1e-4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace handoff::testing
