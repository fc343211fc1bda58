#include "handoff/cli/cache_dtype_flags.h"

#include "handoff/error.h"

namespace handoff::cli {

namespace {

tensor::DType parse_cache_dtype(const std::string& value, const char* flag, tensor::DType weights,
                                bool fp8_allowed) {
  if (value.empty()) return weights == tensor::DType::kF32 ? weights : tensor::DType::kBF16;
  if (value == "f32") return tensor::DType::kF32;
  if (value == "bf16") return tensor::DType::kBF16;
  if (value == "fp8" && fp8_allowed) return tensor::DType::kF8E4M3;
  if (value == "fp8")
    fail_input(
        "{} fp8: the latent cache is stored f32 or bf16 (fp8 applies to "
        "--indexer-cache-dtype; `handoff plan` can size an fp8 latent cache)",
        flag);
  fail_input("{} must be f32, bf16{}, got '{}'", flag, fp8_allowed ? " or fp8" : "", value);
}

}  // namespace

void add_cache_dtype_flags(CLI::App& cmd, CacheDtypeFlags& flags) {
  cmd.add_option("--kv-cache-dtype", flags.latent,
                 "Cache rows of the latent c_kv + k_pe: f32 or bf16 (default: f32 with --dtype "
                 "f32, else bf16)");
  cmd.add_option("--indexer-cache-dtype", flags.indexer,
                 "Cache rows of the DSA indexer's key: f32, bf16 or fp8 (the reference's FP8 "
                 "indexer: Hadamard-rotated e4m3 with power-of-two block scales; default as "
                 "--kv-cache-dtype; DSA models only)");
}

void apply_cache_dtype_flags(const CacheDtypeFlags& flags, const model::ModelConfig& config,
                             model::LoadOptions& load) {
  load.latent_cache_dtype = parse_cache_dtype(flags.latent, "--kv-cache-dtype", load.dtype, false);
  if (!flags.indexer.empty() && !config.has_indexer)
    fail_input("--indexer-cache-dtype: the model ({}) has no DSA indexer", config.model_type);
  load.index_cache_dtype =
      parse_cache_dtype(flags.indexer, "--indexer-cache-dtype", load.dtype, true);
  const int64_t d = config.index_head_dim;
  if (load.index_cache_dtype == tensor::DType::kF8E4M3 && (d <= 0 || (d & (d - 1)) != 0))
    fail_input(
        "--indexer-cache-dtype fp8 rotates the index key by a Hadamard transform, which needs "
        "index_head_dim to be a power of two; config.json has {}",
        d);
}

}  // namespace handoff::cli
