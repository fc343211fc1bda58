#include "handoff/parallel/plan_json.h"

#include <map>
#include <string>

#include "handoff/parallel/comm_prediction.h"
#include "handoff/parallel/scopes.h"

namespace handoff::parallel {
namespace {

using nlohmann::json;

json layer_json(const LayerPlan& lp) {
  return {{"index", lp.index},
          {"kind", lp.moe ? "moe" : "dense"},
          {"sp", lp.sp},
          {"o_proj_reduce", lp.o_proj_reduce},
          {"moe_mode", moe_mode_name(lp.moe_mode)},
          {"input_layout", layout_name(lp.input_layout)},
          {"output_layout", layout_name(lp.output_layout)},
          {"collectives", json::array()}};
}

json gate_json(const Gate& gate) {
  json conditions = json::array();
  for (const auto& c : gate.conditions)
    conditions.push_back({{"name", c.name}, {"pass", c.pass}, {"reason", c.reason}});
  return {{"sp_inside_stages", gate.sp_inside_stages}, {"conditions", conditions}};
}

// The skeleton both outputs share; collectives are filled in by the caller per scope.
json skeleton(const Plan& plan) {
  json out;
  const auto& o = plan.options;
  out["parallel"] = {{"tp", o.tp},
                     {"pp", o.pp},
                     {"sp", o.sp},
                     {"pp_sp_policy", policy_name(o.policy)},
                     {"pp_boundary", contract_name(o.boundary)}};
  out["gate"] = gate_json(plan.gate);
  if (plan.sp_requested_but_inactive())
    out["warning"] = "sequence parallelism is requested but inactive: a gate condition fails";
  out["stages"] = json::array();
  for (const StagePlan& st : plan.stages) {
    json stage = {
        {"stage", st.stage},
        {"first_layer", st.first_layer},
        {"end_layer", st.end_layer},
        {"entry", {{"layout", layout_name(st.entry_layout)}, {"collectives", json::array()}}},
        {"layers", json::array()}};
    for (const LayerPlan& lp : st.layers) stage["layers"].push_back(layer_json(lp));
    stage["exit"] = {
        {"contract", st.exit_contract ? json(contract_name(*st.exit_contract)) : json(nullptr)},
        {"layout", layout_name(st.exit_layout)},
        {"collectives", json::array()}};
    if (st.stage + 1 == o.pp) stage["head"] = {{"collectives", json::array()}};
    out["stages"].push_back(stage);
  }
  return out;
}

// Where a scope's collectives go in the JSON of `stage`.
json* slot_for(json& stage, const std::string& scope, int stage_index) {
  if (scope == embed_scope() || scope == stage_entry_scope(stage_index))
    return &stage["entry"]["collectives"];
  if (scope == stage_exit_scope(stage_index)) return &stage["exit"]["collectives"];
  if (scope == head_scope() && stage.contains("head")) return &stage["head"]["collectives"];
  for (auto& layer : stage["layers"])
    if (scope == layer_scope(layer["index"].get<int64_t>())) return &layer["collectives"];
  return nullptr;
}

void add_totals(json& out, const std::map<std::string, std::pair<int64_t, int64_t>>& per_op) {
  json totals = json::object();
  int64_t calls = 0, bytes = 0;
  for (const auto& [op, cb] : per_op) {
    totals[op] = {{"calls", cb.first}, {"bytes", cb.second}};
    calls += cb.first;
    bytes += cb.second;
  }
  totals["all"] = {{"calls", calls}, {"bytes", bytes}};
  out["totals"] = totals;
}

}  // namespace

json plan_to_json(const Plan& plan, const model::ModelConfig& config, int64_t n,
                  int64_t logit_rows) {
  json out = skeleton(plan);
  out["tokens"] = n;
  out["pp_intermediate_token_count"] = pp_intermediate_token_count(plan, n);
  std::map<std::string, std::pair<int64_t, int64_t>> per_op;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    for (const PlannedCall& c : predict_step(plan, config, static_cast<int>(s), n, logit_rows)) {
      if (json* slot = slot_for(out["stages"][s], c.scope, static_cast<int>(s)))
        slot->push_back({{"op", comm::op_name(c.op)},
                         {"group", comm::group_name(c.group)},
                         {"bytes", c.bytes}});
      auto& t = per_op[std::string(comm::op_name(c.op))];
      t.first += 1;
      t.second += c.bytes;
    }
  }
  add_totals(out, per_op);
  out["totals_note"] = "per step, summed over the first tp rank of every stage";
  return out;
}

json report_to_json(const Plan& plan, const std::vector<comm::CommCounts>& per_stage) {
  json out = skeleton(plan);
  std::map<std::string, std::pair<int64_t, int64_t>> per_op;
  for (size_t s = 0; s < plan.stages.size() && s < per_stage.size(); ++s) {
    json other = json::array();
    for (const auto& [key, stats] : per_stage[s]) {
      const auto& [scope, op, group] = key;
      json entry = {{"op", comm::op_name(op)},
                    {"group", comm::group_name(group)},
                    {"calls", stats.calls},
                    {"bytes", stats.bytes}};
      if (json* slot = slot_for(out["stages"][s], scope, static_cast<int>(s))) {
        slot->push_back(entry);
      } else {
        entry["scope"] = scope;
        other.push_back(entry);
      }
      auto& t = per_op[std::string(comm::op_name(op))];
      t.first += stats.calls;
      t.second += stats.bytes;
    }
    out["stages"][s]["other"] = other;
  }
  add_totals(out, per_op);
  return out;
}

}  // namespace handoff::parallel
