#include "handoff/parallel/token_layout.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace handoff::parallel {

void copy_own_rows(const float* full, int64_t n, int64_t d, int rank, int tp, float* shard) {
  const int64_t s = (n + tp - 1) / tp;
  const int64_t begin = std::min<int64_t>(n, rank * s);
  const int64_t real = std::min<int64_t>(n, begin + s) - begin;
  std::memmove(shard, full + begin * d, static_cast<size_t>(real * d) * sizeof(float));
  std::memset(shard + real * d, 0, static_cast<size_t>((s - real) * d) * sizeof(float));
}

void keep_own_rows(float* buffer, int64_t n, int64_t d, int rank, int tp) {
  copy_own_rows(buffer, n, d, rank, tp, buffer);
}

void restore_full(float* hidden, float* residual, int64_t n, int64_t d, comm::Communicator& comm) {
  const int tp = comm.topology().tp;
  const int64_t s = (n + tp - 1) / tp;
  thread_local std::vector<float> packed, gathered;
  packed.resize(static_cast<size_t>(s * 2 * d));
  gathered.resize(static_cast<size_t>(tp * s * 2 * d));
  for (int64_t r = 0; r < s; ++r) {
    std::memcpy(packed.data() + r * 2 * d, hidden + r * d, static_cast<size_t>(d) * sizeof(float));
    std::memcpy(packed.data() + r * 2 * d + d, residual + r * d,
                static_cast<size_t>(d) * sizeof(float));
  }
  comm.all_gather(comm::Group::kTp, packed.data(), gathered.data(), s * 2 * d);
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(hidden + r * d, gathered.data() + r * 2 * d,
                static_cast<size_t>(d) * sizeof(float));
    std::memcpy(residual + r * d, gathered.data() + r * 2 * d + d,
                static_cast<size_t>(d) * sizeof(float));
  }
}

}  // namespace handoff::parallel
