// AVX-512 bodies of the row-wise kernels. Tails use masked loads/stores instead of scalar loops.
#include <immintrin.h>

#include "handoff/ops/vector_ops_kernels.h"

namespace handoff::ops::avx512 {

namespace {

__mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xffff) : __mmask16((1u << remaining) - 1);
}

// expf via Cephes' degree-5 polynomial on [-ln2/2, ln2/2] and scalef for 2^n (which also handles
// underflow to zero and overflow to inf). About 1 ulp, well inside the 1e-6 test tolerance.
__m512 exp_ps(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.8f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 r2 = _mm512_mul_ps(r, r);
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

float dot(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 r =
        _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

float sum_squares(const float* x, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

void scale_mul(const float* x, const float* w, float scale, float* out, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i),
                                   _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

float add_sum_squares(float* residual, const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 r =
        _mm512_add_ps(_mm512_maskz_loadu_ps(m, residual + i), _mm512_maskz_loadu_ps(m, x + i));
    _mm512_mask_storeu_ps(residual + i, m, r);
    acc = _mm512_fmadd_ps(r, r, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

float exp_sum(float* x, int64_t n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(sum);
}

float scale_max(float* x, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    _mm512_mask_storeu_ps(x + i, m, v);
    vmax = _mm512_mask_max_ps(vmax, m, v, vmax);  // max(v, vmax) gives vmax where v is NaN
  }
  return _mm512_reduce_max_ps(vmax);
}

int64_t argmax(const float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    vmax = _mm512_mask_max_ps(vmax, m, _mm512_maskz_loadu_ps(m, x + i), vmax);
  }
  // Then the first place that holds it: a second pass, over data the first left in cache.
  const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __mmask16 eq =
        _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), top, _CMP_EQ_OQ);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  return 0;
}

void softmax(float* x, int64_t n) {
  __m512 vmax = _mm512_set1_ps(-__builtin_inff());
  for (int64_t i = 0; i < n; i += 16)
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(vmax, tail_mask(n - i), x + i));
  const __m512 inv = _mm512_set1_ps(1.0f / exp_sum(x, n, _mm512_reduce_max_ps(vmax)));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

}  // namespace

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
    _mm512_mask_storeu_ps(dst + i, m,
                          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
}

const VectorKernels kVectorKernels = {dot,      axpy,    sum_squares, scale_mul, add_sum_squares,
                                      silu_mul, softmax, exp_sum,     scale_max, widen_bf16,
                                      argmax};

}  // namespace handoff::ops::avx512
