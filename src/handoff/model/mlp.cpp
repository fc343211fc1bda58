#include "handoff/model/mlp.h"

#include "handoff/ops/vector_ops.h"

namespace handoff::model {

using tensor::DType;
using tensor::Tensor;

Mlp::Mlp(const WeightLoader& weights, const std::string& prefix, int64_t hidden,
         int64_t intermediate, int64_t inter_begin, int64_t inter_count)
    : hidden_(hidden), inter_(inter_count < 0 ? intermediate : inter_count) {
  const int64_t end = inter_begin + inter_;
  const ops::LinearSource gate = weights.matrix_slice(prefix + "gate_proj.weight",
                                                      {intermediate, hidden}, 0, inter_begin, end);
  const ops::LinearSource up =
      weights.matrix_slice(prefix + "up_proj.weight", {intermediate, hidden}, 0, inter_begin, end);
  const ops::LinearSource down = weights.matrix_slice(prefix + "down_proj.weight",
                                                      {hidden, intermediate}, 1, inter_begin, end);
  gate_up_ = weights.make_linear({gate, up});
  down_ = weights.make_linear(down);
}

void Mlp::forward(const float* x, int64_t rows, float* out, float* scratch) const {
  float* gu = scratch;                       // [rows, 2 * inter]
  float* act = scratch + rows * 2 * inter_;  // [rows, inter]
  gate_up_.forward(x, rows, gu);
  activate(gu, rows, act);
  down_.forward(act, rows, out);
}

void Mlp::activate(const float* gu, int64_t rows, float* act) const {
  for (int64_t r = 0; r < rows; ++r)
    ops::silu_mul(gu + r * 2 * inter_, gu + r * 2 * inter_ + inter_, act + r * inter_, inter_);
}

}  // namespace handoff::model
