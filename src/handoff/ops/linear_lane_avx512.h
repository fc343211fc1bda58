#pragma once
// Internal, for the AVX-512 translation units only (*_avx512*.cpp, compiled with AVX-512): how
// the FMA tiles (linear_avx512.cpp) and the vdpbf16ps tiles (linear_avx512bf16.cpp) store one
// 16-row lane of sums.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "handoff/ops/linear_kernels.h"

namespace handoff::ops::detail {

// The lanes of the 16 rows from row0 that are rows of w (the last block may end inside a lane).
inline __mmask16 lane_rows_mask(const PackedWeight& w, int64_t row0) {
  const int64_t valid = std::min<int64_t>(kLane, w.n - row0);
  return valid >= 16 ? __mmask16(0xffff) : __mmask16((1u << valid) - 1);
}

// out (+)= r on the masked rows; with `scales` (a widened FP8 k block's row scales),
// out (+)= r · scales in one rounding.
inline void store_lane(float* out, __mmask16 mask, __m512 r, bool accumulate, const float* scales) {
  const __m512 prev = accumulate ? _mm512_maskz_loadu_ps(mask, out) : _mm512_setzero_ps();
  if (scales != nullptr) {
    r = _mm512_fmadd_ps(r, _mm512_maskz_loadu_ps(mask, scales), prev);
  } else if (accumulate) {
    r = _mm512_add_ps(r, prev);
  }
  _mm512_mask_storeu_ps(out, mask, r);
}

}  // namespace handoff::ops::detail
