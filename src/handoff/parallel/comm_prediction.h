#pragma once
// What the plan says one forward step communicates, per rank: every collective with its scope,
// group and bytes (the payload this rank contributes, as comm::Communicator counts it).
#include <cstdint>
#include <string>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/model/config.h"
#include "handoff/parallel/plan.h"

namespace handoff::parallel {

struct PlannedCall {
  std::string scope;
  comm::Op op;
  comm::Group group;
  int64_t bytes = 0;
};

// The collectives a rank of `stage` runs in one step of `n` tokens of which `logit_rows` need
// logits, in program order.
std::vector<PlannedCall> predict_step(const Plan& plan, const model::ModelConfig& config, int stage,
                                      int64_t n, int64_t logit_rows);

// The same, summed per (scope, op, group), in the Communicator's counting format.
comm::CommCounts predicted_counts(const Plan& plan, const model::ModelConfig& config, int stage,
                                  int64_t n, int64_t logit_rows);

}  // namespace handoff::parallel
