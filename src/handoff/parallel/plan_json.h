#pragma once
// The plan and the measured communication of a run in one JSON shape (`handoff plan --json`,
// `handoff generate --comm-report`), so the two compare key by key.
#include <nlohmann/json.hpp>
#include <vector>

#include "handoff/comm/communicator.h"
#include "handoff/model/config.h"
#include "handoff/parallel/plan.h"

namespace handoff::parallel {

// The plan with its predicted collectives for one step of n tokens (logit_rows need logits).
nlohmann::json plan_to_json(const Plan& plan, const model::ModelConfig& config, int64_t n,
                            int64_t logit_rows);

// The plan's structure with measured counts: `per_stage[s]` are the counts of stage s's first
// tp rank (an empty map for a stage not measured here).
nlohmann::json report_to_json(const Plan& plan, const std::vector<comm::CommCounts>& per_stage);

}  // namespace handoff::parallel
