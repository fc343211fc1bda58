#pragma once
// --quantize of serve, bench offline and generate: quantise a bf16 / f32 checkpoint's matrices
// to FP8 blocks while loading (model::LoadOptions::quantize_fp8).
#include <CLI/CLI.hpp>
#include <string>

#include "handoff/model/config.h"
#include "handoff/model/model.h"

namespace handoff::cli {

void add_quantize_flag(CLI::App& cmd, std::string& value);
// Sets load.quantize_fp8 for --quantize fp8. InputError naming the flag when the checkpoint's
// config declares FP8 weights already (quantization_config); a checkpoint with F8_E4M3 tensors
// and no such config fails when its weights are opened.
void apply_quantize_flag(const std::string& value, const model::ModelConfig& config,
                         model::LoadOptions& load);

}  // namespace handoff::cli
