#pragma once
// Loading the golden cases (outputs of DeepSeek's official reference, tests/data/golden) and
// comparing engine runs against them.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "handoff/engine/generator.h"
#include "handoff/model/model.h"

namespace handoff::testing {

inline const std::vector<std::string>& golden_cases() {
  static const std::vector<std::string> cases = {"dsv32_tiny_sparse", "glm5_tiny_sparse",
                                                 "dsv32_small_bf16", "dsv32_fp8_blocks"};
  return cases;
}

std::string golden_dir(const std::string& name);
const nlohmann::json& golden(const std::string& name);  // parsed once per process
// The reference run with its FP8 indexer (golden_fp8sim.json; tests/data/golden/README.md).
const nlohmann::json& golden_fp8sim(const std::string& name);

// Runs prompt `index` of `golden_json` teacher-forced with its greedy tokens, recording all.
engine::GenerationResult run_teacher_forced(model::Model& model, const nlohmann::json& prompt,
                                            int64_t prefill_chunk = 0);

// Writes a variant of golden case `name` into `dir` (a fresh temp folder named after `tag`):
// its config.json after `edit_config`, and each tensor after `edit_tensor` (nullopt drops it).
// Returns the folder.
std::filesystem::path write_golden_variant(
    const std::string& name, const std::string& tag,
    const std::function<void(nlohmann::json&)>& edit_config,
    const std::function<std::optional<tensor::Tensor>(const std::string&, const tensor::Tensor&)>&
        edit_tensor);

double max_abs_diff(const std::vector<std::vector<float>>& ours, const nlohmann::json& golden);
// The same between two runs of ours (infinity when their shapes differ).
double max_abs_diff(const std::vector<std::vector<float>>& a,
                    const std::vector<std::vector<float>>& b);

}  // namespace handoff::testing
