// Prefix caching and forked choices (copy-on-write) on parallel layouts: every rank caches its
// own part under the engine's block ids and applies the step's block copies, so a layout gives
// the same tokens with prefix caching as without (f32, ranks as threads).
#include <gtest/gtest.h>

#include <chrono>

#include "handoff/engine/engine.h"
#include "handoff/runtime/local_executor.h"
#include "parallel_support.h"

namespace handoff::testing {
namespace {

const std::string kModel = std::string(HANDOFF_TEST_DATA) + "/golden/dsv32_tiny_sparse";

std::unique_ptr<engine::Engine> make_engine(const parallel::ParallelOptions& layout,
                                            bool prefix_caching) {
  model::LoadOptions load;
  load.dtype = tensor::DType::kF32;
  load.batch_invariant = true;
  load.parallel = layout;
  engine::EngineOptions o;
  o.block_size = 4;
  o.num_blocks = 64;
  o.max_model_len = 64;
  o.scheduler.max_num_batched_tokens = 64;
  o.prefix_caching = prefix_caching;
  auto exec = std::make_unique<runtime::LocalExecutor>(
      kModel, load, std::chrono::seconds(60),
      runtime::WorkerOptions{o.num_blocks, o.block_size, o.scheduler.max_num_batched_tokens});
  return std::make_unique<engine::Engine>(o, std::move(exec), nullptr);
}

// Greedy requests that share a 10-token system prompt, one at a time (each later one hits the
// cache), then a sampled request with n = 3 whose 11-token prompt ends in a shared partial block.
std::vector<std::vector<int32_t>> run(engine::Engine& engine) {
  std::vector<int32_t> system;
  for (int j = 0; j < 10; ++j) system.push_back((29 * j + 3) % 256);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 4; ++i) {
    engine::Request r;
    r.prompt = system;
    for (int j = 0; j <= i; ++j) r.prompt.push_back((11 * i + j + 1) % 256);
    r.max_tokens = 4;
    auto s = engine.submit(r);
    engine.run_until_idle();
    out.push_back(s->wait_all().tokens);
  }
  engine::Request r;
  r.prompt = system;
  r.prompt.push_back(77);
  r.max_tokens = 6;
  r.sampling.temperature = 1.0f;
  r.seed = 99;
  r.n = 3;
  auto s = engine.submit(r);
  engine.run_until_idle();
  for (const auto& c : s->wait_all_choices()) out.push_back(c.tokens);
  EXPECT_EQ(engine.stats().cache_blocks_used, 0);
  return out;
}

class PrefixCacheLayouts : public ::testing::TestWithParam<MatrixEntry> {};

TEST_P(PrefixCacheLayouts, SameTokensWithAndWithoutPrefixCaching) {
  const auto& layout = GetParam().options;
  std::vector<std::vector<int32_t>> off, on;
  {
    auto e = make_engine(layout, false);
    off = run(*e);
  }
  auto e = make_engine(layout, true);
  on = run(*e);
  EXPECT_EQ(on, off);
  // The 3 later greedy requests find the system prompt's 2 full blocks; the n = 3 request too.
  EXPECT_EQ(e->stats().prefix_cache_hits, 4u * 8u);
  EXPECT_NE(on[4], on[5]);  // the choices did sample differently
}

std::vector<MatrixEntry> layouts() {
  std::vector<MatrixEntry> out;
  for (const auto& m : parallel_matrix())
    if (m.name == "tp2_pp1_spoff" || m.name == "tp2_pp1_spon" || m.name == "tp1_pp3_spoff" ||
        m.name == "tp2_pp2_spon_shard_guard")
      out.push_back(m);
  if (out.size() != 4) throw std::logic_error("a layout of this test left the matrix");
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, PrefixCacheLayouts, ::testing::ValuesIn(layouts()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace handoff::testing
