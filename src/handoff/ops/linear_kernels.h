#pragma once
// Internal: the packed weight layout shared by LinearWeight and its small-M kernels.
//
// Rows are grouped in blocks of 64 (N padded with zero rows), K is padded with zeros to a
// multiple of 16 (32 for bf16), and within a block the rows are interleaved so each 64-byte
// load covers 16 output rows (a "lane"), and a block is one contiguous stream in k order:
//   f32:  [N/64][K][64]          (oneDNN's BA16a64b for the K×N matrix Wᵀ)
//   bf16: [N/64][K/2][64][2]     (oneDNN's BA16a64b2a)
// One stream per block matters: separate per-16-row streams a power of two apart ran well
// below the machine's read bandwidth. A bf16 load gives 16 rows × 2 consecutive k; shifting
// each 32-bit lane left by 16 yields the even k in f32, masking off the low half the odd k. The
// small-M kernels broadcast x[m][k] and FMA into 16-row accumulators, so they never need horizontal
// reductions, and each weight byte is read from memory once for all M rows. oneDNN reads the same
// buffer for large M.
#include <cstdint>

#include "handoff/tensor/dtype.h"

namespace handoff::ops::detail {

inline constexpr int64_t kRowBlock = 64;
inline constexpr int64_t kLane = 16;  // rows per 64-byte vector
inline constexpr int64_t kKAlign = 16;

struct PackedWeight {
  tensor::DType dtype;
  int64_t n;
  int64_t k_pad;     // multiple of kKAlign (of 2·kKAlign for bf16)
  int64_t n_blocks;  // ceil(n / kRowBlock)
  const void* data;
};

// y[i, r] for i in [0, m), rows r of blocks [b0, b1). x is [m][k_pad] with zero padding
// (ldx = k_pad), so the kernels need no K tail handling.
using SmallMKernel = void (*)(const PackedWeight& w, const float* x, int64_t m, float* y,
                              int64_t ldy, int64_t b0, int64_t b1);

void linear_small_m_portable(const PackedWeight& w, const float* x, int64_t m, float* y,
                             int64_t ldy, int64_t b0, int64_t b1);

namespace avx512 {
void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1);
}  // namespace avx512
namespace avx2 {
void linear_small_m(const PackedWeight& w, const float* x, int64_t m, float* y, int64_t ldy,
                    int64_t b0, int64_t b1);
}  // namespace avx2

}  // namespace handoff::ops::detail
