#include "handoff/parallel/comm_prediction.h"

#include "handoff/parallel/scopes.h"

namespace handoff::parallel {

using comm::Group;
using comm::Op;

std::vector<PlannedCall> predict_step(const Plan& plan, const model::ModelConfig& config,
                                      int stage_index, int64_t n, int64_t logit_rows) {
  const int tp = plan.options.tp;
  const int pp = plan.options.pp;
  const int64_t h = config.hidden_size;
  const int64_t k = config.num_experts_per_tok;
  const int64_t s = (n + tp - 1) / tp;
  constexpr int64_t f = sizeof(float);
  const StagePlan& stage = plan.stages.at(static_cast<size_t>(stage_index));
  std::vector<PlannedCall> calls;
  auto add = [&](std::string scope, Op op, Group g, int64_t bytes) {
    calls.push_back({std::move(scope), op, g, bytes});
  };
  const bool tp_comm = tp > 1;
  if (stage_index == 0) {
    if (tp_comm) add(embed_scope(), Op::kAllReduce, Group::kTp, n * h * f);
  } else {
    add(stage_entry_scope(stage_index), Op::kRecv, Group::kPp,
        pp_intermediate_token_count(plan, n) * 2 * h * f);
  }
  Layout layout = stage.entry_layout;
  for (const LayerPlan& lp : stage.layers) {
    const std::string scope = layer_scope(lp.index);
    if (lp.sp) {
      if (layout == Layout::kShard) add(scope, Op::kAllGather, Group::kTp, s * h * f);
      add(scope, Op::kReduceScatter, Group::kTp, tp * s * h * f);
      add(scope, Op::kAllGather, Group::kTp, s * (h + 2 * k) * f);
      add(scope, Op::kReduceScatter, Group::kTp, tp * s * h * f);
    } else {
      if (layout == Layout::kShard) add(scope, Op::kAllGather, Group::kTp, s * 2 * h * f);
      if (lp.o_proj_reduce) add(scope, Op::kAllReduce, Group::kTp, n * h * f);
      if (lp.moe_mode == MoeMode::kChunked) {
        add(scope, Op::kAllGather, Group::kTp, s * (h + 2 * k) * f);
        add(scope, Op::kReduceScatter, Group::kTp, tp * s * h * f);
        add(scope, Op::kAllGather, Group::kTp, s * h * f);
      } else if (tp_comm) {
        add(scope, Op::kAllReduce, Group::kTp, n * h * f);
      }
    }
    layout = lp.output_layout;
  }
  if (stage_index + 1 < pp) {
    const std::string scope = stage_exit_scope(stage_index);
    if (stage.exit_layout == Layout::kFull && layout == Layout::kShard)
      add(scope, Op::kAllGather, Group::kTp, s * 2 * h * f);
    add(scope, Op::kSend, Group::kPp, pp_intermediate_token_count(plan, n) * 2 * h * f);
  } else {
    if (layout == Layout::kShard) add(head_scope(), Op::kAllGather, Group::kTp, s * 2 * h * f);
    if (tp_comm) {
      const int64_t vocab_part = (config.vocab_size + tp - 1) / tp;
      add(head_scope(), Op::kAllGather, Group::kTp, logit_rows * vocab_part * f);
    }
  }
  return calls;
}

comm::CommCounts predicted_counts(const Plan& plan, const model::ModelConfig& config, int stage,
                                  int64_t n, int64_t logit_rows) {
  comm::CommCounts counts;
  for (const PlannedCall& c : predict_step(plan, config, stage, n, logit_rows)) {
    auto& stats = counts[{c.scope, c.op, c.group}];
    stats.calls += 1;
    stats.bytes += c.bytes;
  }
  return counts;
}

}  // namespace handoff::parallel
