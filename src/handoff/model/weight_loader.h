#pragma once
// Turns checkpoint tensors into module weights: linear weights repacked for the kernels in the
// compute dtype, or kept FP8 (1 byte per weight + block scales) when the checkpoint stores them
// so or --quantize fp8 asked for it; the router and the indexer's head weights as fp32-math
// weights (linear_fp32_math); norms and biases in f32.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "handoff/error.h"
#include "handoff/model/checkpoint.h"
#include "handoff/model/load_progress.h"
#include "handoff/ops/linear.h"
#include "handoff/tensor/finite_scan.h"
#include "handoff/tensor/tensor.h"

namespace handoff::model {

struct WeightLoaderOptions {
  LoadProgress* progress = nullptr;  // advances by each loaded tensor's stored bytes
  bool row_independent = false;      // every linear weight batch-invariant (ops::LinearWeight)
  // How bf16 / FP8 weights take their activations (ops::ActivationPrecision).
  ops::ActivationPrecision activations = ops::ActivationPrecision::kExact;
  // Scan every loaded tensor for NaN / Inf (InputError naming file and tensor): one NaN in a
  // norm weight turns every logit into NaN, and greedy decoding then emits token 0 forever.
  bool check_finite = true;
  // Prompt chunks of at least this many tokens of one sequence, attending densely, attend per
  // head (MlaAttention), which then also holds W_UK[h]; 0: never. Row-independent runs never do.
  int64_t per_head_prefill_min_tokens = 0;
};

class WeightLoader {
 public:
  WeightLoader(const Checkpoint& checkpoint, tensor::DType dtype,
               const WeightLoaderOptions& options = {})
      : checkpoint_(checkpoint), dtype_(dtype), options_(options) {}

  tensor::DType dtype() const { return dtype_; }
  const WeightLoaderOptions& options() const { return options_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }

  ops::LinearWeight linear(const std::string& name, const tensor::Shape& shape) const {
    if (checkpoint_.is_fp8(name)) return make_linear(fp8(name, shape));
    return make_linear(load(name, shape, pack_source_dtype(name)), dtype_);
  }
  // A weight the reference multiplies in fp32 (the router, MODEL_SPEC §3; the indexer's
  // weights_proj, §5), on exact activations whatever --activations says. Stored in bf16 (as
  // the published checkpoints store both) it is held in bf16, which widens to f32 exactly: the
  // same fp32 products from half the bytes. Under --dtype f32, or stored wider, f32.
  ops::LinearWeight linear_fp32_math(const std::string& name, const tensor::Shape& shape) const {
    const tensor::DType dtype = fp32_math_dtype(name);
    return held(ops::LinearWeight(load(name, shape, dtype), dtype, options_.row_independent,
                                  ops::ActivationPrecision::kExact));
  }
  tensor::DType fp32_math_dtype(const std::string& name) const {
    const bool bf16 =
        dtype_ != tensor::DType::kF32 && checkpoint_.stored_dtype(name) == tensor::DType::kBF16;
    return bf16 ? tensor::DType::kBF16 : tensor::DType::kF32;
  }
  // Every linear weight of the model is built here, so they all share the run's options. FP8
  // sources stay FP8 unless `dtype` is given.
  ops::LinearWeight make_linear(const ops::LinearSource& w, tensor::DType dtype) const {
    return held(ops::LinearWeight(w, dtype, options_.row_independent, options_.activations));
  }
  ops::LinearWeight make_linear(const ops::LinearSource& w) const {
    return make_linear(w, w.is_fp8() ? tensor::DType::kF8E4M3 : dtype_);
  }
  // Row-stacked parts packed as one weight (e.g. a fused gate/up projection): FP8 when all are.
  ops::LinearWeight make_linear(const std::vector<ops::LinearSource>& parts) const {
    const bool all_fp8 = std::all_of(parts.begin(), parts.end(),
                                     [](const ops::LinearSource& p) { return p.is_fp8(); });
    return held(ops::LinearWeight(parts, all_fp8 ? tensor::DType::kF8E4M3 : dtype_,
                                  options_.row_independent, options_.activations));
  }
  // Bytes of the linear weights built so far: what this rank holds of the model's matrices.
  size_t linear_bytes() const { return linear_bytes_; }
  // Whether any of them is held in FP8.
  bool holds_fp8() const { return holds_fp8_; }
  tensor::Tensor f32(const std::string& name, const tensor::Shape& shape) const {
    return load(name, shape, tensor::DType::kF32);
  }
  // The tensor in the dtype linear weights are built from (no extra rounding for f32 runs).
  tensor::Tensor matrix(const std::string& name, const tensor::Shape& shape) const {
    return load(name, shape, load_dtype());
  }
  // Rows [begin, end) along `dim` of a tensor whose rest belongs to other ranks: only the slice
  // is converted and scanned, so a rank reads no more of the tensor than its part.
  // What it returns is packed by make_linear; an FP8 matrix stays FP8 (its slice keeps the whole
  // tensor's blocks).
  ops::LinearSource matrix_slice(const std::string& name, const tensor::Shape& shape, int64_t dim,
                                 int64_t begin, int64_t end) const {
    if (checkpoint_.is_fp8(name)) return fp8(name, shape).slice(dim, begin, end);
    return load_slice(name, shape, pack_source_dtype(name), dim, begin, end);
  }
  // FP8 matrix `name` whole (Checkpoint::load_fp8), its values and scales scanned.
  tensor::Fp8Blocks fp8(const std::string& name, const tensor::Shape& shape) const {
    tensor::Fp8Blocks b = checkpoint_.load_fp8(name, shape);
    if (options_.check_finite) {
      require_finite(name, b.values);
      require_finite(name + "_scale_inv", b.scales);
    }
    if (options_.progress != nullptr) options_.progress->advance(checkpoint_.stored_bytes(name));
    return b;
  }
  tensor::Tensor f32_slice(const std::string& name, const tensor::Shape& shape, int64_t dim,
                           int64_t begin, int64_t end) const {
    return load_slice(name, shape, tensor::DType::kF32, dim, begin, end);
  }
  tensor::Tensor load_slice(const std::string& name, const tensor::Shape& shape,
                            tensor::DType dtype, int64_t dim, int64_t begin, int64_t end) const {
    tensor::Tensor t = checkpoint_.load_slice(name, shape, dtype, dim, begin, end);
    if (options_.check_finite)
      require_finite(name, t.is_contiguous() ? t : t.contiguous(),
                     fmt::format(" (this rank's slice [{}, {}) of dimension {})", begin, end, dim));
    if (options_.progress != nullptr) options_.progress->advance(checkpoint_.stored_bytes(name));
    return t;
  }
  tensor::Tensor load(const std::string& name, const tensor::Shape& shape,
                      tensor::DType dtype) const {
    tensor::Tensor t = checkpoint_.load(name, shape, dtype);
    // The loaded tensor is scanned, not the stored one: an f32 value beyond bf16's range
    // becomes Inf only here.
    if (options_.check_finite) require_finite(name, t);
    if (options_.progress != nullptr) options_.progress->advance(checkpoint_.stored_bytes(name));
    return t;
  }

 private:
  // The dtype a linear weight is read in before packing: the stored one when it widens exactly
  // to the compute dtype (bf16 or f16 into f32; the packing converts row by row, so no f32 copy
  // of the tensor is made), else the one matrix() gives.
  tensor::DType pack_source_dtype(const std::string& name) const {
    const tensor::DType stored = checkpoint_.stored_dtype(name);
    const bool widens = load_dtype() == tensor::DType::kF32 &&
                        (stored == tensor::DType::kBF16 || stored == tensor::DType::kF16);
    return widens ? stored : load_dtype();
  }
  tensor::DType load_dtype() const {
    return dtype_ == tensor::DType::kF32 ? tensor::DType::kF32 : tensor::DType::kBF16;
  }
  ops::LinearWeight held(ops::LinearWeight w) const {
    linear_bytes_ += w.weight_bytes();
    holds_fp8_ = holds_fp8_ || w.dtype() == tensor::DType::kF8E4M3;
    return w;
  }
  void require_finite(const std::string& name, const tensor::Tensor& t,
                      const std::string& part = "") const {
    const std::optional<int64_t> at = tensor::first_non_finite(t);
    if (!at) return;
    float value = 0;
    tensor::convert_to_f32(t.dtype(),
                           static_cast<const uint8_t*>(t.raw()) +
                               static_cast<size_t>(*at) * tensor::dtype_size(t.dtype()),
                           &value, 1);
    fail_input(
        "{}: tensor '{}' {} holds a non-finite value ({}) at element {}{}: the checkpoint is "
        "corrupt (--no-check-weights skips this check)",
        checkpoint_.path_of(name), name, tensor::shape_str(t.shape()), value, *at, part);
  }

  const Checkpoint& checkpoint_;
  tensor::DType dtype_;
  WeightLoaderOptions options_;
  mutable size_t linear_bytes_ = 0;
  mutable bool holds_fp8_ = false;
};

}  // namespace handoff::model
