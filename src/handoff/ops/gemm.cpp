// Portable body of the small f32 GEMM and the run-time switch to the AVX2 or AVX-512 one (the
// indexer's fused scores run the AVX2 body on AVX-512 CPUs too).
#include "handoff/ops/gemm.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "handoff/ops/cpu_features.h"
#include "handoff/ops/gemm_kernels.h"

namespace handoff::ops {

namespace {

void gemm_portable(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (!accumulate) std::fill(ci, ci + n, 0.0f);
    for (int64_t p = 0; p < k; ++p) {
      const float av = a[i * lda + p];
      const float* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
    }
  }
}

float key_value(float k) { return k; }
float key_value(uint16_t k) { return std::bit_cast<float>(uint32_t{k} << 16); }

template <typename Key>
void relu_weighted_scores_portable(int64_t n, int64_t heads, int64_t dims, const Key* keys,
                                   int64_t ldk, const float* q_t, int64_t ldq, const float* w,
                                   float* out) {
  for (int64_t i = 0; i < n; ++i) {
    float score = 0.0f;
    for (int64_t h = 0; h < heads; ++h) {
      float dot = 0.0f;  // gemm_portable's sum for this (key, head)
      for (int64_t p = 0; p < dims; ++p) dot += key_value(keys[i * ldk + p]) * q_t[p * ldq + h];
      score += w[h] * std::max(0.0f, dot);
    }
    out[i] = score;
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  const GemmKernel kernel = kernel_isa() >= Isa::kAvx512 ? avx512::gemm
                            : kernel_isa() >= Isa::kAvx2 ? avx2::gemm
                                                         : gemm_portable;
  kernel(m, n, k, a, lda, b, ldb, c, ldc, accumulate);
}

void relu_weighted_scores(int64_t n, int64_t heads, int64_t dims, const float* keys, int64_t ldk,
                          const float* q_t, int64_t ldq, const float* w, float* out) {
  if (n <= 0) return;
  if (kernel_isa() >= Isa::kAvx2)
    return avx2::relu_weighted_scores(n, heads, dims, keys, ldk, q_t, ldq, w, out);
  relu_weighted_scores_portable(n, heads, dims, keys, ldk, q_t, ldq, w, out);
}

void relu_weighted_scores_bf16(int64_t n, int64_t heads, int64_t dims, const uint16_t* keys,
                               int64_t ldk, const float* q_t, int64_t ldq, const float* w,
                               float* out) {
  if (n <= 0) return;
  if (kernel_isa() >= Isa::kAvx2)
    return avx2::relu_weighted_scores_bf16(n, heads, dims, keys, ldk, q_t, ldq, w, out);
  relu_weighted_scores_portable(n, heads, dims, keys, ldk, q_t, ldq, w, out);
}

void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  if (kernel_isa() >= Isa::kAvx512) return avx512::transpose(rows, cols, src, lds, dst, ldd);
  if (kernel_isa() >= Isa::kAvx2) return avx2::transpose(rows, cols, src, lds, dst, ldd);
  // 8 × 8 blocks keep both sides' lines in L1 while they are filled.
  constexpr int64_t kBlock = 8;
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
      const int64_t i1 = std::min(rows, i0 + kBlock), j1 = std::min(cols, j0 + kBlock);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * ldd + i] = src[i * lds + j];
    }
}

}  // namespace handoff::ops
