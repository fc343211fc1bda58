#pragma once
// Finds NaN / Inf in float tensors: one bandwidth-bound pass on the thread pool, testing the
// exponent bits of the stored format (no conversion), so a checkpoint can be checked at load.
#include <cstdint>
#include <optional>

#include "handoff/tensor/tensor.h"

namespace handoff::tensor {

// The index (row-major) of the first NaN or infinite element, or nullopt when all are finite.
// Integer tensors hold no such values (nullopt). Works on any alignment.
std::optional<int64_t> first_non_finite(const Tensor& t);
// The same over `n` contiguous elements of `dtype` at `data` (a row of logits, say).
std::optional<int64_t> first_non_finite(DType dtype, const void* data, int64_t n);

}  // namespace handoff::tensor
