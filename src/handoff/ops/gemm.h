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

// The DSA indexer's score of each key against one query: out[i] = sum over h < heads of
// w[h] * max(0, sum over p < dims of keys[i, p] * q_t[p, h]), for i < n. Equal bit for bit to
// gemm(n, heads, dims, keys, ldk, q_t, ldq, ...) followed by, per key, a sum from 0 over h in
// order of each product w[h] * max(0, dot) rounded before its add; the [n, heads] dots stay in
// registers instead of going to memory and back (a decode step at 64K depth scores 64K keys per
// layer). Single-threaded, like gemm.
void relu_weighted_scores(int64_t n, int64_t heads, int64_t dims, const float* keys, int64_t ldk,
                          const float* q_t, int64_t ldq, const float* w, float* out);

// The same scores from bf16 keys (a cache's rows as stored), widened exactly inside the kernel:
// equal bit for bit to relu_weighted_scores on the widened keys, without a widening pass.
void relu_weighted_scores_bf16(int64_t n, int64_t heads, int64_t dims, const uint16_t* keys,
                               int64_t ldk, const float* q_t, int64_t ldq, const float* w,
                               float* out);

// dst[j, i] = src[i, j] for i < rows, j < cols.
void transpose(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd);

}  // namespace handoff::ops
