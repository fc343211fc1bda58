// Built by bench/kernel_ab.sh with a base revision's kernel sources and headers into a shared
// library that bench/kernel_ab.cpp loads. Everything else in the library is hidden
// (-fvisibility=hidden), so the base kernels' calls among themselves stay inside it rather than
// binding to the loading program's own kernels of the same names.
#include <cstring>

#include "handoff/ops/linear_kernels.h"

extern "C" __attribute__((visibility("default"))) handoff::ops::detail::SmallMKernel
handoff_base_small_m(const char* isa, int fp8) {
  namespace detail = handoff::ops::detail;
  if (std::strcmp(isa, "avx2") == 0)
    return fp8 != 0 ? detail::avx2::linear_small_m_fp8 : detail::avx2::linear_small_m;
  return fp8 != 0 ? detail::avx512::linear_small_m_fp8 : detail::avx512::linear_small_m;
}
