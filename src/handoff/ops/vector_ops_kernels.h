#pragma once
// Internal: the ISA-specific bodies behind vector_ops.h. vector_ops.cpp picks the table of the
// level kernel_isa() names (cpu_features.h) at each call: the portable versions (compiled for
// the baseline ISA), the AVX2 + FMA ones or the AVX-512 ones.
#include <cstdint>

namespace handoff::ops {

struct VectorKernels {
  float (*dot)(const float* a, const float* b, int64_t n);
  // y += a * x
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  // Sum of squares of x[0..n), f32 lanes.
  float (*sum_squares)(const float* x, int64_t n);
  // out = w * x * scale.
  void (*scale_mul)(const float* x, const float* w, float scale, float* out, int64_t n);
  // residual += x, returning the sum of squares of the new residual.
  float (*add_sum_squares)(float* residual, const float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  // In place; n >= 1.
  void (*softmax)(float* x, int64_t n);
  // x = exp(x - shift) in place, returning the sum.
  float (*exp_sum)(float* x, int64_t n, float shift);
  // x *= scale in place, returning the largest new value, NaNs passed over; n >= 1.
  float (*scale_max)(float* x, int64_t n, float scale);
  // dst[i] = the bf16 bits src[i] widened to f32 (exact: a 16-bit shift).
  void (*widen_bf16)(const uint16_t* src, float* dst, int64_t n);
  // The first index of the largest value, NaNs passed over (0 when all are NaN); n >= 1.
  int64_t (*argmax)(const float* x, int64_t n);
};

namespace avx512 {
extern const VectorKernels kVectorKernels;
}  // namespace avx512
namespace avx2 {
extern const VectorKernels kVectorKernels;
}  // namespace avx2

}  // namespace handoff::ops
