#pragma once
// Small dense f32 matrix products for attention and the indexer, whose operands are gathered
// per step (cached keys), so they cannot be packed at load like LinearWeight's.
#include <cstdint>

namespace handoff::ops {

// c[i, j] = (accumulate ? c[i, j] : 0) + sum_p a[i, p] * b[p, j] for i < m, j < n, p < k, all
// row-major with leading dimensions lda / ldb / ldc. Each element's sum runs over p in order, one
// fused multiply-add at a time, whatever m, n or the blocking: a row's result does not depend on
// the other rows, so batching queries changes nothing (batch invariance), and a row of zeros in
// `a` adds exactly nothing. Single-threaded: callers run it inside their own parallel items.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc, bool accumulate);

// dst[j, i] = src[i, j] for i < rows, j < cols.
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

}  // namespace handoff::ops
