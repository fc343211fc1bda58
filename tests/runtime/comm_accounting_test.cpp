// Measured communication == the plan's prediction, per rank, per layer, for one prefill step
// of n tokens on every layout of the test matrix; plus the FlashComm1 structure itself.
#include <gtest/gtest.h>

#include "../engine/golden_support.h"
#include "handoff/model/config.h"
#include "handoff/parallel/comm_prediction.h"
#include "handoff/parallel/scopes.h"
#include "parallel_support.h"

namespace handoff::testing {
namespace {

using comm::Group;
using comm::Op;

class CommAccounting : public ::testing::TestWithParam<MatrixEntry> {};

int64_t calls(const comm::CommCounts& counts, const std::string& scope, Op op) {
  int64_t n = 0;
  for (const auto& [key, stats] : counts)
    if (std::get<0>(key) == scope && std::get<1>(key) == op) n += stats.calls;
  return n;
}

TEST_P(CommAccounting, MeasuredEqualsPlanForEveryRankAndLayer) {
  const auto& o = GetParam().options;
  const int tp = o.tp;
  for (const std::string name : {"dsv32_small_bf16", "glm5_tiny_sparse"}) {
    const auto config = model::load_config(golden_dir(name) + "/config.json");
    const auto plan = parallel::make_plan(config, o);
    for (int64_t n : {int64_t{1}, int64_t{tp - 1}, int64_t{tp}, int64_t{tp + 1}, int64_t{33}}) {
      if (n < 1) continue;
      SCOPED_TRACE(name + " n " + std::to_string(n));
      std::vector<int32_t> prompt(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 37 + 5) % 256);
      const auto m = measure_prefill_step(golden_dir(name), o, prompt);
      const int64_t s = (n + tp - 1) / tp;
      const int64_t h = config.hidden_size;
      for (int rank = 0; rank < tp * o.pp; ++rank) {
        const int stage = rank / tp;
        const auto& measured = m.counts[static_cast<size_t>(rank)];
        EXPECT_EQ(measured, parallel::predicted_counts(plan, config, stage, n, 1))
            << "rank " << rank;
        const auto& sp = plan.stages[static_cast<size_t>(stage)];
        for (const auto& lp : sp.layers) {
          const std::string scope = parallel::layer_scope(lp.index);
          if (lp.sp) {
            EXPECT_EQ(calls(measured, scope, Op::kAllReduce), 0) << scope;
            EXPECT_EQ(calls(measured, scope, Op::kReduceScatter), 2) << scope;  // o_proj + MoE
            EXPECT_EQ(calls(measured, scope, Op::kAllGather),
                      lp.input_layout == parallel::Layout::kShard ? 2 : 1)
                << scope;
            if (lp.input_layout == parallel::Layout::kShard) {  // the H-wide gather first
              EXPECT_EQ(measured.at({scope, Op::kAllGather, Group::kTp}).bytes,
                        s * h * 4 + s * (h + 2 * config.num_experts_per_tok) * 4);
            }
          }
          if (lp.moe_mode == parallel::MoeMode::kChunked) {
            EXPECT_EQ(calls(measured, scope, Op::kAllReduce), 1) << scope;  // o_proj is back
          }
        }
        if (stage + 1 < o.pp) {
          const std::string exit = parallel::stage_exit_scope(stage);
          const bool sharded_out = !sp.layers.empty() && sp.layers.back().sp;
          const bool full = o.boundary == parallel::BoundaryContract::kFull;
          EXPECT_EQ(calls(measured, exit, Op::kAllGather), full && sharded_out ? 1 : 0);
          if (full && sharded_out) {
            EXPECT_EQ(measured.at({exit, Op::kAllGather, Group::kTp}).bytes, s * 2 * h * 4);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, CommAccounting, ::testing::ValuesIn(parallel_matrix()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace handoff::testing
