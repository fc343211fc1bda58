#pragma once
// Run-time CPU feature checks, so one binary picks the widest kernels the CPU has: AMX tiles,
// AVX-512, AVX2 + FMA, or the portable ones compiled for the baseline ISA.
namespace handoff::ops {

// Ordered: each level's kernels need the CPU features of every level below it.
enum class Isa { kPortable = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };

const char* isa_name(Isa isa);
// The widest level this CPU supports: amx = avx512 + AMX-BF16 tiles that the kernel lets this
// process use (arch_prctl; the *_amx.cpp kernels, and oneDNN's bf16 matmul for prefill),
// avx512 = avx512f + bw + vl + dq (the *_avx512.cpp kernels), avx2 = avx2 + fma + f16c (the
// *_avx2.cpp kernels). Cached.
Isa cpu_max_isa();
// The level the kernels run at: cpu_max_isa(), capped by the HANDOFF_ISA environment variable
// (portable|avx2|avx512|amx; an unknown value is an error at first use) and by
// cap_kernel_isa().
Isa kernel_isa();
// Caps kernel_isa() at `isa` (kAmx = no cap); for tests and benchmarks comparing the paths
// in one process.
void cap_kernel_isa(Isa isa);
// Whether the CPU is AMD's: the AVX-512 decode kernels prefetch weights they read once
// non-temporally there, as measured on Zen 5 (linear_avx512.cpp); elsewhere they keep the
// prefetches measured on Intel. Cached.
bool cpu_is_amd();
// Whether bf16 products on rounded activations run on vdpbf16ps (linear_avx512bf16.cpp): at
// the avx512 level or above, on an AMD CPU with AVX512_BF16. There it issues twice a cycle, as
// FMA does, with twice the multiply-adds (2-core Zen 5); on the Intel Xeon it was measured on,
// the FMA kernels on widened weights were faster (linear_avx512.cpp).
bool bf16_dot_products();

}  // namespace handoff::ops
