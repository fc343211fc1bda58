// The gate: a layer runs SP exactly when all five conditions hold and it is a MoE (+MLA) layer.
// Every one of the 32 combinations, for a dense and a MoE layer.
#include <gtest/gtest.h>

#include "handoff/parallel/plan.h"

namespace handoff::parallel {
namespace {

TEST(GateMatrix, AllThirtyTwoCombinationsForDenseAndMoeLayers) {
  for (int bits = 0; bits < 32; ++bits) {
    GateInputs in;
    in.pp_policy_keeps_sp = bits & 1;
    in.family_has_sp_decoder = bits & 2;
    in.moe_layer_freq_is_one = bits & 4;
    in.sp_requested = bits & 8;
    in.tp_above_one = bits & 16;
    const Gate gate = evaluate_gate(in);
    SCOPED_TRACE("conditions " + std::to_string(bits));
    ASSERT_EQ(gate.conditions.size(), 5u);
    for (int c = 0; c < 5; ++c) EXPECT_EQ(gate.conditions[c].pass, ((bits >> c) & 1) != 0);
    EXPECT_EQ(gate.sp_inside_stages, bits == 31);
    for (bool moe : {false, true}) {
      for (Layout incoming : {Layout::kFull, Layout::kShard}) {
        const LayerPlan lp = plan_layer(gate, in, 7, moe, incoming);
        const bool sp = bits == 31 && moe;
        EXPECT_EQ(lp.sp, sp);
        EXPECT_EQ(lp.o_proj_reduce, !sp && in.tp_above_one);
        EXPECT_EQ(lp.output_layout, sp ? Layout::kShard : Layout::kFull);
        EXPECT_EQ(lp.input_layout, sp ? incoming : Layout::kFull);
        if (!moe) {
          EXPECT_EQ(lp.moe_mode, MoeMode::kDense);
        } else if (sp) {
          EXPECT_EQ(lp.moe_mode, MoeMode::kSequenceParallel);
        } else if (in.sp_requested && in.tp_above_one) {
          // "On in name": SP requested, gate closed -> the upstream chunked MoE.
          EXPECT_EQ(lp.moe_mode, MoeMode::kChunked);
        } else {
          EXPECT_EQ(lp.moe_mode, MoeMode::kReplicated);
        }
      }
    }
  }
}

}  // namespace
}  // namespace handoff::parallel
