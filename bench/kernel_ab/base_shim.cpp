// Built by bench/kernel_ab.sh with a base revision's kernel sources and headers into a shared
// library that bench/kernel_ab.cpp loads. Everything else in the library is hidden
// (-fvisibility=hidden), so the base kernels' calls among themselves stay inside it rather than
// binding to the loading program's own kernels of the same names.
#include "small_m_kernel.h"

extern "C" __attribute__((visibility("default"))) handoff::ops::detail::SmallMKernel
handoff_base_small_m(const char* isa, int fp8) {
  return handoff::bench::small_m_kernel(isa, fp8 != 0);
}
