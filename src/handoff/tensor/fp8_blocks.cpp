#include "handoff/tensor/fp8_blocks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "handoff/error.h"
#include "handoff/tensor/thread_pool.h"

namespace handoff::tensor {

float Fp8Blocks::scale(int64_t r, int64_t c) const {
  const float* s = scales.data<float>();
  return s[((row0 + r) / block_rows) * scales.strides()[0] +
           ((col0 + c) / block_cols) * scales.strides()[1]];
}

Fp8Blocks Fp8Blocks::slice(int64_t d, int64_t begin, int64_t end) const {
  if (d != 0 && d != 1) fail("Fp8Blocks::slice: dimension {} of a matrix", d);
  Fp8Blocks out = *this;
  out.values = values.slice(d, begin, end);
  (d == 0 ? out.row0 : out.col0) += begin;
  return out;
}

Fp8Blocks Fp8Blocks::transposed() const {
  Fp8Blocks out;
  out.block_rows = block_cols;
  out.block_cols = block_rows;
  out.row0 = col0;
  out.col0 = row0;
  const int64_t r = rows(), c = cols();
  out.values = Tensor::empty({c, r}, DType::kF8E4M3);
  const auto* src = values.data<uint8_t>();
  auto* dst = out.values.data<uint8_t>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      dst[j * r + i] = src[i * values.strides()[0] + j * values.strides()[1]];
  const int64_t gr = scales.size(0), gc = scales.size(1);
  out.scales = Tensor::empty({gc, gr}, DType::kF32);
  for (int64_t i = 0; i < gr; ++i)
    for (int64_t j = 0; j < gc; ++j)
      out.scales.data<float>()[j * gr + i] =
          scales.data<float>()[i * scales.strides()[0] + j * scales.strides()[1]];
  return out;
}

void Fp8Blocks::dequantize_row(int64_t r, float* out) const {
  const auto* q = values.data<uint8_t>() + r * values.strides()[0];
  const int64_t cs = values.strides()[1];
  for (int64_t c = 0; c < cols(); ++c) out[c] = f8e4m3_to_f32(q[c * cs]) * scale(r, c);
}

Tensor Fp8Blocks::dequantize() const {
  Tensor w = Tensor::empty({rows(), cols()}, DType::kF32);
  float* out = w.data<float>();
  const int64_t n = cols();
  parallel_for(rows(), 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) dequantize_row(r, out + r * n);
  });
  return w;
}

Fp8Blocks quantize_fp8_blocks(const Tensor& w, int64_t block_rows, int64_t block_cols) {
  if (w.dim() != 2) fail("quantize_fp8_blocks: a matrix is required, got {}", shape_str(w.shape()));
  if (block_rows <= 0 || block_cols <= 0)
    fail("quantize_fp8_blocks: block {}x{} is empty", block_rows, block_cols);
  const int64_t rows = w.size(0), cols = w.size(1);
  const int64_t grid_r = (rows + block_rows - 1) / block_rows;
  const int64_t grid_c = (cols + block_cols - 1) / block_cols;
  Fp8Blocks q;
  q.block_rows = block_rows;
  q.block_cols = block_cols;
  q.values = Tensor::empty({rows, cols}, DType::kF8E4M3);
  q.scales = Tensor::empty({grid_r, grid_c}, DType::kF32);
  const size_t esize = dtype_size(w.dtype());
  parallel_for(grid_r, 1, [&](int64_t g0, int64_t g1) {
    std::vector<float> block(static_cast<size_t>(block_rows * cols));
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t r0 = g * block_rows, r1 = std::min(rows, r0 + block_rows);
      for (int64_t r = r0; r < r1; ++r) {
        const auto* src = static_cast<const uint8_t*>(w.raw()) + r * w.strides()[0] * esize;
        float* dst = block.data() + (r - r0) * cols;
        if (w.strides()[1] == 1) {
          convert_to_f32(w.dtype(), src, dst, static_cast<size_t>(cols));
        } else {
          for (int64_t c = 0; c < cols; ++c)
            convert_to_f32(w.dtype(), src + c * w.strides()[1] * esize, dst + c, 1);
        }
      }
      for (int64_t b = 0; b < grid_c; ++b) {
        const int64_t c0 = b * block_cols, c1 = std::min(cols, c0 + block_cols);
        float amax = 0;
        for (int64_t r = r0; r < r1; ++r) {
          const float* x = block.data() + (r - r0) * cols;
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[c]));
        }
        // NaN propagates into the values (e4m3 NaN), which the load-time scan reports.
        const float scale = amax > 0 ? amax / kF8E4M3Max : 1.0f;
        q.scales.data<float>()[g * grid_c + b] = scale;
        for (int64_t r = r0; r < r1; ++r) {
          const float* x = block.data() + (r - r0) * cols;
          uint8_t* codes = q.values.data<uint8_t>() + r * cols;
          for (int64_t c = c0; c < c1; ++c) codes[c] = f32_to_f8e4m3(x[c] / scale);
        }
      }
    }
  });
  return q;
}

}  // namespace handoff::tensor
