#include "handoff/ops/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace handoff::ops {

namespace {
std::atomic<bool> g_force_portable{false};
}  // namespace

void force_portable_kernels(bool on) { g_force_portable.store(on, std::memory_order_relaxed); }

bool cpu_has_avx512() {
  // HANDOFF_NO_AVX512=1 forces the portable kernels (for testing them on AVX-512 machines).
  static const bool has = [] {
    const char* off = std::getenv("HANDOFF_NO_AVX512");
    if (off != nullptr && std::strcmp(off, "0") != 0 && *off != '\0') return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
  }();
  return has && !g_force_portable.load(std::memory_order_relaxed);
}

}  // namespace handoff::ops
