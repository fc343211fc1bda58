#pragma once
// What the engine drives: one step over the model, wherever its ranks live. The engine hands it
// the step (block copies; chunks: tokens, positions, block tables) and gets back the logits of each
// chunk's last token (every token of an all_logits chunk), so it does not care whether the model is
// one rank in this thread, ranks as threads (LocalExecutor) or processes of an mpirun job
// (MpiExecutor).
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/model/batch.h"
#include "handoff/model/config.h"
#include "handoff/runtime/step.h"
#include "handoff/tensor/tensor.h"

namespace handoff::runtime {

// Collectives counted per (scope, op, group): what /metrics reports, summed over the ranks.
using CollectiveCounts = comm::CommCounts;

class Executor {
 public:
  virtual ~Executor() = default;
  virtual const model::ModelConfig& config() const = 0;
  // f32 logits [rows, vocab]. Throws when a rank failed; the executor is then unusable.
  virtual tensor::Tensor step(const Step& step) = 0;
  // What every rank's collectives counted so far, summed over the ranks; safe from any thread.
  virtual CollectiveCounts comm_counts() const { return {}; }
};

}  // namespace handoff::runtime
