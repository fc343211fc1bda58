#pragma once
// The process's one pool of worker threads. It is OpenMP's pool: oneDNN (built with the OpenMP
// runtime on Debian) already uses it, so our kernels share the same threads instead of
// competing with a second pool. Threads are created once and reused by every op.
#include <cstdint>
#include <functional>

namespace handoff::tensor {

// Threads the kernels of the calling thread use (a rank thread of the local backend gets
// cores / ranks). Set once per thread before the first op.
int num_threads();
void set_num_threads(int n);

// Calls body(begin, end) on disjoint chunks covering [0, n); chunks are at least `grain` long.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace handoff::tensor
