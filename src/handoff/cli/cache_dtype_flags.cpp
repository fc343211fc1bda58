#include "handoff/cli/cache_dtype_flags.h"

#include "handoff/error.h"

namespace handoff::cli {

namespace {

tensor::DType parse_cache_dtype(const std::string& value, const char* flag, tensor::DType weights) {
  if (value.empty()) return weights == tensor::DType::kF32 ? weights : tensor::DType::kBF16;
  if (value == "f32") return tensor::DType::kF32;
  if (value == "bf16") return tensor::DType::kBF16;
  if (value == "fp8")
    fail_input(
        "{} fp8 is not implemented by the engine yet (only `handoff plan` sizes it); use "
        "f32 or bf16",
        flag);
  fail_input("{} must be f32 or bf16, got '{}'", flag, value);
}

}  // namespace

void add_cache_dtype_flags(CLI::App& cmd, CacheDtypeFlags& flags) {
  cmd.add_option("--kv-cache-dtype", flags.latent,
                 "Cache rows of the latent c_kv + k_pe: f32 or bf16 (default: f32 with --dtype "
                 "f32, else bf16)");
  cmd.add_option("--indexer-cache-dtype", flags.indexer,
                 "Cache rows of the DSA indexer's key: f32 or bf16 (default as --kv-cache-dtype; "
                 "DSA models only)");
}

void apply_cache_dtype_flags(const CacheDtypeFlags& flags, const model::ModelConfig& config,
                             model::LoadOptions& load) {
  load.latent_cache_dtype = parse_cache_dtype(flags.latent, "--kv-cache-dtype", load.dtype);
  if (!flags.indexer.empty() && !config.has_indexer)
    fail_input("--indexer-cache-dtype: the model ({}) has no DSA indexer", config.model_type);
  load.index_cache_dtype = parse_cache_dtype(flags.indexer, "--indexer-cache-dtype", load.dtype);
}

}  // namespace handoff::cli
