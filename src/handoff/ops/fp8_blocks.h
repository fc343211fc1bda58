#pragma once
// The reference's activation quantizer for the DSA indexer's FP8 path (`act_quant` with
// scale_fmt "ue8m0" in DeepSeek-V3.2's inference/kernel.py): blocks of up to 128 values, each
// with a power-of-two scale 2^ceil(log2(max(amax, 1e-4) / 448)), values rounded to e4m3 (nearest
// even, clamped to ±448). A power-of-two scale makes dequantization exact in f32, so a consumer
// may fold scales into f32 values without changing the function.
#include <cstdint>

namespace handoff::ops {

constexpr int64_t kFp8BlockValues = 128;

// Values per block for a row of n values: 128, or the whole row when it is shorter.
inline int64_t fp8_block_width(int64_t n) { return n < kFp8BlockValues ? n : kFp8BlockValues; }
inline int64_t fp8_blocks_per_row(int64_t n) {
  const int64_t w = fp8_block_width(n);
  return w == 0 ? 0 : (n + w - 1) / w;
}

// The power-of-two scale of a block whose largest magnitude is `amax`.
float fp8_pow2_scale(float amax);

// codes[i] = e4m3(x[i] / scale of its block); scales[b] for each of fp8_blocks_per_row(n) blocks.
void quantize_fp8_row(const float* x, int64_t n, uint8_t* codes, float* scales);
// out[i] = value(codes[i]) · scales[block of i]: exact in f32.
void dequantize_fp8_row(const uint8_t* codes, const float* scales, int64_t n, float* out);
// x ← dequantize(quantize(x)): the value an FP8 consumer sees, in place.
void round_fp8_row(float* x, int64_t n);

// In-place Walsh–Hadamard rotation of `rows` rows of n values (n a power of two), in Sylvester
// order and scaled by n^-1/2 (orthonormal): the reference's `rotate_activation`. It spreads an
// outlier over the whole row before the row is quantized.
void hadamard_rotate(float* x, int64_t rows, int64_t n);

}  // namespace handoff::ops
