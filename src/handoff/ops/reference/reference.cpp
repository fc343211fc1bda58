#include "handoff/ops/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "handoff/error.h"

namespace handoff::ops::reference {

namespace {

// One element of a strided 2-d float tensor as f32.
float element(const tensor::Tensor& w, int64_t r, int64_t c) {
  const int64_t offset = r * w.strides()[0] + c * w.strides()[1];
  const auto* base = static_cast<const uint8_t*>(w.raw());
  const size_t size = tensor::dtype_size(w.dtype());
  float v;
  tensor::convert_to_f32(w.dtype(), base + offset * static_cast<int64_t>(size), &v, 1);
  return v;
}

}  // namespace

void linear(const float* x, int64_t m, int64_t k, const tensor::Tensor& w, float* y, int64_t ldx,
            int64_t ldy) {
  if (w.dim() != 2 || w.size(1) != k) fail("reference::linear: weight must be [N, {}]", k);
  const int64_t n = w.size(0);
  std::vector<float> wf(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) wf[r * k + c] = element(w, r, c);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < k; ++c) acc += double(x[i * ldx + c]) * wf[r * k + c];
      y[i * ldy + r] = static_cast<float>(acc);
    }
}

void rms_norm(const float* x, const float* w, float eps, int64_t rows, int64_t dim, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / dim + eps);
    for (int64_t i = 0; i < dim; ++i) out[r * dim + i] = static_cast<float>(w[i] * (xr[i] * inv));
  }
}

void add_rms_norm(float* residual, const float* x, const float* w, float eps, int64_t rows,
                  int64_t dim, float* out) {
  for (int64_t i = 0; i < rows * dim; ++i) residual[i] += x[i];
  rms_norm(residual, w, eps, rows, dim, out);
}

void layer_norm(const float* x, const float* w, const float* b, float eps, int64_t rows,
                int64_t dim, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double mean = 0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < dim; ++i)
      out[r * dim + i] = static_cast<float>((xr[i] - mean) * inv * w[i] + b[i]);
  }
}

void rope(float* x, int64_t heads, int64_t head_stride, int64_t rot_dim, const float* cos,
          const float* sin, bool interleaved) {
  const int64_t half = rot_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = interleaved ? 2 * i : i;
      const int64_t b = interleaved ? 2 * i + 1 : i + half;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>(x0 * cos[i] - x1 * sin[i]);
      v[b] = static_cast<float>(x0 * sin[i] + x1 * cos[i]);
    }
  }
}

void softmax(float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(double(x[i]) - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::exp(double(x[i]) - mx) / sum);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void topk(const float* x, int64_t n, int64_t k, int32_t* out_idx) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
  std::copy(idx.begin(), idx.begin() + k, out_idx);
}

float dot(const float* a, const float* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += double(a[i]) * b[i];
  return static_cast<float>(acc);
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(double(y[i]) + double(a) * x[i]);
}

}  // namespace handoff::ops::reference
