#pragma once
// Turns checkpoint tensors into module weights: linear weights repacked for the kernels in the
// compute dtype, everything else (norms, router, biases) in f32.
#include <string>
#include <vector>

#include "handoff/model/checkpoint.h"
#include "handoff/model/load_progress.h"
#include "handoff/ops/linear.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

class WeightLoader {
 public:
  // `progress` (optional) advances by each loaded tensor's stored bytes; `row_independent`
  // makes every linear weight batch-invariant (ops::LinearWeight).
  WeightLoader(const Checkpoint& checkpoint, tensor::DType dtype, LoadProgress* progress = nullptr,
               bool row_independent = false)
      : checkpoint_(checkpoint),
        dtype_(dtype),
        progress_(progress),
        row_independent_(row_independent) {}

  tensor::DType dtype() const { return dtype_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }

  ops::LinearWeight linear(const std::string& name, const tensor::Shape& shape) const {
    return make_linear(load(name, shape, load_dtype()), dtype_);
  }
  // Always f32, whatever the compute dtype (the router runs in fp32, MODEL_SPEC §3).
  ops::LinearWeight linear_f32(const std::string& name, const tensor::Shape& shape) const {
    return make_linear(load(name, shape, tensor::DType::kF32), tensor::DType::kF32);
  }
  // Every linear weight of the model is built here, so they all share the run's options.
  ops::LinearWeight make_linear(const tensor::Tensor& w, tensor::DType dtype) const {
    return ops::LinearWeight(w, dtype, row_independent_);
  }
  ops::LinearWeight make_linear(const tensor::Tensor& w) const { return make_linear(w, dtype_); }
  // Row-stacked parts packed as one weight (e.g. a fused gate/up projection).
  ops::LinearWeight make_linear(const std::vector<tensor::Tensor>& parts) const {
    return ops::LinearWeight(parts, dtype_, row_independent_);
  }
  tensor::Tensor f32(const std::string& name, const tensor::Shape& shape) const {
    return load(name, shape, tensor::DType::kF32);
  }
  // The tensor in the dtype linear weights are built from (no extra rounding for f32 runs).
  tensor::Tensor matrix(const std::string& name, const tensor::Shape& shape) const {
    return load(name, shape, load_dtype());
  }
  tensor::Tensor load(const std::string& name, const tensor::Shape& shape,
                      tensor::DType dtype) const {
    tensor::Tensor t = checkpoint_.load(name, shape, dtype);
    if (progress_ != nullptr) progress_->advance(checkpoint_.stored_bytes(name));
    return t;
  }

 private:
  tensor::DType load_dtype() const {
    return dtype_ == tensor::DType::kF32 ? tensor::DType::kF32 : tensor::DType::kBF16;
  }
  const Checkpoint& checkpoint_;
  tensor::DType dtype_;
  LoadProgress* progress_;
  bool row_independent_;
};

}  // namespace handoff::model
