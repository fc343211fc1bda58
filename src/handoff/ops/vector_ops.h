#pragma once
// Row-wise kernels on f32 activations. Each has a naive twin in ops/reference/ and a unit
// test against it on shapes that are not multiples of the vector width.
#include <cstdint>

namespace handoff::ops {

// out[r] = w ⊙ x[r] / sqrt(mean(x[r]²) + eps); rows are `dim` apart. out may alias x.
void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* out);
// residual[r] += x[r]; out[r] = rms_norm(residual[r]). The residual add is fused into the norm.
void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t dim, float* out);
// Standard LayerNorm with weight and bias. out may alias x.
void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t rows,
                int64_t dim, float* out);
// Rotates the first `rot_dim` values of each of `heads` vectors (head_stride floats apart) in
// place. cos/sin hold rot_dim/2 values for this token's position. interleaved: pairs (2i, 2i+1);
// otherwise half-split pairs (i, i + rot_dim/2).
void rope(float* x, int64_t heads, int64_t head_stride, int64_t rot_dim, const float* cos,
          const float* sin, bool interleaved);
// In-place numerically stable softmax over n values.
void softmax(float* x, int64_t n);
// x[i] = exp(x[i] - shift), returning the sum of the new values: a step of an online softmax.
float exp_sum(float* x, int64_t n, float shift);
// x[i] *= scale, returning the largest new value (NaNs are passed over; -inf if all are NaN).
// The other step of an online softmax: a tile's scaled scores and their maximum.
float scale_max(float* x, int64_t n, float scale);
// The first index of the largest value of x[0..n), NaNs passed over (0 when all are NaN);
// n >= 1. Greedy sampling over a vocabulary's logits.
int64_t argmax(const float* x, int64_t n);
// out[i] = silu(gate[i]) * up[i].
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
// Indices of the k largest values of x[0..n), in descending value order (k <= n).
void topk(const float* x, int64_t n, int64_t k, int32_t* out_idx);
// The same set as topk (ties to the lower index, NaN below every number), as indices in
// ascending order, in O(n): a threshold select on order-preserving integer keys, no sort.
void topk_ascending(const float* x, int64_t n, int64_t k, int32_t* out_idx);
// dst[i] = bf16 value src[i] as f32 (the cache's bf16 rows on their way into the GEMMs).
void widen_bf16(const uint16_t* src, float* dst, int64_t n);
float dot(const float* a, const float* b, int64_t n);
// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace handoff::ops
