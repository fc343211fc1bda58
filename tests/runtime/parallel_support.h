#pragma once
// Runs the golden models on every parallel layout of the test matrix, all ranks as threads of
// this process (local backend).
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/engine/generator.h"
#include "handoff/model/model.h"
#include "handoff/parallel/plan.h"
#include "handoff/tensor/dtype.h"

namespace handoff::testing {

struct MatrixEntry {
  parallel::ParallelOptions options;
  std::string name;
};
// gtest prints parameters with this instead of their bytes.
inline void PrintTo(const MatrixEntry& entry, std::ostream* os) { *os << entry.name; }

// Every valid (tp, pp) in {1,2,4} x {1,2,3} x sp {off,on} x boundary {full,shard} x policy
// {keep,guard}: SP needs tp > 1; boundary and policy apply only with pp > 1 and SP on.
std::vector<MatrixEntry> parallel_matrix();

// This rank's part of the model at f32 (per_head_min_tokens: model::LoadOptions').
std::unique_ptr<model::Model> load_rank_f32(const std::string& model_dir,
                                            const parallel::ParallelOptions& options,
                                            comm::Communicator& comm,
                                            int64_t per_head_min_tokens = 128);

// Teacher-forced generation on all ranks; returns the sampling rank's result.
engine::GenerationResult run_parallel_teacher_forced(const std::string& model_dir,
                                                     const parallel::ParallelOptions& options,
                                                     const std::vector<int32_t>& prompt,
                                                     const std::vector<int32_t>& forced,
                                                     int64_t per_head_min_tokens = 128);

struct StepMeasurement {
  std::vector<comm::CommCounts> counts;  // per world rank, for one prefill forward
  std::vector<int64_t> rows_sent;        // per world rank: rows of the hand-off it sent
  std::vector<int64_t> rows_received;    // per world rank: rows it received
};
// One prefill forward of `prompt` (one logit row) on all ranks, measuring the communication.
StepMeasurement measure_prefill_step(const std::string& model_dir,
                                     const parallel::ParallelOptions& options,
                                     const std::vector<int32_t>& prompt);

}  // namespace handoff::testing
