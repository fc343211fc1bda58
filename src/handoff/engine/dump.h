#pragma once
// Writes generation results in the golden format (tests/data/golden/README.md,
// "dsv32-oracle-golden/1"), so a run and a golden file compare field by field.
#include <nlohmann/json.hpp>
#include <vector>

#include "handoff/engine/generator.h"
#include "handoff/model/config.h"

namespace handoff::engine {

nlohmann::json golden_format_dump(const model::ModelConfig& config,
                                  const std::vector<GenerationResult>& results);

}  // namespace handoff::engine
