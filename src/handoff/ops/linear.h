#pragma once
// y = x · Wᵀ for a weight W[N, K] stored f32 or bf16, repacked once at load into the layout the
// kernels want. Small M (decode) runs hand-written AVX-512 kernels that stream each weight
// once for all M rows; large M (prefill) goes to oneDNN. Activations are f32 in and out;
// accumulation is f32.
#include <cstdint>
#include <memory>
#include <vector>

#include "handoff/tensor/tensor.h"

namespace handoff::ops {

class LinearWeight {
 public:
  LinearWeight();
  // `w` is a 2-d [N, K] tensor of any float dtype (may be a strided row/column view); it is
  // copied and converted to `dtype` (kF32 or kBF16).
  // Batch invariance: with `row_independent`, forward() computes each row of x alone through
  // the M = 1 kernel, so a row's result never depends on how many rows share the call (the
  // small-M kernels pick accumulator splits and K chunks by M, and oneDNN blocks by M). Slower
  // for prefill; the serving engine asks for it at --dtype f32 (model::LoadOptions).
  LinearWeight(const tensor::Tensor& w, tensor::DType dtype, bool row_independent = false);
  // W = the row-wise concatenation of `parts` (each [N_i, K], same K), packed straight from the
  // parts (fused gate/up projections without an intermediate copy).
  LinearWeight(const std::vector<tensor::Tensor>& parts, tensor::DType dtype,
               bool row_independent = false);
  ~LinearWeight();
  LinearWeight(LinearWeight&&) noexcept;
  LinearWeight& operator=(LinearWeight&&) noexcept;

  bool defined() const { return n_ > 0; }
  int64_t out_features() const { return n_; }
  int64_t in_features() const { return k_; }
  tensor::DType dtype() const { return dtype_; }
  size_t weight_bytes() const;

  // y[m, :] = x[m, :] · Wᵀ for m in [0, M). Rows of x are `ldx` floats apart (default K),
  // rows of y `ldy` apart (default N). Uses the process thread pool.
  void forward(const float* x, int64_t m, float* y, int64_t ldx = -1, int64_t ldy = -1) const;

  // True when forward() with M = m runs the hand-written small-M kernels. Called inside a
  // parallel region those run on the calling thread alone, so a caller with many small
  // products (per-head or per-expert weights) may run them as one region across the weights.
  // Large M goes to oneDNN, whose primitives split work for the thread count they were built
  // for and so must not be called from inside a region.
  bool small_m(int64_t m) const;

 private:
  struct Impl;
  int64_t n_ = 0;
  int64_t k_ = 0;
  tensor::DType dtype_ = tensor::DType::kF32;
  bool row_independent_ = false;
  std::unique_ptr<Impl> impl_;
};

}  // namespace handoff::ops
