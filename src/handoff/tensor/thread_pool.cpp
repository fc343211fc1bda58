#include "handoff/tensor/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <thread>

namespace handoff::tensor {
namespace {
thread_local int t_num_threads = 0;
}

int num_threads() {
  if (t_num_threads <= 0) t_num_threads = std::max(1, omp_get_max_threads());
  return t_num_threads;
}

void set_num_threads(int n) {
  t_num_threads = std::max(1, n);
  omp_set_num_threads(t_num_threads);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    body(0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) body(begin, end);
  }
}

}  // namespace handoff::tensor
