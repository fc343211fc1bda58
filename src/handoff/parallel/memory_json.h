#pragma once
// The memory plan as the "memory" object of `handoff plan --json`.
#include <nlohmann/json.hpp>

#include "handoff/parallel/memory_plan.h"

namespace handoff::parallel {

nlohmann::json memory_to_json(const MemoryPlan& plan);

}  // namespace handoff::parallel
