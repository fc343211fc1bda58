#include "handoff/cli/activations_flag.h"

#include "handoff/error.h"

namespace handoff::cli {

void add_activations_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--activations", value,
                 "Inputs of the bf16 / FP8 matrix products over more than 16 rows (prefill): "
                 "exact (f32; default) or bf16 (rounded, as GPU engines run: choices on near-ties "
                 "may differ; faster on AMX CPUs and on AMD CPUs with AVX512_BF16, the same "
                 "elsewhere); decode stays exact; --dtype bf16 only")
      ->check(CLI::IsMember({"bf16", "exact"}));
}

void apply_activations_flag(const std::string& value, model::LoadOptions& load) {
  if (value.empty()) {
    load.activations = ops::ActivationPrecision::kExact;
    return;
  }
  if (load.dtype == tensor::DType::kF32)
    fail_input("--activations {}: applies to --dtype bf16 only (f32 products are exact)", value);
  if (value == "bf16") {
    load.activations = ops::ActivationPrecision::kBf16;
  } else if (value == "exact") {
    load.activations = ops::ActivationPrecision::kExact;
  } else {
    fail_input("--activations must be bf16 or exact, got '{}'", value);
  }
}

}  // namespace handoff::cli
