#pragma once
// SwiGLU feed-forward: down(silu(gate(x)) ⊙ up(x)). gate and up are fused into one weight so a
// step reads them in one pass. Used for dense layers, routed experts and shared experts.
#include <cstdint>
#include <string>

#include "handoff/model/scratch.h"
#include "handoff/model/weight_loader.h"
#include "handoff/ops/linear.h"

namespace handoff::model {

class Mlp {
 public:
  Mlp() = default;
  // Loads `<prefix>{gate,up,down}_proj.weight`; keeps intermediate columns
  // [inter_begin, inter_begin + inter_count) (all when inter_count < 0).
  Mlp(const WeightLoader& weights, const std::string& prefix, int64_t hidden, int64_t intermediate,
      int64_t inter_begin = 0, int64_t inter_count = -1);

  int64_t intermediate() const { return inter_; }
  // Whether forward() over `rows` rows stays on the small-M kernels (ops::LinearWeight::small_m).
  bool small_m(int64_t rows) const { return gate_up_.small_m(rows) && down_.small_m(rows); }
  size_t weight_bytes() const { return gate_up_.weight_bytes() + down_.weight_bytes(); }
  // out[m] = MLP(x[m]) for m in [0, rows); `scratch` must hold rows * 3 * intermediate floats.
  void forward(const float* x, int64_t rows, float* out, float* scratch) const;
  // forward()'s parts, for callers that share one MLP's blocks among threads (the decode MoE):
  // gate_up() writes rows of [gate | up] (2 * intermediate), activate() turns them into the
  // down projection's input, as forward() does.
  const ops::LinearWeight& gate_up() const { return gate_up_; }
  const ops::LinearWeight& down() const { return down_; }
  void activate(const float* gate_up_rows, int64_t rows, float* act) const;

 private:
  int64_t hidden_ = 0, inter_ = 0;
  ops::LinearWeight gate_up_, down_;
};

}  // namespace handoff::model
