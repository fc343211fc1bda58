#pragma once
// Run-time CPU feature checks, so one binary picks the AVX-512 kernels where the CPU has them
// and the portable ones elsewhere.
namespace handoff::ops {

// avx512f + bw + vl + dq (what the *_avx512.cpp kernels are compiled for). Cached.
bool cpu_has_avx512();
// Makes cpu_has_avx512() report false (true = force the portable kernels); for tests and
// benchmarks comparing the two paths in one process.
void force_portable_kernels(bool on);

}  // namespace handoff::ops
