#pragma once
// Internal: the ISA-specific bodies behind gemm.h (gemm.cpp picks one per kernel_isa()).
#include <cstdint>

namespace handoff::ops {

using GemmKernel = void (*)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                            const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate);

namespace avx2 {
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate);
void relu_weighted_scores(int64_t n, int64_t heads, int64_t dims, const float* keys, int64_t ldk,
                          const float* q_t, int64_t ldq, const float* w, float* out);
void relu_weighted_scores_bf16(int64_t n, int64_t heads, int64_t dims, const uint16_t* keys,
                               int64_t ldk, const float* q_t, int64_t ldq, const float* w,
                               float* out);
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
}  // namespace avx2

namespace avx512 {
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate);
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);
}  // namespace avx512

}  // namespace handoff::ops
