#include "handoff/parallel/plan.h"

#include <fmt/format.h>

#include <numeric>

#include "handoff/error.h"

namespace handoff::parallel {

std::string_view policy_name(SpPolicy p) { return p == SpPolicy::kKeep ? "keep" : "guard"; }
std::string_view contract_name(BoundaryContract c) {
  return c == BoundaryContract::kFull ? "full" : "shard";
}
std::string_view layout_name(Layout l) { return l == Layout::kFull ? "full" : "shard"; }
std::string_view moe_mode_name(MoeMode m) {
  switch (m) {
    case MoeMode::kDense:
      return "dense_mlp";
    case MoeMode::kReplicated:
      return "replicated_all_reduce";
    case MoeMode::kChunked:
      return "chunked_expert_parallel";
    case MoeMode::kSequenceParallel:
      return "sequence_parallel";
  }
  return "?";
}

int64_t layout_rows(Layout layout, int64_t n, int tp) {
  return layout == Layout::kFull ? n : (n + tp - 1) / tp;
}

bool family_has_sp_decoder(model::Family family) {
  switch (family) {
    case model::Family::kGlmMoeDsa:
    case model::Family::kDeepseekV32:
    case model::Family::kDeepseekV3:
      return true;
  }
  return false;
}

GateInputs gate_inputs(const model::ModelConfig& config, const ParallelOptions& o) {
  return {o.pp == 1 || o.policy == SpPolicy::kKeep, family_has_sp_decoder(config.family),
          config.moe_layer_freq == 1, o.sp, o.tp > 1};
}

Gate evaluate_gate(const GateInputs& in) {
  Gate gate;
  auto add = [&](const char* name, bool pass, const char* yes, const char* no) {
    gate.conditions.push_back({name, pass, pass ? yes : no});
  };
  add("pp_policy", in.pp_policy_keeps_sp,
      "pp = 1, or policy keep: every stage exit restores the boundary contract",
      "policy guard under pp > 1: SP is kept off, as upstream does");
  add("model_family", in.family_has_sp_decoder, "the family's layers have the MLA + MoE shell",
      "the family has no SP decoder shell");
  add("moe_layer_freq", in.moe_layer_freq_is_one,
      "moe_layer_freq = 1: the SP region is contiguous after the dense prefix",
      "moe_layer_freq != 1: dense layers would interrupt the SP region");
  add("sp_requested", in.sp_requested, "--sp on", "--sp off");
  add("tp_gt_1", in.tp_above_one, "tp > 1", "tp = 1: nothing to shard over");
  gate.sp_inside_stages = true;
  for (const auto& c : gate.conditions) gate.sp_inside_stages = gate.sp_inside_stages && c.pass;
  return gate;
}

LayerPlan plan_layer(const Gate& gate, const GateInputs& in, int64_t index, bool moe,
                     Layout incoming) {
  LayerPlan lp;
  lp.index = index;
  lp.moe = moe;
  lp.sp = gate.sp_inside_stages && moe;
  lp.o_proj_reduce = !lp.sp && in.tp_above_one;
  lp.moe_mode = !moe                                   ? MoeMode::kDense
                : lp.sp                                ? MoeMode::kSequenceParallel
                : (in.sp_requested && in.tp_above_one) ? MoeMode::kChunked
                                                       : MoeMode::kReplicated;
  lp.input_layout = lp.sp ? incoming : Layout::kFull;
  lp.output_layout = lp.sp ? Layout::kShard : Layout::kFull;
  return lp;
}

namespace {

void check_divides(int tp, int64_t value, const char* what) {
  if (value % tp != 0) fail_input("tp = {} does not divide {} = {}", tp, what, value);
}

std::vector<int64_t> stage_sizes(const model::ModelConfig& config, const ParallelOptions& o) {
  const int64_t layers = config.num_hidden_layers;
  if (o.pp > layers) fail_input("pp = {} stages but the model has only {} layers", o.pp, layers);
  if (!o.pp_layers.empty()) {
    if (static_cast<int>(o.pp_layers.size()) != o.pp)
      fail_input("--pp-layers lists {} stages but pp = {}", o.pp_layers.size(), o.pp);
    for (int64_t n : o.pp_layers)
      if (n < 1) fail_input("--pp-layers: every stage needs at least one layer, got {}", n);
    const int64_t sum = std::accumulate(o.pp_layers.begin(), o.pp_layers.end(), int64_t{0});
    if (sum != layers)
      fail_input("--pp-layers sums to {} layers but the model has {}", sum, layers);
    return o.pp_layers;
  }
  std::vector<int64_t> sizes(static_cast<size_t>(o.pp), layers / o.pp);
  for (int64_t s = 0; s < layers % o.pp; ++s) ++sizes[static_cast<size_t>(s)];
  return sizes;
}

}  // namespace

Plan make_plan(const model::ModelConfig& config, const ParallelOptions& o) {
  if (o.tp < 1 || o.pp < 1) fail_input("tp ({}) and pp ({}) must be >= 1", o.tp, o.pp);
  check_divides(o.tp, config.num_attention_heads, "num_attention_heads");
  bool any_moe = false, any_dense = false;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    (config.is_moe_layer(l) ? any_moe : any_dense) = true;
  if (any_dense) check_divides(o.tp, config.intermediate_size, "intermediate_size");
  if (any_moe) {
    check_divides(o.tp, config.n_routed_experts, "n_routed_experts");
    if (config.n_shared_experts > 0)
      check_divides(o.tp, config.moe_intermediate_size * config.n_shared_experts,
                    "the shared experts' width (moe_intermediate_size * n_shared_experts)");
  }
  Plan plan;
  plan.options = o;
  const GateInputs inputs = gate_inputs(config, o);
  plan.gate = evaluate_gate(inputs);
  const std::vector<int64_t> sizes = stage_sizes(config, o);
  const bool shard_contract = o.boundary == BoundaryContract::kShard && o.pp > 1 && o.tp > 1;
  int64_t first = 0;
  for (int s = 0; s < o.pp; ++s) {
    StagePlan stage;
    stage.stage = s;
    stage.first_layer = first;
    stage.end_layer = first + sizes[static_cast<size_t>(s)];
    first = stage.end_layer;
    stage.entry_layout = s > 0 && shard_contract ? Layout::kShard : Layout::kFull;
    Layout layout = stage.entry_layout;
    for (int64_t l = stage.first_layer; l < stage.end_layer; ++l) {
      const LayerPlan lp = plan_layer(plan.gate, inputs, l, config.is_moe_layer(l), layout);
      layout = lp.output_layout;
      stage.layers.push_back(lp);
    }
    if (s + 1 < o.pp) {
      stage.exit_contract = o.boundary;
      stage.exit_layout = shard_contract ? Layout::kShard : Layout::kFull;
    } else {
      stage.exit_layout = Layout::kFull;  // the last stage restores full rows before the norm
    }
    plan.stages.push_back(std::move(stage));
  }
  return plan;
}

int64_t pp_intermediate_token_count(const Plan& plan, int64_t n) {
  const bool shard = plan.options.boundary == BoundaryContract::kShard && plan.options.pp > 1 &&
                     plan.options.tp > 1;
  return shard ? (n + plan.options.tp - 1) / plan.options.tp : n;
}

}  // namespace handoff::parallel
