#pragma once
// Conversions between the token layouts of plan.h, all explicit: a local chunk (no
// communication) and all-gather + trim. Rank r's shard is rows [r*s, (r+1)*s) of the n rows
// padded with zero rows to tp*s, s = ceil(n / tp); padding rows never reach real rows.
#include <cstdint>

#include "handoff/comm/communicator.h"

namespace handoff::parallel {

// Copies this rank's s rows of a full [n, d] tensor to `shard`, zero-padding past row n.
void copy_own_rows(const float* full, int64_t n, int64_t d, int rank, int tp, float* shard);
// The same in place: the buffer then holds the shard in its first s rows.
void keep_own_rows(float* buffer, int64_t n, int64_t d, int rank, int tp);
// hidden and residual shards [s, d] -> full [n, d] on every rank: concatenated, one
// all-gather (2d wide) over the tp group, trimmed to n rows and split back.
void restore_full(float* hidden, float* residual, int64_t n, int64_t d, comm::Communicator& comm);

}  // namespace handoff::parallel
