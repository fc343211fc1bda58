#pragma once
// Naive scalar twins of the ops kernels. They favour obviousness over speed and accumulate in
// double, so the unit tests can hold the fast kernels to tight tolerances.
#include <cstdint>

#include "handoff/tensor/tensor.h"

namespace handoff::ops::reference {

// y[m, n] = sum_k x[m, k] * w[n, k] for a 2-d [N, K] weight of any float dtype and any strides.
void linear(const float* x, int64_t m, int64_t k, const tensor::Tensor& w, float* y, int64_t ldx,
            int64_t ldy);
void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* out);
void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t dim, float* out);
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t rows,
                int64_t dim, float* out);
void rope(float* x, int64_t heads, int64_t head_stride, int64_t rot_dim, const float* cos,
          const float* sin, bool interleaved);
void softmax(float* x, int64_t n);
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// Descending value, ties by lower index, like ops::topk.
void topk(const float* x, int64_t n, int64_t k, int32_t* out_idx);
float dot(const float* a, const float* b, int64_t n);
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace handoff::ops::reference
