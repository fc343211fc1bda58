// AVX2 + FMA bodies of the row-wise kernels. Tails use masked loads/stores (vmaskmov) instead of
// scalar loops; a masked load reads nothing past the end, so the tails cannot fault. Only the
// tail: on AMD Zen 3 a vmaskmovps store costs several plain ones (scale_max over 64 floats took
// 35 ns with a mask on every vector, 6 ns with plain full vectors).
#include <immintrin.h>

#include <cstring>

#include "handoff/ops/vector_ops_kernels.h"

namespace handoff::ops::avx2 {

namespace {

// Lanes [0, remaining) set; remaining >= 8 sets all.
__m256i tail_mask(int64_t remaining) {
  const int r = remaining >= 8 ? 8 : static_cast<int>(remaining);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The lanes of a whole vector, and of a partial last one (through its mask).
struct WholeLanes {
  __m256 load(const float* p) const { return _mm256_loadu_ps(p); }
  void store(float* p, __m256 v) const { _mm256_storeu_ps(p, v); }
  __m256 past_end(__m256 v, __m256 /*fill*/) const { return v; }  // no lane is past the end
};
struct TailLanes {
  __m256i mask;
  __m256 load(const float* p) const { return _mm256_maskload_ps(p, mask); }
  void store(float* p, __m256 v) const { _mm256_maskstore_ps(p, mask, v); }
  __m256 past_end(__m256 v, __m256 fill) const {  // `fill` in the lanes past the end
    return _mm256_blendv_ps(fill, v, _mm256_castsi256_ps(mask));
  }
};

// step(i, lanes) for each vector of 8 floats from 0 to n, in order: whole ones, then the tail.
template <typename Step>
void over_vectors(int64_t n, Step step) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) step(i, WholeLanes{});
  if (i < n) step(i, TailLanes{tail_mask(n - i)});
}

float reduce_add(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

float reduce_max(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

// 2^n for integral n in [-150, 128] (as floats): two factors 2^(n/2) and 2^(n - n/2), each a
// normal number built in the exponent field, so results below FLT_MIN come out as denormals or 0
// and 2^128 as inf, as AVX-512's scalef gives them.
__m256 pow2(__m256 n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256i rest = _mm256_sub_epi32(ni, half);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(rest, bias), 23));
  return _mm256_mul_ps(a, b);
}

// expf via Cephes' degree-5 polynomial on [-ln2/2, ln2/2], as in the AVX-512 body. About 1 ulp.
__m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.8f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  return _mm256_mul_ps(y, pow2(n));
}

float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    acc0 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), acc0);
  }
  return reduce_add(_mm256_add_ps(acc0, acc1));
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 r =
        _mm256_fmadd_ps(va, _mm256_maskload_ps(x + i, m), _mm256_maskload_ps(y + i, m));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

float sum_squares(const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += 8) {
    const __m256 a = _mm256_maskload_ps(x + i, tail_mask(n - i));
    acc0 = _mm256_fmadd_ps(a, a, acc0);
  }
  return reduce_add(_mm256_add_ps(acc0, acc1));
}

void scale_mul(const float* x, const float* w, float scale, float* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(scale);
  over_vectors(n, [&](int64_t i, auto lanes) {
    lanes.store(out + i, _mm256_mul_ps(lanes.load(w + i), _mm256_mul_ps(lanes.load(x + i), s)));
  });
}

float add_sum_squares(float* residual, const float* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  over_vectors(n, [&](int64_t i, auto lanes) {
    const __m256 r = _mm256_add_ps(lanes.load(residual + i), lanes.load(x + i));
    lanes.store(residual + i, r);
    acc = _mm256_fmadd_ps(r, r, acc);  // masked-off lanes are 0 + 0
  });
  return reduce_add(acc);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  over_vectors(n, [&](int64_t i, auto lanes) {
    const __m256 g = lanes.load(gate + i);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
    lanes.store(out + i, _mm256_mul_ps(s, lanes.load(up + i)));
  });
}

float exp_sum(float* x, int64_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 sum = _mm256_setzero_ps();
  over_vectors(n, [&](int64_t i, auto lanes) {
    const __m256 e =
        lanes.past_end(exp_ps(_mm256_sub_ps(lanes.load(x + i), sh)), _mm256_setzero_ps());
    lanes.store(x + i, e);
    sum = _mm256_add_ps(sum, e);
  });
  return reduce_add(sum);
}

float scale_max(float* x, int64_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  over_vectors(n, [&](int64_t i, auto lanes) {
    const __m256 v = _mm256_mul_ps(lanes.load(x + i), s);
    lanes.store(x + i, v);
    // max(v, vmax) gives vmax where v is NaN; lanes past n hold -inf.
    vmax = _mm256_max_ps(lanes.past_end(v, neg_inf), vmax);
  });
  return reduce_max(vmax);
}

int64_t argmax(const float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  over_vectors(n, [&](int64_t i, auto lanes) {
    // max(v, vmax) gives vmax where v is NaN; lanes past n hold -inf.
    vmax = _mm256_max_ps(lanes.past_end(lanes.load(x + i), neg_inf), vmax);
  });
  const __m256 top = _mm256_set1_ps(reduce_max(vmax));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 eq = _mm256_and_ps(_mm256_cmp_ps(_mm256_maskload_ps(x + i, m), top, _CMP_EQ_OQ),
                                    _mm256_castsi256_ps(m));
    const int bits = _mm256_movemask_ps(eq);
    if (bits != 0) return i + __builtin_ctz(static_cast<unsigned>(bits));
  }
  return 0;
}

void softmax(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  over_vectors(n, [&](int64_t i, auto lanes) {
    vmax = _mm256_max_ps(vmax, lanes.past_end(lanes.load(x + i), neg_inf));
  });
  const __m256 inv = _mm256_set1_ps(1.0f / exp_sum(x, n, reduce_max(vmax)));
  over_vectors(
      n, [&](int64_t i, auto lanes) { lanes.store(x + i, _mm256_mul_ps(lanes.load(x + i), inv)); });
}

}  // namespace

void widen_bf16(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  for (; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
    std::memcpy(dst + i, &bits, sizeof bits);
  }
}

const VectorKernels kVectorKernels = {dot,      axpy,    sum_squares, scale_mul, add_sum_squares,
                                      silu_mul, softmax, exp_sum,     scale_max, widen_bf16,
                                      argmax};

}  // namespace handoff::ops::avx2
