#pragma once
// DeepSeekMoE (MODEL_SPEC §3): an fp32 sigmoid router with group-limited top-k selection
// (e_score_correction_bias for selection only), routed experts weighted by the normalised,
// scaled scores, plus shared experts. Tokens are grouped per expert so each expert's weights
// are read once per step.
#include <cstdint>
#include <string>
#include <vector>

#include "handoff/model/config.h"
#include "handoff/model/cooperative_mlps.h"
#include "handoff/model/mlp.h"
#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"
#include "handoff/ops/linear.h"

namespace handoff::model {

// The routed experts this rank holds, [begin, begin + count).
struct ExpertRange {
  int64_t begin = 0;
  int64_t count = 0;
};

struct Routing {
  std::vector<int32_t> experts;  // [rows, top_k]
  std::vector<float> weights;    // [rows, top_k]
};

class Moe {
 public:
  // Holds routed experts `experts` and the shared experts' intermediate columns
  // [shared_begin, shared_begin + shared_count) (tensor parallelism splits them; -1: all).
  // `scratch` is shared with every layer's Moe.
  Moe(const ModelConfig& config, const WeightLoader& weights, int64_t layer, ExpertRange experts,
      Scratch& scratch, int64_t shared_begin = 0, int64_t shared_count = -1);

  int64_t top_k() const { return top_k_; }
  // Router only: fills `routing` for x [rows, D].
  void route(const float* x, int64_t rows, Routing& routing);
  // out[rows, D] = Σ routed experts held here + this rank's slice of the shared experts: the
  // full output when one rank holds everything, else a partial sum the caller reduces.
  void forward(const float* x, int64_t rows, const Routing& routing, float* out);
  // route() then forward(). At decode the router runs inside the experts' parallel region, on
  // one thread, while the others start on the shared expert.
  void route_and_forward(const float* x, int64_t rows, Routing& routing, float* out);

 private:
  int64_t hidden_, n_experts_, top_k_, n_group_, topk_group_;
  bool norm_topk_prob_;
  float routed_scale_;
  ExpertRange range_;
  ops::LinearWeight gate_;
  tensor::Tensor bias_;
  std::vector<Mlp> experts_;
  Mlp shared_;
  bool has_shared_ = false;
  // Whether a step of `rows` rows runs its MLPs as one CooperativeMlps region.
  bool decode_sized(int64_t rows) const;
  // Groups the rows by expert (assigned_, active_, offsets_) and copies each expert's input
  // rows into scratch 4; returns the number of (row, expert) pairs.
  int64_t group_rows(const float* x, int64_t rows, const Routing& routing);
  // team_ := the shared expert (or out zeroed when there is none); then the active experts.
  void start_team(const float* x, int64_t rows, float* out);
  void add_routed_to_team(int64_t total);
  // out += each routed expert's output times its weight.
  void add_weighted_outputs(float* out);

  std::vector<std::vector<std::pair<int32_t, float>>> assigned_;  // per local expert
  std::vector<int32_t> active_;   // local experts with rows this step, ascending
  std::vector<int64_t> offsets_;  // per active expert: its first row in the stacked buffers
  Scratch& scratch_;
  // Decode-sized steps (ops::kDecodeRowsMax rows) share their MLPs out block by block; larger
  // ones run whole experts per thread.
  CooperativeMlps team_;  // the decode step's MLPs
};

}  // namespace handoff::model
