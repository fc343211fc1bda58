#pragma once
// Turns checkpoint tensors into module weights: linear weights repacked for the kernels in the
// compute dtype, everything else (norms, router, biases) in f32.
#include <string>

#include "handoff/model/checkpoint.h"
#include "handoff/model/load_progress.h"
#include "handoff/ops/linear.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

class WeightLoader {
 public:
  // `progress` (optional) advances by each loaded tensor's stored bytes.
  WeightLoader(const Checkpoint& checkpoint, tensor::DType dtype, LoadProgress* progress = nullptr)
      : checkpoint_(checkpoint), dtype_(dtype), progress_(progress) {}

  tensor::DType dtype() const { return dtype_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }

  ops::LinearWeight linear(const std::string& name, const tensor::Shape& shape) const {
    return ops::LinearWeight(load(name, shape, load_dtype()), dtype_);
  }
  // Always f32, whatever the compute dtype (the router runs in fp32, MODEL_SPEC §3).
  ops::LinearWeight linear_f32(const std::string& name, const tensor::Shape& shape) const {
    return ops::LinearWeight(load(name, shape, tensor::DType::kF32), tensor::DType::kF32);
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
};

}  // namespace handoff::model
