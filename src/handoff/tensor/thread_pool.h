#pragma once
// Worker threads for our kernels: each thread that runs ops (the main thread, each local rank,
// the serving loop) gets its own workers, made once and reused by every op. Work is claimed in
// chunks, so a worker the OS has not scheduled (an oversubscribed machine) delays nothing.
// oneDNN keeps OpenMP's team (Debian builds it with the OpenMP runtime); it only runs the large
// prefill GEMMs, never from inside parallel_for.
#include <cstdint>
#include <functional>

namespace handoff::tensor {

// Threads the kernels of the calling thread use (a rank thread of the local backend gets
// cores / ranks). Set once per thread before the first op.
int num_threads();
void set_num_threads(int n);

// Lets the calling thread's idle workers sleep now instead of spinning for the next op: called
// before work on other threads (a oneDNN primitive on OpenMP's team), so they do not compete.
void park_workers();

// Calls body(begin, end) on disjoint chunks covering [0, n), possibly several per thread, in
// any order; chunks are about `grain` long at least. Inside a chunk, parallel_for runs inline.
// An exception from a chunk is rethrown here once every chunk has finished.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace handoff::tensor
