#pragma once
// Block-quantised FP8 matrices as DeepSeek / GLM publish them: e4m3 values and one f32
// multiplier (`weight_scale_inv`) per block of block_rows × block_cols, W[i, j] =
// fp8[i, j] · scale[i / block_rows, j / block_cols]. A view may cover part of the quantised
// matrix (a tensor-parallel slice): row0 / col0 say where it starts, so the blocks stay those of
// the whole matrix and a slice need not start on a block boundary.
#include <cstdint>

#include "handoff/tensor/tensor.h"

namespace handoff::tensor {

// The largest finite e4m3 magnitude: a block's scale maps its largest |w| onto it.
inline constexpr float kF8E4M3Max = 448.0f;

struct Fp8Blocks {
  Tensor values;  // [rows, cols] F8_E4M3, any strides
  Tensor scales;  // [ceil(R / block_rows), ceil(C / block_cols)] F32 of the whole R × C matrix
  int64_t block_rows = 128;
  int64_t block_cols = 128;
  int64_t row0 = 0;  // where `values` starts in the whole matrix
  int64_t col0 = 0;

  int64_t rows() const { return values.size(0); }
  int64_t cols() const { return values.size(1); }
  // The scale of element (r, c) of this view.
  float scale(int64_t r, int64_t c) const;
  // Rows [begin, end) along dimension `d` (0 or 1), on the same blocks.
  Fp8Blocks slice(int64_t d, int64_t begin, int64_t end) const;
  // The transpose of this view, on the transposed blocks: transposed().scale(c, r) ==
  // scale(r, c) and its values are this view's bytes, copied (contiguous, [cols, rows]); the
  // scale grid is the transpose of the whole matrix's. For weights applied transposed (MLA's
  // W_UK, absorbed into the query) without leaving FP8.
  Fp8Blocks transposed() const;
  // Row r of this view, dequantised: out[c] = value · scale in f32.
  void dequantize_row(int64_t r, float* out) const;
  // The whole view dequantised to f32 [rows, cols].
  Tensor dequantize() const;
};

// Quantises a 2-d float tensor (any float dtype and strides) the way the published checkpoints
// are: per block, scale = amax / 448 in f32 (1 for an all-zero block, whose values are then 0),
// values = e4m3(w / scale) rounded to nearest even and saturated at ±448.
Fp8Blocks quantize_fp8_blocks(const Tensor& w, int64_t block_rows = 128, int64_t block_cols = 128);

}  // namespace handoff::tensor
