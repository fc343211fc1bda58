// make_plan on real configs: stage split, layouts, the token-count contract, and layouts that
// cannot run.
#include "handoff/parallel/plan.h"

#include <gtest/gtest.h>

#include "handoff/error.h"
#include "handoff/model/config.h"
#include "handoff/parallel/comm_prediction.h"

namespace handoff::parallel {
namespace {

model::ModelConfig golden_config(const std::string& name) {
  return model::load_config(std::string(HANDOFF_TEST_DATA) + "/golden/" + name + "/config.json");
}

ParallelOptions opts(int tp, int pp, bool sp, BoundaryContract b = BoundaryContract::kFull,
                     SpPolicy p = SpPolicy::kKeep) {
  ParallelOptions o;
  o.tp = tp;
  o.pp = pp;
  o.sp = sp;
  o.boundary = b;
  o.policy = p;
  return o;
}

TEST(Plan, StagesSplitEvenlyOrAsListed) {
  const auto config = golden_config("dsv32_small_bf16");  // 6 layers, layer 0 dense
  const Plan even = make_plan(config, opts(2, 4, true));
  ASSERT_EQ(even.stages.size(), 4u);
  EXPECT_EQ(even.stages[0].end_layer - even.stages[0].first_layer, 2);
  EXPECT_EQ(even.stages[3].end_layer, 6);
  auto o = opts(2, 2, true);
  o.pp_layers = {1, 5};
  const Plan listed = make_plan(config, o);
  EXPECT_EQ(listed.stages[0].end_layer, 1);
  EXPECT_EQ(listed.stages[1].first_layer, 1);
  EXPECT_FALSE(listed.stages[0].layers[0].sp);  // dense prefix keeps plain TP
  EXPECT_TRUE(listed.stages[1].layers[0].sp);
  EXPECT_EQ(listed.stages[1].layers[0].input_layout, Layout::kFull);  // skips the all-gather
  EXPECT_EQ(listed.stages[1].layers[1].input_layout, Layout::kShard);
}

TEST(Plan, GuardKeepsSpOffButSpRequested) {
  const auto config = golden_config("glm5_tiny_sparse");
  const Plan guard = make_plan(config, opts(2, 2, true, BoundaryContract::kFull, SpPolicy::kGuard));
  EXPECT_FALSE(guard.gate.sp_inside_stages);
  EXPECT_TRUE(guard.sp_requested_but_inactive());
  for (const auto& st : guard.stages)
    for (const auto& lp : st.layers) {
      EXPECT_FALSE(lp.sp);
      EXPECT_TRUE(lp.o_proj_reduce);
      if (lp.moe) {
        EXPECT_EQ(lp.moe_mode, MoeMode::kChunked);
      }
    }
}

TEST(Plan, LayoutsThatCannotRunAreErrors) {
  const auto config = golden_config("dsv32_tiny_sparse");          // 4 heads, 4 layers, 8 experts
  EXPECT_THROW(make_plan(config, opts(3, 1, false)), InputError);  // 3 does not divide 4 heads
  EXPECT_THROW(make_plan(config, opts(8, 1, false)), InputError);
  EXPECT_THROW(make_plan(config, opts(1, 5, false)), InputError);  // more stages than layers
  auto o = opts(1, 2, false);
  o.pp_layers = {1, 2};
  EXPECT_THROW(make_plan(config, o), InputError);  // sums to 3, not 4
  o.pp_layers = {4, 0};
  EXPECT_THROW(make_plan(config, o), InputError);
  try {
    make_plan(config, opts(3, 1, false));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads"), std::string::npos);
  }
}

// A big synthetic config for tp 8 and 16: the token-count contract equals what the plan sends
// and receives, for every n.
TEST(ShapeContract, PlanLevelForLargeTp) {
  for (const char* family : {"deepseek_v32", "glm_moe_dsa", "deepseek_v3"}) {
    auto config = golden_config("dsv32_small_bf16");
    config.family = model::parse_family(family);
    config.num_attention_heads = 16;
    config.n_routed_experts = 32;
    config.n_group = 4;
    config.topk_group = 2;
    config.intermediate_size = 256;
    config.moe_intermediate_size = 32;
    for (int tp : {1, 2, 4, 8, 16})
      for (auto boundary : {BoundaryContract::kFull, BoundaryContract::kShard})
        for (int64_t n = 1; n <= 40; ++n) {
          const Plan plan = make_plan(config, opts(tp, 2, tp > 1, boundary));
          const int64_t rows = pp_intermediate_token_count(plan, n);
          EXPECT_EQ(rows, boundary == BoundaryContract::kShard && tp > 1 ? (n + tp - 1) / tp : n);
          const int64_t row_bytes = 2 * config.hidden_size * 4;
          int64_t sent = -1, received = -1;
          for (const auto& c : predict_step(plan, config, 0, n, 1))
            if (c.op == comm::Op::kSend) sent = c.bytes / row_bytes;
          for (const auto& c : predict_step(plan, config, 1, n, 1))
            if (c.op == comm::Op::kRecv) received = c.bytes / row_bytes;
          EXPECT_EQ(sent, rows) << family << " tp " << tp << " n " << n;
          EXPECT_EQ(received, rows) << family << " tp " << tp << " n " << n;
        }
  }
}

}  // namespace
}  // namespace handoff::parallel
