#pragma once
// The parallel plan: a pure function from (model config, tp, pp, sp, policy, boundary) to what
// every stage and layer does — which layers run sequence parallelism (the gate), who reduces
// o_proj, the layout of every layer input/output and stage boundary. It is computed before any
// layer is built; layers are constructed from it and nothing flips afterwards.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "handoff/model/config.h"

namespace handoff::parallel {

enum class SpPolicy { kKeep, kGuard };
enum class BoundaryContract { kFull, kShard };
// Full{n}: every tp rank holds all n token rows. Shard{n, tp}: rank r holds rows
// [r*s, (r+1)*s) of the n rows padded with zero rows to tp*s, s = ceil(n / tp).
enum class Layout { kFull, kShard };

enum class MoeMode {
  kDense,            // not a MoE layer: tensor-parallel SwiGLU MLP, all-reduce
  kReplicated,       // full tokens on every rank, local experts + shared slice, one all-reduce
  kChunked,          // upstream guard: local chunk, expert parallel on it, all-gather back
  kSequenceParallel  // tokens stay sharded: all-gather in, local experts, reduce-scatter out
};

std::string_view policy_name(SpPolicy p);
std::string_view contract_name(BoundaryContract c);
std::string_view layout_name(Layout l);
std::string_view moe_mode_name(MoeMode m);

struct ParallelOptions {
  int tp = 1;
  int pp = 1;
  bool sp = false;  // sequence parallelism requested (--sp on)
  SpPolicy policy = SpPolicy::kKeep;
  BoundaryContract boundary = BoundaryContract::kFull;
  std::vector<int64_t> pp_layers;  // layers per stage; empty: even split
};

struct GateCondition {
  std::string name;
  bool pass = false;
  std::string reason;
};

struct Gate {
  bool sp_inside_stages = false;  // all five conditions hold
  std::vector<GateCondition> conditions;
};

// The five facts the gate decides on (ARCHITECTURE.md, "The gate"), in order.
struct GateInputs {
  bool pp_policy_keeps_sp = false;  // pp = 1, or policy keep
  bool family_has_sp_decoder = false;
  bool moe_layer_freq_is_one = false;
  bool sp_requested = false;
  bool tp_above_one = false;
};

GateInputs gate_inputs(const model::ModelConfig& config, const ParallelOptions& options);
Gate evaluate_gate(const GateInputs& inputs);
// Whether a family's decoder layer has the MLA + MoE shell SP needs.
bool family_has_sp_decoder(model::Family family);

struct LayerPlan;
// One layer's flags from the gate: SP exactly when the gate is open and the layer is MoE (+MLA,
// which every layer of these families is).
LayerPlan plan_layer(const Gate& gate, const GateInputs& inputs, int64_t index, bool moe,
                     Layout incoming);

struct LayerPlan {
  int64_t index = 0;
  bool moe = false;
  bool sp = false;             // runs the FlashComm1 shell: sharded hidden/residual
  bool o_proj_reduce = false;  // o_proj all-reduces its output itself
  MoeMode moe_mode = MoeMode::kDense;
  Layout input_layout = Layout::kFull;
  Layout output_layout = Layout::kFull;
};

struct StagePlan {
  int stage = 0;
  int64_t first_layer = 0;
  int64_t end_layer = 0;
  Layout entry_layout = Layout::kFull;  // what the stage receives (or embeds)
  std::vector<LayerPlan> layers;
  // The contract of the hand-off to the next stage; empty on the last stage.
  std::optional<BoundaryContract> exit_contract;
  Layout exit_layout = Layout::kFull;  // what leaves the stage (sent, or fed to the final norm)
};

struct Plan {
  ParallelOptions options;
  Gate gate;
  std::vector<StagePlan> stages;
  bool sp_requested_but_inactive() const { return options.sp && !gate.sp_inside_stages; }
};

// Throws InputError naming the problem for layouts that cannot run: tp not dividing heads,
// experts or FFN widths, more stages than layers, a bad --pp-layers list, ...
Plan make_plan(const model::ModelConfig& config, const ParallelOptions& options);

// Rows of the intermediate {hidden, residual} tensors crossing a stage boundary for a step of
// n tokens: n under the full contract or without SP, ceil(n / tp) under the shard contract.
// Receive slicing, the profiling pass and buffer sizing all use this and nothing else.
int64_t pp_intermediate_token_count(const Plan& plan, int64_t n);

// Rows each rank holds for `layout` with n tokens.
int64_t layout_rows(Layout layout, int64_t n, int tp);

}  // namespace handoff::parallel
