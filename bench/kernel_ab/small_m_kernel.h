#pragma once
// The small-M kernel a kernel_ab run compares, by kernel family and dtype: one mapping for both
// sides, this build's (bench/kernel_ab.cpp) and the base revision's (base_shim.cpp, compiled
// against that revision's headers).
#include <cstring>

#include "handoff/ops/linear_kernels.h"

namespace handoff::bench {

inline ops::detail::SmallMKernel small_m_kernel(const char* isa, bool fp8) {
  namespace detail = ops::detail;
  if (std::strcmp(isa, "avx2") == 0)
    return fp8 ? detail::avx2::linear_small_m_fp8 : detail::avx2::linear_small_m;
  return fp8 ? detail::avx512::linear_small_m_fp8 : detail::avx512::linear_small_m;
}

}  // namespace handoff::bench
