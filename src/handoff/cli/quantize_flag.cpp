#include "handoff/cli/quantize_flag.h"

#include "handoff/error.h"

namespace handoff::cli {

void add_quantize_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--quantize", value,
                 "Quantise a bf16/f32 checkpoint's attention, MLP and expert matrices at load: "
                 "fp8 (e4m3, 128x128 block scales, as published FP8 checkpoints)")
      ->check(CLI::IsMember({"fp8"}));
}

void apply_quantize_flag(const std::string& value, const model::ModelConfig& config,
                         model::LoadOptions& load) {
  if (value.empty()) return;
  if (value != "fp8") fail_input("--quantize: unsupported '{}' (expected fp8)", value);
  if (config.weight_block_rows > 0)
    fail_input(
        "--quantize fp8: the checkpoint is already quantised (its config.json has a "
        "quantization_config with weight_block_size); load it without --quantize");
  load.quantize_fp8 = true;
}

}  // namespace handoff::cli
