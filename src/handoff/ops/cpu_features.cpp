#include "handoff/ops/cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "handoff/error.h"

namespace handoff::ops {

namespace {

std::atomic<int> g_cap{static_cast<int>(Isa::kAmx)};

// Linux hands out the 8 KiB of AMX tile state only to a process that asks for it; without it
// the first tile instruction faults.
bool os_grants_amx_tiles() {
#if defined(__x86_64__)
  constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
  return ::syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  return false;
#endif
}

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    if (__builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
        os_grants_amx_tiles())
      return Isa::kAmx;
    return Isa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

// HANDOFF_ISA caps the level for a whole process (e.g. to run the AVX2 kernels on an AVX-512
// machine); unset means no cap.
Isa env_cap() {
  const char* v = std::getenv("HANDOFF_ISA");
  if (v == nullptr || *v == '\0') return Isa::kAmx;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512, Isa::kAmx})
    if (std::string_view(v) == isa_name(isa)) return isa;
  fail("HANDOFF_ISA='{}': expected portable, avx2, avx512 or amx", v);
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAmx:
      return "amx";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kPortable:
      break;
  }
  return "portable";
}

Isa cpu_max_isa() {
  static const Isa isa = detect();
  return isa;
}

bool cpu_is_amd() {
#if defined(__x86_64__)
  static const bool amd = __builtin_cpu_is("amd");
  return amd;
#else
  return false;
#endif
}

bool bf16_dot_products() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has && cpu_is_amd() && kernel_isa() >= Isa::kAvx512;
#else
  return false;
#endif
}

void cap_kernel_isa(Isa isa) { g_cap.store(static_cast<int>(isa), std::memory_order_relaxed); }

Isa kernel_isa() {
  static const Isa allowed = std::min(cpu_max_isa(), env_cap());
  return std::min(allowed, static_cast<Isa>(g_cap.load(std::memory_order_relaxed)));
}

}  // namespace handoff::ops
